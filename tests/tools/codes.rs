//! `ringmq admin`'s commands over request codes the broker serves since the admin request
//! codes work: deleteSubGroup (DELETE_SUBSCRIPTIONGROUP), updateBrokerConfig
//! (UPDATE_BROKER_CONFIG) and resetOffsetByTime with a consumer online
//! (INVOKE_BROKER_TO_RESET_OFFSET), against a real `ringmq serve`.

use crate::raw_support;

use raw_support::admin::{admin, commit_offset, create_topic, groups_of};
use raw_support::{Conn, RawBroker};
use ringmq::protocol::codes::request_code;
use ringmq::protocol::RemotingCommand;

fn start() -> RawBroker {
    RawBroker::start(&["shardCount=2", "pinCores=false"])
}

/// deleteSubGroup removes the group from the broker (DELETE_SUBSCRIPTIONGROUP).
#[test]
fn delete_sub_group_removes_the_group() {
    let b = start();
    let broker = b.broker.to_string();
    admin(
        b.namesrv,
        &["updateSubGroup", "-b", &broker, "-g", "AdmGone"],
    )
    .ok();
    assert!(groups_of(b.broker)
        .subscription_group_table
        .contains_key("AdmGone"));
    admin(
        b.namesrv,
        &[
            "deleteSubGroup",
            "-b",
            &broker,
            "-g",
            "AdmGone",
            "-r",
            "true",
        ],
    )
    .ok();
    assert!(!groups_of(b.broker)
        .subscription_group_table
        .contains_key("AdmGone"));
}

/// updateBrokerConfig changes a key that getBrokerConfig then shows (UPDATE_BROKER_CONFIG);
/// a key the broker cannot change is exit 1 naming it.
#[test]
fn update_broker_config_changes_the_key() {
    let b = start();
    let ns = b.namesrv;
    let addr = b.broker.to_string();
    admin(
        ns,
        &[
            "updateBrokerConfig",
            "-b",
            &addr,
            "-k",
            "maxReconsumeTimes",
            "-v",
            "7",
        ],
    )
    .ok();
    let j = admin(ns, &["getBrokerConfig", "-b", &addr, "--json"])
        .ok()
        .json();
    assert_eq!(j[&addr]["maxReconsumeTimes"], "7", "{j}");
    let r = admin(
        ns,
        &[
            "updateBrokerConfig",
            "-b",
            &addr,
            "-k",
            "brokerName",
            "-v",
            "x",
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("brokerName"), "{r:?}");
}

/// With a consumer of the group online, resetOffsetByTime goes through the broker: the
/// consumer gets RESET_CONSUMER_CLIENT_OFFSET and the group's offset moves to the time given.
#[test]
fn reset_offset_by_time_with_a_consumer_online() {
    let b = start();
    let ns = b.namesrv;
    create_topic(ns, b.broker, "AdmR", 1);
    for body in ["a", "b", "c"] {
        admin(ns, &["sendMessage", "-t", "AdmR", "-p", body, "-i", "0"]).ok();
    }
    commit_offset(b.broker, "AdmRG", "AdmR", 0, 3);
    let mut conn = Conn::connect(b.broker);
    let hb = r#"{"clientID":"adm-reset@1","consumerDataSet":[{"groupName":"AdmRG",
        "consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",
        "consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"topic":"AdmR",
        "subString":"*","expressionType":"TAG","tagsSet":[],"codeSet":[],"subVersion":1}]}]}"#;
    let r = conn.call(RemotingCommand::new_request(request_code::HEART_BEAT).with_body(hb));
    assert_eq!(r.code, 0, "{:?}", r.remark);

    let j = admin(
        ns,
        &[
            "resetOffsetByTime",
            "-g",
            "AdmRG",
            "-t",
            "AdmR",
            "-s",
            "0",
            "--json",
        ],
    )
    .ok()
    .json();
    assert_eq!(j["offsetTable"][0]["offset"], 0, "{j}");
    loop {
        let cmd = conn
            .read()
            .expect("connection closed before the reset reached the consumer");
        if !cmd.is_response() && cmd.code == request_code::RESET_CONSUMER_CLIENT_OFFSET {
            break;
        }
    }
    let p = admin(ns, &["consumerProgress", "-g", "AdmRG", "--json"])
        .ok()
        .json();
    assert_eq!(p["offsetTable"][0]["consumerOffset"], 0, "{p}");
}
