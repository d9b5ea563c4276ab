// Proves VIEW_BROKER_STATS_DATA (315) over the raw protocol: Java's `BrokerStatsData` body
// (statsMinute/statsHour/statsDay, each {sum, tps, avgpt}) for the stats mqadmin `statsAll`
// and rocketmq-exporter ask for, counting what was sent and pulled, and Java's SYSTEM_ERROR for
// a stats item that does not exist.

use crate::raw_support;

use std::time::{Duration, Instant};

use raw_support::*;
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

const SENT: usize = 12;
const BODY: &[u8] = b"stats-0123456789";

fn stats(c: &mut Conn, name: &str, key: &str) -> RemotingCommand {
    c.call(
        RemotingCommand::new_request(request_code::VIEW_BROKER_STATS_DATA)
            .with_ext("statsName", name)
            .with_ext("statsKey", key),
    )
}

/// Asks for `name`/`key` until its minute sum is `want` (shard 0 samples every 10 s), returning
/// the body as JSON.
fn minute_sum_reaches(c: &mut Conn, name: &str, key: &str, want: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = stats(c, name, key);
        if r.code == response_code::SUCCESS {
            let v: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON body");
            if v["statsMinute"]["sum"] == want {
                return v;
            }
            assert!(Instant::now() < deadline, "{name} {key}: {v}");
        } else {
            assert!(Instant::now() < deadline, "{name} {key}: {:?}", r.remark);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Sends and pulls show in TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS and BROKER_PUT_NUMS
/// with Java's field names, GET_CONSUME_STATS' consumeTps and GET_TOPIC_STATS_INFO's topicPutTps
/// are no longer 0, the group's pullOffset is where its pull ended, and an unknown key is
/// SYSTEM_ERROR "The stats <name> <key> not exist".
#[test]
fn broker_stats_data_counts_sends_and_pulls() {
    let b = RawBroker::start(&["brokerClusterName=StatsCluster"]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(create_topic_cmd("StatsT", 1));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    for _ in 0..SENT {
        let r = c.call(send_cmd("StatsT", 0, BODY, ""));
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    let pull = pull_cmd("StatsT", 0, 0, 0).with_ext("consumerGroup", "StatsG");
    let r = c.call(pull);
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    let v = minute_sum_reaches(&mut c, "TOPIC_PUT_NUMS", "StatsT", SENT as u64);
    for window in ["statsMinute", "statsHour", "statsDay"] {
        let item = v[window]
            .as_object()
            .unwrap_or_else(|| panic!("{window}: {v}"));
        let mut keys: Vec<&str> = item.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["avgpt", "sum", "tps"], "{v}");
        assert!(item["tps"].is_f64() && item["avgpt"].is_f64(), "{v}");
    }
    assert!(v["statsMinute"]["tps"].as_f64().unwrap() > 0.0, "{v}");
    let size = minute_sum_reaches(
        &mut c,
        "TOPIC_PUT_SIZE",
        "StatsT",
        (SENT * BODY.len()) as u64,
    );
    assert_eq!(size["statsMinute"]["avgpt"], BODY.len() as f64, "{size}");
    let got = minute_sum_reaches(&mut c, "GROUP_GET_NUMS", "StatsT@StatsG", SENT as u64);
    // GET_CONSUME_STATS' consumeTps is that window's rate (Java's tpsGroupGetNums).
    let r = c.call(
        RemotingCommand::new_request(request_code::GET_CONSUME_STATS)
            .with_ext("consumerGroup", "StatsG")
            .with_ext("topic", "StatsT"),
    );
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let body = String::from_utf8_lossy(&r.body).into_owned();
    let tps: f64 = body
        .strip_prefix("{\"consumeTps\":")
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no consumeTps in {body}"));
    assert!(tps > 0.0, "{body} ({got})");
    // The group committed nothing: its pull offset is where its one pull ended.
    assert!(
        body.contains(&format!(
            "\"consumerOffset\":0,\"lastTimestamp\":0,\"pullOffset\":{SENT}"
        )),
        "{body}"
    );
    // GET_TOPIC_STATS_INFO's topicPutTps is TOPIC_PUT_NUMS' minute rate (Java's
    // tpsTopicPutNums).
    let r = c.call(
        RemotingCommand::new_request(request_code::GET_TOPIC_STATS_INFO)
            .with_ext("topic", "StatsT"),
    );
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let body = String::from_utf8_lossy(&r.body).into_owned();
    let put_tps: f64 = body
        .rsplit_once("\"topicPutTps\":")
        .and_then(|(_, rest)| rest.strip_suffix('}'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no topicPutTps in {body}"));
    assert!(put_tps > 0.0, "{body} ({v})");
    let broker = minute_sum_reaches(&mut c, "BROKER_PUT_NUMS", "StatsCluster", SENT as u64);
    assert_eq!(broker["statsMinute"]["sum"], SENT as u64, "{broker}");

    let r = stats(&mut c, "TOPIC_PUT_NUMS", "NoSuchTopic");
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert_eq!(
        r.remark.as_deref(),
        Some("The stats <TOPIC_PUT_NUMS> <NoSuchTopic> not exist")
    );
    let r = stats(&mut c, "NO_SUCH_STATS", "StatsT");
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
}
