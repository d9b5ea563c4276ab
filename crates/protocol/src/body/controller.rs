//! The controller's JSON bodies (RocketMQ 5's `SyncStateSet`, `ElectMasterResponseBody`,
//! `BrokerMemberGroup`, `BrokerReplicasInfo`, `EpochEntry`, `EpochEntryCache`), with their Java
//! field names. A controller answers brokers and admin tools with them; a broker sends its
//! proposed SyncStateSet in one and reports its epochs in another.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::null_default;

/// The broker ids (the master's included) that are caught up with the master, versioned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SyncStateSet {
    #[serde(deserialize_with = "null_default")]
    pub sync_state_set: BTreeSet<i64>,
    pub sync_state_set_epoch: i32,
}

/// A broker group's members: broker id -> address.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BrokerMemberGroup {
    #[serde(deserialize_with = "null_default")]
    pub broker_addrs: BTreeMap<i64, String>,
    pub broker_name: String,
    pub cluster: String,
}

/// CONTROLLER_ELECT_MASTER's answer body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ElectMasterResponseBody {
    pub broker_member_group: Option<BrokerMemberGroup>,
    #[serde(deserialize_with = "null_default")]
    pub sync_state_set: BTreeSet<i64>,
}

/// One replica as CONTROLLER_GET_SYNC_STATE_DATA lists it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ReplicaIdentity {
    pub alive: bool,
    pub broker_address: String,
    pub broker_id: i64,
    pub broker_name: String,
}

/// A broker group's replication state as CONTROLLER_GET_SYNC_STATE_DATA lists it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ReplicasInfo {
    #[serde(deserialize_with = "null_default")]
    pub in_sync_replicas: Vec<ReplicaIdentity>,
    pub master_address: Option<String>,
    pub master_broker_id: Option<i64>,
    pub master_epoch: Option<i32>,
    #[serde(deserialize_with = "null_default")]
    pub not_in_sync_replicas: Vec<ReplicaIdentity>,
    pub sync_state_set_epoch: Option<i32>,
}

/// CONTROLLER_GET_SYNC_STATE_DATA's answer: brokerName -> its replicas.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BrokerReplicasInfo {
    #[serde(deserialize_with = "null_default")]
    pub replicas_info_table: BTreeMap<String, ReplicasInfo>,
}

/// One epoch of a broker's commit log: from `startOffset` to `endOffset` (exclusive; the last
/// epoch is open, Java's `Long.MAX_VALUE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EpochEntry {
    pub end_offset: i64,
    pub epoch: i32,
    pub start_offset: i64,
}

impl Default for EpochEntry {
    fn default() -> Self {
        EpochEntry {
            end_offset: i64::MAX,
            epoch: 0,
            start_offset: 0,
        }
    }
}

/// GET_BROKER_EPOCH_CACHE's answer: a broker's epochs and its commit log's end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EpochEntryCache {
    pub broker_id: i64,
    pub broker_name: String,
    pub cluster_name: String,
    #[serde(deserialize_with = "null_default")]
    pub epoch_list: Vec<EpochEntry>,
    pub max_offset: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{from_json, to_json};

    /// Java's field names round-trip, and fastjson's unquoted integer keys are read.
    #[test]
    fn controller_bodies_use_java_names() {
        let s = SyncStateSet {
            sync_state_set: [0, 2].into(),
            sync_state_set_epoch: 3,
        };
        let json = String::from_utf8(to_json(&s)).unwrap();
        assert_eq!(json, r#"{"syncStateSet":[0,2],"syncStateSetEpoch":3}"#);
        assert_eq!(from_json::<SyncStateSet>(json.as_bytes()).unwrap(), s);
        let body = br#"{"brokerMemberGroup":{"brokerAddrs":{1:"a:1",2:"b:2"},"brokerName":"b","cluster":"c"},"syncStateSet":[1]}"#;
        let e: ElectMasterResponseBody = from_json(body).unwrap();
        let g = e.broker_member_group.unwrap();
        assert_eq!(g.broker_addrs.get(&2).map(String::as_str), Some("b:2"));
        assert_eq!(e.sync_state_set, [1].into());
        let c: EpochEntryCache =
            from_json(br#"{"brokerId":1,"epochList":[{"epoch":2,"startOffset":7}],"maxOffset":9}"#)
                .unwrap();
        assert_eq!(c.epoch_list[0].end_offset, i64::MAX);
        assert_eq!(c.epoch_list[0].start_offset, 7);
    }
}
