//! JSON bodies with RocketMQ's fastjson field names: heartbeat, queue locks, topic and group
//! administration, routes and broker registration.
//!
//! Structs mirror the Java classes clients and name servers exchange; field order is
//! alphabetical by JSON name because fastjson sorts, so our output reads like Java's. Enums
//! are written as their Java names and declared in their Java enum's order, because fastjson
//! also reads an enum from its ordinal (the C++ client 2.1 sends ordinals) and so does
//! `from_json`; unknown names and ordinals land on an `Unknown` variant instead of failing a
//! whole heartbeat. Inputs are read as leniently as fastjson reads them, in one place
//! (`fastjson::from_json`): missing fields take Java's defaults, unknown fields are ignored,
//! numbers may come inside strings, and integer map keys may be unquoted. Called by broker and
//! name-server handlers, config-file persistence and the load generator.

mod controller;
mod fastjson;
mod register_compressed;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer, Serialize};

pub use controller::*;
pub use fastjson::{from_json, to_fastjson_legacy, to_json};
pub use register_compressed::{
    decode_register_broker_body, decode_topic_config, encode_register_broker_body_compressed,
    encode_topic_config,
};

/// Reads `null` as the type's default (rocketmq-rust may emit nulls where fastjson omits).
fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DataVersion {
    pub counter: i64,
    pub state_version: i64,
    pub timestamp: i64,
}

/// Java's `TopicFilterType`, in its declaration order (ordinals index it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TopicFilterType {
    #[default]
    SingleTag,
    MultiTag,
    #[serde(other)]
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopicConfig {
    pub attributes: BTreeMap<String, String>,
    pub order: bool,
    pub perm: i32,
    pub read_queue_nums: i32,
    pub topic_filter_type: TopicFilterType,
    pub topic_name: String,
    pub topic_sys_flag: i32,
    pub write_queue_nums: i32,
}

impl Default for TopicConfig {
    /// Java's `TopicConfig` defaults: 16/16 queues, perm RW (6), SINGLE_TAG.
    fn default() -> Self {
        TopicConfig {
            attributes: BTreeMap::new(),
            order: false,
            perm: 6,
            read_queue_nums: 16,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_name: String::new(),
            topic_sys_flag: 0,
            write_queue_nums: 16,
        }
    }
}

/// UPDATE_AND_CREATE_TOPIC_LIST's body (Java's `CreateTopicListRequestBody`). A config's
/// `attributes` are changes, as UPDATE_AND_CREATE_TOPIC's header writes them: `+key` to set,
/// `-key` to remove.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CreateTopicListRequestBody {
    #[serde(deserialize_with = "null_default")]
    pub topic_config_list: Vec<TopicConfig>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopicConfigSerializeWrapper {
    pub data_version: DataVersion,
    pub topic_config_table: BTreeMap<String, TopicConfig>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RegisterBrokerBody {
    #[serde(deserialize_with = "null_default")]
    pub filter_server_list: Vec<String>,
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueueData {
    pub broker_name: String,
    pub perm: i32,
    pub read_queue_nums: i32,
    pub topic_sys_flag: i32,
    pub write_queue_nums: i32,
}

/// Broker id 0 is the master.
pub const MASTER_ID: i64 = 0;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BrokerData {
    /// broker id -> "ip:port"; fastjson's legacy output writes these keys unquoted.
    pub broker_addrs: BTreeMap<i64, String>,
    pub broker_name: String,
    pub cluster: String,
    pub enable_acting_master: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone_name: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopicRouteData {
    #[serde(deserialize_with = "null_default")]
    pub broker_datas: Vec<BrokerData>,
    #[serde(deserialize_with = "null_default")]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    #[serde(deserialize_with = "null_default")]
    pub queue_datas: Vec<QueueData>,
    /// Static-topic mapping (5.x); carried opaquely.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_queue_mapping_by_broker: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusterInfo {
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}

/// Java's `ConsumeType`, in its declaration order (ordinals index it). The C++ client 2.1
/// declares only the first two, in the same order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConsumeType {
    /// Pull consumers.
    ConsumeActively,
    /// Push consumers.
    #[default]
    ConsumePassively,
    ConsumePop,
    #[serde(other)]
    Unknown,
}

/// Java's `MessageModel`, in its declaration order (ordinals index it; the C++ client's is the
/// same).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MessageModel {
    Broadcasting,
    #[default]
    Clustering,
    #[serde(other)]
    Unknown,
}

/// Java's `ConsumeFromWhere`, in its declaration order, deprecated values included (ordinals
/// index it; the C++ client's is the same).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConsumeFromWhere {
    #[default]
    ConsumeFromLastOffset,
    ConsumeFromLastOffsetAndFromMinWhenBootFirst,
    ConsumeFromMinOffset,
    ConsumeFromMaxOffset,
    ConsumeFromFirstOffset,
    ConsumeFromTimestamp,
    #[serde(other)]
    Unknown,
}

/// Expression types of `SubscriptionData::expression_type`.
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";
/// `subString` meaning every tag.
pub const SUB_ALL: &str = "*";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionData {
    pub class_filter_mode: bool,
    /// Java hashes of `tags_set`.
    #[serde(deserialize_with = "null_default")]
    pub code_set: Vec<i32>,
    #[serde(deserialize_with = "null_default")]
    pub expression_type: String,
    #[serde(deserialize_with = "null_default")]
    pub sub_string: String,
    pub sub_version: i64,
    #[serde(deserialize_with = "null_default")]
    pub tags_set: Vec<String>,
    #[serde(deserialize_with = "null_default")]
    pub topic: String,
}

impl Default for SubscriptionData {
    fn default() -> Self {
        SubscriptionData {
            class_filter_mode: false,
            code_set: Vec::new(),
            expression_type: EXPRESSION_TYPE_TAG.to_owned(),
            sub_string: SUB_ALL.to_owned(),
            sub_version: 0,
            tags_set: Vec::new(),
            topic: String::new(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConsumerData {
    pub consume_from_where: ConsumeFromWhere,
    pub consume_type: ConsumeType,
    #[serde(deserialize_with = "null_default")]
    pub group_name: String,
    pub message_model: MessageModel,
    #[serde(deserialize_with = "null_default")]
    pub subscription_data_set: Vec<SubscriptionData>,
    pub unit_mode: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ProducerData {
    #[serde(deserialize_with = "null_default")]
    pub group_name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HeartbeatData {
    #[serde(rename = "clientID", deserialize_with = "null_default")]
    pub client_id: String,
    #[serde(deserialize_with = "null_default")]
    pub consumer_data_set: Vec<ConsumerData>,
    /// Heartbeat V2 only; 0 from clients that do not use it.
    pub heartbeat_fingerprint: i64,
    #[serde(deserialize_with = "null_default")]
    pub producer_data_set: Vec<ProducerData>,
    /// Java's `isWithoutSub()` getter loses its `is`.
    pub without_sub: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MessageQueue {
    pub broker_name: String,
    pub queue_id: i32,
    pub topic: String,
}

/// One queue of a consumer group's progress (Java's `OffsetWrapper`), in GET_CONSUME_STATS'
/// `offsetTable`. Fields in fastjson's (alphabetical) order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct OffsetWrapper {
    pub broker_offset: i64,
    pub consumer_offset: i64,
    pub last_timestamp: i64,
    pub pull_offset: i64,
}

/// One queue's bounds (Java's `TopicOffset`), in GET_TOPIC_STATS_INFO's `offsetTable`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopicOffset {
    pub last_update_timestamp: i64,
    pub max_offset: i64,
    pub min_offset: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LockBatchRequestBody {
    #[serde(deserialize_with = "null_default")]
    pub client_id: String,
    #[serde(deserialize_with = "null_default")]
    pub consumer_group: String,
    #[serde(deserialize_with = "null_default")]
    pub mq_set: Vec<MessageQueue>,
    pub only_this_broker: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LockBatchResponseBody {
    #[serde(rename = "lockOKMQSet", deserialize_with = "null_default")]
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct UnlockBatchRequestBody {
    #[serde(deserialize_with = "null_default")]
    pub client_id: String,
    #[serde(deserialize_with = "null_default")]
    pub consumer_group: String,
    #[serde(deserialize_with = "null_default")]
    pub mq_set: Vec<MessageQueue>,
    pub only_this_broker: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConsumerListBody {
    #[serde(deserialize_with = "null_default")]
    pub consumer_id_list: Vec<String>,
}

/// One client connection as admin listings show it (Java's `Connection`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Connection {
    pub client_addr: String,
    pub client_id: String,
    /// Java's `LanguageCode` name, e.g. "JAVA", "CPP", "RUST".
    pub language: String,
    pub version: i32,
}

/// GET_CONSUMER_CONNECTION_LIST's body (Java's `ConsumerConnection`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConsumerConnection {
    pub connection_set: Vec<Connection>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_from_where: Option<ConsumeFromWhere>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_type: Option<ConsumeType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_model: Option<MessageModel>,
    pub subscription_table: BTreeMap<String, SubscriptionData>,
}

/// GET_PRODUCER_CONNECTION_LIST's body (Java's `ProducerConnection`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ProducerConnection {
    pub connection_set: Vec<Connection>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopicList {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
    #[serde(deserialize_with = "null_default")]
    pub topic_list: BTreeSet<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KvTable {
    #[serde(deserialize_with = "null_default")]
    pub table: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionGroupConfig {
    pub attributes: BTreeMap<String, String>,
    pub broker_id: i64,
    pub consume_broadcast_enable: bool,
    pub consume_enable: bool,
    pub consume_from_min_enable: bool,
    pub consume_message_orderly: bool,
    pub consume_timeout_minute: i32,
    pub group_name: String,
    pub group_sys_flag: i32,
    pub notify_consumer_ids_changed_enable: bool,
    pub retry_max_times: i32,
    pub retry_queue_nums: i32,
    pub which_broker_when_consume_slowly: i64,
}

impl Default for SubscriptionGroupConfig {
    /// Java's `SubscriptionGroupConfig` defaults.
    fn default() -> Self {
        SubscriptionGroupConfig {
            attributes: BTreeMap::new(),
            broker_id: 0,
            consume_broadcast_enable: true,
            consume_enable: true,
            consume_from_min_enable: true,
            consume_message_orderly: false,
            consume_timeout_minute: 15,
            group_name: String::new(),
            group_sys_flag: 0,
            notify_consumer_ids_changed_enable: true,
            retry_max_times: 16,
            retry_queue_nums: 1,
            which_broker_when_consume_slowly: 1,
        }
    }
}

/// QUERY_SUBSCRIPTION_BY_CONSUMER's answer (Java's `QuerySubscriptionResponseBody`); no
/// subscription is `null`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QuerySubscriptionResponseBody {
    pub subscription_data: Option<SubscriptionData>,
    pub group: String,
    pub topic: String,
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST's body (Java's `SubscriptionGroupList`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionGroupList {
    #[serde(deserialize_with = "null_default")]
    pub group_config_list: Vec<SubscriptionGroupConfig>,
}

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG reply and `subscriptionGroup.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionGroupWrapper {
    pub data_version: DataVersion,
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CheckClientRequestBody {
    #[serde(deserialize_with = "null_default")]
    pub client_id: String,
    #[serde(deserialize_with = "null_default")]
    pub group: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(deserialize_with = "null_default")]
    pub subscription_data: SubscriptionData,
}

/// GET_ALL_CONSUMER_OFFSET reply and `consumerOffset.json`: "topic@group" -> queue id -> offset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConsumerOffsetSerializeWrapper {
    pub data_version: DataVersion,
    pub offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

/// GET_ALL_DELAY_OFFSET reply (Java's `ScheduleMessageService.encode`, the shape of
/// `delayOffset.json`): delay level -> next offset in the level's schedule queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DelayOffsetSerializeWrapper {
    pub data_version: DataVersion,
    pub offset_table: BTreeMap<i32, i64>,
}
