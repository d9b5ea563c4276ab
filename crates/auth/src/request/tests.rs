//! The resources and actions derived from requests, as Java's authorization context builder
//! derives them.

use super::*;

fn req(code: i32, fields: &[(&str, &str)]) -> RemotingCommand {
    let mut c = RemotingCommand::new_request(code);
    for (k, v) in fields {
        c.set_ext(k, v);
    }
    c
}

fn summary(cmd: &RemotingCommand) -> Vec<(String, Vec<&'static str>)> {
    checks(cmd, "DefaultCluster")
        .unwrap()
        .iter()
        .map(|c| {
            (
                c.requested().key(),
                c.actions.iter().map(|a| a.name()).collect(),
            )
        })
        .collect()
}

fn pairs(v: &[(&str, &[&'static str])]) -> Vec<(String, Vec<&'static str>)> {
    v.iter().map(|(k, a)| (k.to_string(), a.to_vec())).collect()
}

#[test]
fn sends_publish_to_their_topic_and_retry_sends_consume_their_group() {
    let v2 = req(rc::SEND_MESSAGE_V2, &[("a", "pg"), ("b", "orders")]);
    assert_eq!(summary(&v2), pairs(&[("Topic:orders", &["Pub"])]));
    let retry = req(rc::SEND_MESSAGE_V2, &[("a", "cg"), ("b", "%RETRY%cg")]);
    assert_eq!(summary(&retry), pairs(&[("Group:cg", &["Sub"])]));
    let v1 = req(
        rc::SEND_MESSAGE,
        &[("producerGroup", "pg"), ("topic", "%RETRY%cg")],
    );
    assert_eq!(summary(&v1), pairs(&[("Group:cg", &["Sub"])]));
    let batch = req(rc::SEND_BATCH_MESSAGE, &[("b", "t")]);
    assert_eq!(summary(&batch), pairs(&[("Topic:t", &["Pub"])]));
}

#[test]
fn pulls_and_offsets_name_the_topic_and_the_group() {
    let pull = req(rc::PULL_MESSAGE, &[("consumerGroup", "cg"), ("topic", "t")]);
    assert_eq!(
        summary(&pull),
        pairs(&[("Topic:t", &["Sub"]), ("Group:cg", &["Sub"])])
    );
    let retry_pull = req(
        rc::PULL_MESSAGE,
        &[("consumerGroup", "cg"), ("topic", "%RETRY%cg")],
    );
    assert_eq!(summary(&retry_pull), pairs(&[("Group:cg", &["Sub"])]));
    let commit = req(
        rc::UPDATE_CONSUMER_OFFSET,
        &[("consumerGroup", "cg"), ("topic", "t")],
    );
    assert_eq!(
        summary(&commit),
        pairs(&[
            ("Topic:t", &["Sub", "Update"]),
            ("Group:cg", &["Sub", "Update"])
        ])
    );
}

#[test]
fn heartbeats_and_locks_are_read_from_their_bodies() {
    let mut hb = req(rc::HEART_BEAT, &[]);
    hb.body = br#"{"clientID":"c","consumerDataSet":[{"groupName":"cg","subscriptionDataSet":[{"topic":"t"},{"topic":"%RETRY%cg"}]}],"producerDataSet":[{"groupName":"pg"}]}"#.to_vec().into();
    assert_eq!(
        summary(&hb),
        pairs(&[("Group:cg", &["Sub"]), ("Topic:t", &["Sub"])])
    );
    let mut lock = req(rc::LOCK_BATCH_MQ, &[]);
    lock.body = br#"{"consumerGroup":"cg","clientId":"c","mqSet":[{"topic":"t","brokerName":"b","queueId":1}]}"#.to_vec().into();
    assert_eq!(
        summary(&lock),
        pairs(&[("Group:cg", &["Sub"]), ("Topic:t", &["Sub"])])
    );
    let mut bad = req(rc::HEART_BEAT, &[]);
    bad.body = b"{not json".to_vec().into();
    assert!(checks(&bad, "c").is_err());
}

#[test]
fn admin_requests_need_their_resource_or_the_cluster() {
    let create = req(rc::UPDATE_AND_CREATE_TOPIC, &[("topic", "t")]);
    assert_eq!(summary(&create), pairs(&[("Topic:t", &["Create"])]));
    let del = req(rc::DELETE_SUBSCRIPTIONGROUP, &[("groupName", "g")]);
    assert_eq!(summary(&del), pairs(&[("Group:g", &["Delete"])]));
    let conf = req(rc::UPDATE_BROKER_CONFIG, &[]);
    assert_eq!(
        summary(&conf),
        pairs(&[("Cluster:DefaultCluster", &["Update"])])
    );
    let read = req(rc::GET_BROKER_RUNTIME_INFO, &[]);
    assert_eq!(
        summary(&read),
        pairs(&[("Cluster:DefaultCluster", &["Get"])])
    );
    let stats = req(
        rc::GET_CONSUME_STATS,
        &[("consumerGroup", "g"), ("topicList", "a;b")],
    );
    assert_eq!(
        summary(&stats),
        pairs(&[
            ("Group:g", &["Get"]),
            ("Topic:a", &["Get"]),
            ("Topic:b", &["Get"])
        ])
    );
    assert!(summary(&req(rc::GET_ALL_TOPIC_CONFIG, &[])).is_empty());
    assert_eq!(
        summary(&req(9999, &[])),
        pairs(&[("Cluster:DefaultCluster", &["Update"])]),
        "an unknown code needs the cluster"
    );
}
