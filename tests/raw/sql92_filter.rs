//! Proves SQL92 property filtering on pulls: exactly the matching messages come back, a filtered
//! pull still advances, a malformed expression is rejected with SUBSCRIPTION_PARSE_FAILED, and a
//! broker without enablePropertyFilter refuses SQL92 clearly.

use crate::raw_support;

use raw_support::{pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

fn sql_pull(topic: &str, offset: i64, expr: &str) -> RemotingCommand {
    let mut c = pull_cmd(topic, 0, offset, 0);
    c.set_ext("subscription", expr);
    c.set_ext("expressionType", "SQL92");
    c
}

#[test]
fn sql92_selects_exactly_the_matching_messages() {
    let b = RawBroker::start(&["enablePropertyFilter=true"]);
    let mut c = Conn::connect(b.broker);
    let regions = ["eu", "us", "cn"];
    let mut expected = Vec::new();
    for i in 0..30 {
        let region = regions[i % 3];
        let props = format!(
            "a\u{1}{}\u{2}region\u{1}{region}\u{2}TAGS\u{1}T{}\u{2}",
            i % 10,
            i % 2
        );
        let body = format!("m{i}");
        assert_eq!(c.call(send_cmd("SqlT", 0, body.as_bytes(), &props)).code, 0);
        if i % 10 > 5 && region != "cn" {
            expected.push(body);
        }
    }
    // One message without the property `a`: unknown, never a match.
    assert_eq!(
        c.call(send_cmd("SqlT", 0, b"no-a", "region\u{1}eu\u{2}"))
            .code,
        0
    );
    let mut got = Vec::new();
    let mut offset = 0;
    for _ in 0..100 {
        let r = c.call(sql_pull("SqlT", offset, "a > 5 AND region IN ('eu','us')"));
        let next: i64 = r.ext("nextBeginOffset").unwrap().parse().unwrap();
        match r.code {
            0 => got.extend(
                records(&r.body)
                    .iter()
                    .map(|m| String::from_utf8(m.body.to_vec()).unwrap()),
            ),
            c if c == response_code::PULL_RETRY_IMMEDIATELY => {
                assert!(next > offset, "no progress")
            }
            c if c == response_code::PULL_NOT_FOUND => break,
            other => panic!("unexpected code {other}: {:?}", r.remark),
        }
        offset = next;
    }
    assert_eq!(got, expected);
    assert_eq!(offset, 31);
    // Malformed: a clear parse failure.
    let r = c.call(sql_pull("SqlT", 0, "a > AND"));
    assert_eq!(r.code, response_code::SUBSCRIPTION_PARSE_FAILED);
    assert!(r.remark.unwrap().contains("a > AND"));
    // CHECK_CLIENT_CONFIG rejects it too.
    let body = br#"{"clientId":"c1","group":"g","subscriptionData":{"classFilterMode":false,"codeSet":[],"expressionType":"SQL92","subString":"region IN (","subVersion":1,"tagsSet":[],"topic":"SqlT"}}"#;
    let r = c.call(
        RemotingCommand::new_request(request_code::CHECK_CLIENT_CONFIG).with_body(body.to_vec()),
    );
    assert_eq!(r.code, response_code::SUBSCRIPTION_PARSE_FAILED);
}

#[test]
fn sql92_refused_without_property_filter() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    assert_eq!(c.call(send_cmd("SqlOffT", 0, b"x", "a\u{1}9\u{2}")).code, 0);
    let r = c.call(sql_pull("SqlOffT", 0, "a > 5"));
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(r.remark.unwrap().contains("SQL92"));
}
