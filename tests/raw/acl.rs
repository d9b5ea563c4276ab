//! Access control over the raw protocol, with ACL 1.0's `plain_acl.yml` (read as Java 5.3's
//! migration reads it into ACL 2.0's users and ACLs): a request signed with the right key
//! passes; a missing key, an unknown user, a wrong secret, a tampered header or body, a
//! request replayed for another topic and an action the user's rules do not allow are each
//! refused with NO_PERMISSION and a remark saying why, and nothing of them is stored. Admin
//! codes need an admin account. Oneway refusals get no answer; refusals are logged with the
//! client's address.

use crate::raw_support;

use std::time::Duration;

use ringmq::auth::signature::sign_request;
use ringmq::protocol::codes::{request_code as req, response_code as rc};
use ringmq::protocol::RemotingCommand;

use raw_support::{create_topic_cmd, pull_cmd, records, send_cmd, Conn, RawBroker};

const ALICE: (&str, &str) = ("alice", "alice-secret-1");
const OPS: (&str, &str) = ("ops", "ops-secret-1");

const PLAIN_ACL: &str = "\
accounts:
  - accessKey: alice
    secretKey: alice-secret-1
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - orders=PUB|SUB
      - audit=SUB
  - accessKey: ops
    secretKey: ops-secret-1
    admin: true
";

/// A broker with aclEnable and the accounts above; its log goes to `log` when given.
fn start(
    acl_text: &str,
    extra: &[&str],
    log: Option<&std::path::Path>,
) -> (RawBroker, tempfile::TempDir) {
    let conf = tempfile::tempdir().expect("tempdir");
    let file = conf.path().join("plain_acl.yml");
    std::fs::write(&file, acl_text).expect("write plain_acl.yml");
    let file_opt = format!("rocketmq.acl.plain.file={}", file.display());
    let mut opts = vec!["aclEnable=true", file_opt.as_str()];
    opts.extend_from_slice(extra);
    let store = tempfile::tempdir().expect("tempdir");
    let broker = match log {
        Some(l) => RawBroker::start_logged(store, &opts, l),
        None => RawBroker::start_in(store, &opts),
    };
    (broker, conf)
}

fn signed(mut cmd: RemotingCommand, (ak, sk): (&str, &str)) -> RemotingCommand {
    sign_request(&mut cmd, ak, sk).expect("sign");
    cmd
}

fn refused(resp: &RemotingCommand, why: &str) {
    assert_eq!(resp.code, rc::NO_PERMISSION, "{why}: {resp:?}");
}

fn remark(resp: &RemotingCommand) -> &str {
    resp.remark.as_deref().unwrap_or_default()
}

/// The messages stored in `topic` (its four queues), asked by the admin account.
fn stored(conn: &mut Conn, topic: &str) -> i64 {
    (0..4)
        .map(|q| {
            let cmd = RemotingCommand::new_request(req::GET_MAX_OFFSET)
                .with_ext("topic", topic)
                .with_ext("queueId", q);
            let r = conn.call(signed(cmd, OPS));
            assert_eq!(r.code, rc::SUCCESS, "max offset of {topic}/{q}: {r:?}");
            r.ext("offset")
                .and_then(|o| o.parse::<i64>().ok())
                .expect("offset")
        })
        .sum()
}

#[test]
fn the_right_key_is_accepted_and_every_forgery_is_refused() {
    let (broker, _conf) = start(PLAIN_ACL, &[], None);
    let mut c = Conn::connect(broker.broker);

    // Admin codes: the admin account may create topics; alice may not.
    for topic in ["orders", "audit"] {
        let r = c.call(signed(create_topic_cmd(topic, 4), OPS));
        assert_eq!(r.code, rc::SUCCESS, "ops creates {topic}: {r:?}");
    }
    // Under aclEnable, ACL 1.0's rules: a request that changes the broker's topics, groups or
    // config, or touches the cluster, needs an admin account.
    let r = c.call(signed(create_topic_cmd("alice-topic", 4), ALICE));
    refused(&r, "alice creates a topic");
    assert_eq!(
        remark(&r),
        "Need admin permission for request code=17, but accessKey=alice is not"
    );
    let update = RemotingCommand::new_request(req::UPDATE_BROKER_CONFIG)
        .with_body(b"autoCreateTopicEnable=false\n".to_vec());
    let r = c.call(signed(update, ALICE));
    refused(&r, "alice updates the broker config");
    assert!(remark(&r).contains("code=25"), "{r:?}");
    // A read ACL 1.0 never checked a resource for needs only the signature.
    let max = RemotingCommand::new_request(req::GET_MAX_OFFSET)
        .with_ext("topic", "orders")
        .with_ext("queueId", 0);
    assert_eq!(c.call(signed(max, ALICE)).code, rc::SUCCESS);

    // alice's signed send to a topic she may publish to.
    let ok = c.call(signed(send_cmd("orders", 0, b"signed-1", ""), ALICE));
    assert_eq!(ok.code, rc::SUCCESS, "{ok:?}");

    // No key at all.
    let r = c.call(send_cmd("orders", 0, b"unsigned", ""));
    refused(&r, "unsigned");
    assert_eq!(remark(&r), "username cannot be null.");

    // An empty key, as the C++ client sends without credentials.
    let r = c.call(signed(send_cmd("orders", 0, b"empty-key", ""), ("", "")));
    refused(&r, "empty key");
    assert_eq!(remark(&r), "username cannot be null.");

    // A user nobody created.
    let r = c.call(signed(send_cmd("orders", 0, b"bob", ""), ("bob", "x")));
    refused(&r, "unknown user");
    assert_eq!(remark(&r), "User:bob is not found.");

    // alice's name with another secret.
    let r = c.call(signed(
        send_cmd("orders", 0, b"wrong-secret", ""),
        ("alice", "guess"),
    ));
    refused(&r, "wrong secret");
    assert_eq!(remark(&r), "check signature failed.");

    // Signed, then the body changed.
    let mut cmd = signed(send_cmd("orders", 0, b"original", ""), ALICE);
    cmd.body = bytes::Bytes::from_static(b"tampered");
    refused(&c.call(cmd), "tampered body");

    // Signed, then a header field changed (the queue).
    let mut cmd = signed(send_cmd("orders", 0, b"queue-0", ""), ALICE);
    cmd.ext_fields.insert("e", "1");
    refused(&c.call(cmd), "tampered header");

    // Signed, then a field added (a property smuggled in).
    let mut cmd = signed(send_cmd("orders", 0, b"props", ""), ALICE);
    cmd.ext_fields.insert("extra", "1");
    refused(&c.call(cmd), "added field");

    // A request signed for `orders` replayed against `audit`.
    let mut cmd = signed(send_cmd("orders", 0, b"replayed", ""), ALICE);
    cmd.ext_fields.insert("b", "audit");
    let r = c.call(cmd);
    refused(&r, "replay for another topic");
    assert_eq!(remark(&r), "check signature failed.");

    // Correctly signed, but alice may only subscribe to `audit`, and nothing else by default.
    let r = c.call(signed(send_cmd("audit", 0, b"not-allowed", ""), ALICE));
    refused(&r, "pub on a sub-only topic");
    assert!(
        remark(&r).contains("User:alice") && remark(&r).contains("Topic:audit"),
        "{r:?}"
    );
    assert!(remark(&r).contains("needs Pub"), "{r:?}");
    let r = c.call(signed(send_cmd("elsewhere", 0, b"denied", ""), ALICE));
    refused(&r, "default DENY");

    // Nothing refused was stored, nor a topic created on the way.
    assert_eq!(
        stored(&mut c, "orders"),
        1,
        "only the signed send is stored"
    );
    assert_eq!(stored(&mut c, "audit"), 0);
    let route =
        RemotingCommand::new_request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "elsewhere");
    let mut ns = Conn::connect(broker.namesrv);
    assert_eq!(ns.call(route).code, rc::TOPIC_NOT_EXIST);

    // alice reads what she sent; the same pull unsigned is refused.
    let r = c.call(signed(pull_cmd("orders", 0, 0, 0), ALICE));
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    let got = records(&r.body);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, b"signed-1");
    refused(&c.call(pull_cmd("orders", 0, 0, 0)), "unsigned pull");
    // A topic she has no rule for falls to the default DENY.
    refused(
        &c.call(signed(pull_cmd("elsewhere", 0, 0, 0), ALICE)),
        "pull denied topic",
    );
}

/// A refused oneway request gets no answer and the connection goes on; refusals are logged
/// with the client's address.
#[test]
fn oneway_refusals_are_silent_and_refusals_are_logged() {
    let logs = tempfile::tempdir().expect("tempdir");
    let log = logs.path().join("broker.log");
    let (broker, _conf) = start(PLAIN_ACL, &[], Some(&log));
    let mut c = Conn::connect(broker.broker);
    let mut oneway = send_cmd("orders", 0, b"oneway", "");
    oneway.set_oneway();
    c.send(oneway);
    let r = c.call(signed(create_topic_cmd("orders", 4), OPS));
    assert_eq!(
        r.code,
        rc::SUCCESS,
        "the next answer is the next request's: {r:?}"
    );
    let peer = c.stream.local_addr().expect("local addr").to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let line = text
            .lines()
            .find(|l| l.contains("request refused by access control"));
        if let Some(line) = line {
            assert!(line.contains(&peer), "the log names the client: {line}");
            assert!(line.contains("username cannot be null"), "{line}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no refusal logged:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The plain ACL file's global whitelist lets a loopback client through unsigned; ACL 2.0's
/// request-code whitelist lets one code through.
#[test]
fn whitelists_let_requests_through() {
    let text = format!("globalWhiteRemoteAddresses:\n  - 127.0.0.*\n{PLAIN_ACL}");
    let (broker, _conf) = start(&text, &[], None);
    let mut c = Conn::connect(broker.broker);
    assert_eq!(c.call(create_topic_cmd("open", 4)).code, rc::SUCCESS);
    assert_eq!(c.call(send_cmd("open", 0, b"x", "")).code, rc::SUCCESS);

    // GET_MAX_OFFSET (30) needs neither check; everything else still does.
    let (broker, _conf) = start(
        PLAIN_ACL,
        &["authenticationWhitelist=30", "authorizationWhitelist=30"],
        None,
    );
    let mut c = Conn::connect(broker.broker);
    let q = RemotingCommand::new_request(req::GET_MAX_OFFSET)
        .with_ext("topic", "TBW102")
        .with_ext("queueId", 0);
    assert_eq!(c.call(q).code, rc::SUCCESS);
    refused(&c.call(create_topic_cmd("x", 4)), "not whitelisted");
}

/// ACL 2.0's keys alone: `initAuthenticationUser` is a Super user; authentication without
/// authorization lets any known, correctly signed user do anything.
#[test]
fn acl_2_init_user_and_authentication_only() {
    let store = tempfile::tempdir().expect("tempdir");
    let broker = RawBroker::start_in(
        store,
        &[
            "authenticationEnabled=true",
            r#"initAuthenticationUser={"username":"root","password":"root-secret"}"#,
        ],
    );
    let mut c = Conn::connect(broker.broker);
    let root = ("root", "root-secret");
    assert_eq!(
        c.call(signed(create_topic_cmd("t2", 4), root)).code,
        rc::SUCCESS
    );
    assert_eq!(
        c.call(signed(send_cmd("t2", 0, b"x", ""), root)).code,
        rc::SUCCESS
    );
    refused(&c.call(send_cmd("t2", 0, b"x", "")), "unsigned");
    refused(
        &c.call(signed(send_cmd("t2", 0, b"x", ""), ("root", "nope"))),
        "wrong secret",
    );
}

/// A malformed plain ACL file, or a named one that is missing, stops start-up with a message
/// naming it.
#[test]
fn a_bad_plain_acl_file_stops_start_up() {
    for (text, want) in [
        (Some("accounts: [ {accessKey: a"), "plain_acl.yml"),
        (None, "cannot read the plain ACL file"),
    ] {
        let conf = tempfile::tempdir().expect("tempdir");
        let file = conf.path().join("plain_acl.yml");
        if let Some(t) = text {
            std::fs::write(&file, t).expect("write");
        }
        let store = tempfile::tempdir().expect("tempdir");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
            .args([
                "serve",
                "--namesrv-listen",
                "127.0.0.1:0",
                "--console-listen",
                "off",
            ])
            .args(["--broker-listen", "127.0.0.1:0", "--store-dir"])
            .arg(store.path())
            .args(["-o", "aclEnable=true", "-o"])
            .arg(format!("rocketmq.acl.plain.file={}", file.display()))
            .output()
            .expect("run ringmq");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
        assert!(err.contains(&file.display().to_string()), "{err}");
    }
}

/// An edited plain_acl.yml takes effect without a restart; one that no longer parses leaves
/// the accounts read before in force.
#[test]
fn an_edited_plain_acl_file_is_read_again() {
    let (broker, conf) = start(PLAIN_ACL, &[], None);
    let file = conf.path().join("plain_acl.yml");
    let mut c = Conn::connect(broker.broker);
    assert_eq!(
        c.call(signed(create_topic_cmd("audit", 4), OPS)).code,
        rc::SUCCESS
    );
    refused(
        &c.call(signed(send_cmd("audit", 0, b"before", ""), ALICE)),
        "audit is SUB only",
    );
    std::fs::write(&file, PLAIN_ACL.replace("audit=SUB", "audit=PUB")).expect("edit");
    let until = |want: i32, c: &mut Conn| {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let r = c.call(signed(send_cmd("audit", 0, b"after", ""), ALICE));
            if r.code == want {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "still {r:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    until(rc::SUCCESS, &mut c);
    std::fs::write(&file, "accounts: [ {accessKey: broken").expect("break");
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        c.call(signed(send_cmd("audit", 0, b"kept", ""), ALICE))
            .code,
        rc::SUCCESS,
        "a broken file leaves the last good accounts"
    );
}
