//! Broker metadata owned by shard 0: topic configs, subscription groups, consumer and producer
//! registrations, ordered-consumption queue locks. Other shards see read-only snapshots
//! ([`TopicSnapshot`], [`SubscriptionSnapshot`]) that shard 0 publishes after every change.
//!
//! Persistence uses RocketMQ's files and shapes (`config/topics.json`,
//! `config/subscriptionGroup.json`): the bytes are built here and written off the shard by
//! `common::config_file::write` on a blocking helper thread.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

pub mod topic_attributes;
pub mod topic_validator;

use crate::config::BrokerConfig;
use crate::protocol::assignment::{
    MessageRequestMode, MessageRequestModeSerializeWrapper, SetMessageRequestModeRequestBody,
};
use topic_validator::TBW102;

use crate::protocol::body::{
    self, ConsumeFromWhere, ConsumeType, DataVersion, MessageModel, SubscriptionData,
    SubscriptionGroupConfig, TopicConfig, TopicConfigSerializeWrapper,
};

/// Topic name -> config, as every shard sees it.
pub type TopicSnapshot = HashMap<String, TopicConfig>;
/// Consumer group -> topic -> subscription registered by heartbeat.
pub type SubscriptionSnapshot = HashMap<String, HashMap<String, SubscriptionData>>;

pub const PERM_INHERIT: i32 = 1;
pub const PERM_WRITE: i32 = 2;
pub const PERM_READ: i32 = 4;
/// Channels not refreshed by a heartbeat for this long are dropped (channelExpiredTimeout).
pub const CHANNEL_EXPIRED_MS: i64 = 120_000;
/// A queue lock not renewed for this long may be taken by another client.
pub const LOCK_MAX_LIVE_MS: i64 = 60_000;

/// One client's connection as registered by heartbeat.
#[derive(Clone, Debug)]
pub struct ClientChannel {
    pub client_id: String,
    pub conn_id: u64,
    pub last_update_ms: i64,
    /// The connection's peer address, `ip:port`, as admin listings show it.
    pub client_addr: String,
    /// The heartbeat command's language byte (Java's `LanguageCode` ordinal).
    pub language: u8,
    /// The heartbeat command's `version` field (the client's `MQVersion` ordinal).
    pub version: i32,
}

#[derive(Clone, Debug, Default)]
pub struct ConsumerGroupInfo {
    pub clients: BTreeMap<String, ClientChannel>,
    pub subscriptions: HashMap<String, SubscriptionData>,
    pub message_model: Option<MessageModel>,
    pub consume_type: Option<ConsumeType>,
    pub consume_from_where: Option<ConsumeFromWhere>,
}

/// Where SET_MESSAGE_REQUEST_MODE's modes are kept, under `config/`.
const REQUEST_MODES_FILE: &str = "messageRequestMode.json";

/// Queue identity used by the lock table.
pub type MqKey = (String, String, i32);

pub struct Metadata {
    pub root: PathBuf,
    pub topics: BTreeMap<String, TopicConfig>,
    pub topics_version: DataVersion,
    pub groups: BTreeMap<String, SubscriptionGroupConfig>,
    pub groups_version: DataVersion,
    pub consumers: HashMap<String, ConsumerGroupInfo>,
    pub producers: HashMap<String, BTreeMap<String, ClientChannel>>,
    /// group -> queue -> (client id, last renewal ms)
    pub locks: HashMap<String, HashMap<MqKey, (String, i64)>>,
    /// topic -> group -> how the group reads the topic (`messageRequestMode.json`).
    pub request_modes: MessageRequestModeSerializeWrapper,
}

/// Advances a DataVersion the way RocketMQ's `nextVersion` does.
pub fn bump(v: &mut DataVersion) {
    v.counter += 1;
    v.timestamp = crate::common::now_ms();
}

/// A new topic config with RocketMQ's defaults.
pub fn topic_config(name: &str, queues: i32, perm: i32) -> TopicConfig {
    TopicConfig {
        topic_name: name.to_string(),
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm,
        ..TopicConfig::default()
    }
}

fn config_dir(root: &Path) -> PathBuf {
    root.join("config")
}

/// Reads `path`, falling back to `path.bak` when the main file is missing or unparsable.
fn read_with_bak<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    for p in [path.to_path_buf(), path.with_extension("json.bak")] {
        if let Ok(bytes) = std::fs::read(&p) {
            match body::from_json::<T>(&bytes) {
                Ok(v) => return Some(v),
                Err(e) => tracing::warn!(path = %p.display(), error = %e, "unparsable config file"),
            }
        }
    }
    None
}

#[derive(serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SubscriptionGroupFile {
    #[serde(default)]
    subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
    #[serde(default)]
    data_version: DataVersion,
}

impl Metadata {
    /// Loads persisted metadata and adds the system topics RocketMQ clients rely on.
    pub fn load(cfg: &BrokerConfig) -> Metadata {
        let root = cfg.store.store_path_root_dir.clone();
        let dir = config_dir(&root);
        let topics_file: Option<TopicConfigSerializeWrapper> =
            read_with_bak(&dir.join("topics.json"));
        let groups_file: Option<SubscriptionGroupFile> =
            read_with_bak(&dir.join("subscriptionGroup.json"));
        let (topics, topics_version) = match topics_file {
            Some(w) => (w.topic_config_table.into_iter().collect(), w.data_version),
            None => (BTreeMap::new(), DataVersion::default()),
        };
        let groups_file = groups_file.unwrap_or_default();
        let mut m = Metadata {
            root,
            topics,
            topics_version,
            groups: groups_file.subscription_group_table,
            groups_version: groups_file.data_version,
            consumers: HashMap::new(),
            producers: HashMap::new(),
            locks: HashMap::new(),
            request_modes: read_with_bak(&dir.join(REQUEST_MODES_FILE)).unwrap_or_default(),
        };
        if cfg.auto_create_topic_enable && !m.topics.contains_key(TBW102) {
            let q = cfg.default_topic_queue_nums as i32;
            m.topics.insert(
                TBW102.into(),
                topic_config(TBW102, q, PERM_INHERIT | PERM_READ | PERM_WRITE),
            );
        }
        // Request-reply's replies go to `<brokerClusterName>_REPLY_TOPIC` (Java's
        // TopicConfigManager creates it with one queue).
        let reply_topic = topic_validator::reply_topic(&cfg.broker_cluster_name);
        for sys in [
            cfg.broker_cluster_name.as_str(),
            cfg.broker_name.as_str(),
            "SELF_TEST_TOPIC",
            reply_topic.as_str(),
        ] {
            if !m.topics.contains_key(sys) {
                m.topics
                    .insert(sys.into(), topic_config(sys, 1, PERM_READ | PERM_WRITE));
            }
        }
        m
    }

    /// How `group` reads `topic`: as set, else Java's default (pull; pull on retry topics).
    pub fn request_mode(&self, topic: &str, group: &str) -> SetMessageRequestModeRequestBody {
        self.request_modes
            .message_request_mode_map
            .get(topic)
            .and_then(|g| g.get(group))
            .cloned()
            .unwrap_or_else(|| SetMessageRequestModeRequestBody {
                consumer_group: group.to_string(),
                topic: topic.to_string(),
                mode: MessageRequestMode::Pull,
                pop_share_queue_num: 0,
            })
    }

    pub fn request_modes_path(&self) -> PathBuf {
        config_dir(&self.root).join(REQUEST_MODES_FILE)
    }

    pub fn topic_snapshot(&self) -> TopicSnapshot {
        self.topics
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    pub fn subscription_snapshot(&self) -> SubscriptionSnapshot {
        self.consumers
            .iter()
            .map(|(g, info)| (g.clone(), info.subscriptions.clone()))
            .collect()
    }

    /// Inserts or replaces a topic; returns true when something changed.
    pub fn upsert_topic(&mut self, tc: TopicConfig) -> bool {
        if self.topics.get(&tc.topic_name) == Some(&tc) {
            return false;
        }
        self.topics.insert(tc.topic_name.clone(), tc);
        bump(&mut self.topics_version);
        true
    }

    /// The subscription group, created with defaults when auto-creation is on.
    pub fn group_or_create(&mut self, group: &str, auto: bool) -> Option<SubscriptionGroupConfig> {
        if let Some(g) = self.groups.get(group) {
            return Some(g.clone());
        }
        if !auto {
            return None;
        }
        let g = SubscriptionGroupConfig {
            group_name: group.into(),
            ..SubscriptionGroupConfig::default()
        };
        self.groups.insert(group.into(), g.clone());
        bump(&mut self.groups_version);
        Some(g)
    }

    pub fn topics_file_bytes(&self) -> Vec<u8> {
        let w = TopicConfigSerializeWrapper {
            topic_config_table: self
                .topics
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            data_version: self.topics_version.clone(),
        };
        serde_json::to_vec_pretty(&w).unwrap_or_default()
    }

    pub fn groups_file_bytes(&self) -> Vec<u8> {
        let w = SubscriptionGroupFile {
            subscription_group_table: self.groups.clone(),
            data_version: self.groups_version.clone(),
        };
        serde_json::to_vec_pretty(&w).unwrap_or_default()
    }

    pub fn topics_path(&self) -> PathBuf {
        config_dir(&self.root).join("topics.json")
    }

    pub fn groups_path(&self) -> PathBuf {
        config_dir(&self.root).join("subscriptionGroup.json")
    }

    /// Drops every registration made through `conn_id`; returns the consumer groups that changed.
    pub fn remove_connection(&mut self, conn_id: u64) -> Vec<String> {
        let mut changed = Vec::new();
        for (group, info) in self.consumers.iter_mut() {
            let before = info.clients.len();
            info.clients.retain(|_, c| c.conn_id != conn_id);
            if info.clients.len() != before {
                changed.push(group.clone());
            }
        }
        self.consumers.retain(|_, info| !info.clients.is_empty());
        for clients in self.producers.values_mut() {
            clients.retain(|_, c| c.conn_id != conn_id);
        }
        self.producers.retain(|_, c| !c.is_empty());
        changed
    }

    /// Drops channels not refreshed for CHANNEL_EXPIRED_MS; returns the groups that changed.
    pub fn expire_channels(&mut self, now_ms: i64) -> Vec<String> {
        let mut changed = Vec::new();
        for (group, info) in self.consumers.iter_mut() {
            let before = info.clients.len();
            info.clients
                .retain(|_, c| now_ms - c.last_update_ms <= CHANNEL_EXPIRED_MS);
            if info.clients.len() != before {
                changed.push(group.clone());
            }
        }
        self.consumers.retain(|_, info| !info.clients.is_empty());
        for clients in self.producers.values_mut() {
            clients.retain(|_, c| now_ms - c.last_update_ms <= CHANNEL_EXPIRED_MS);
        }
        self.producers.retain(|_, c| !c.is_empty());
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written config files load back, and a corrupt main file falls back to the .bak copy.
    #[test]
    fn config_file_round_trip_with_bak() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = BrokerConfig::default();
        cfg.store.store_path_root_dir = dir.path().to_path_buf();
        let mut m = Metadata::load(&cfg);
        assert!(m.topics.contains_key(TBW102));
        let reply = &m.topics["DefaultCluster_REPLY_TOPIC"];
        assert_eq!((reply.read_queue_nums, reply.write_queue_nums), (1, 1));
        assert!(m.upsert_topic(topic_config("T1", 4, 6)));
        assert!(!m.upsert_topic(topic_config("T1", 4, 6)));
        crate::common::config_file::write(&m.topics_path(), &m.topics_file_bytes()).unwrap();
        assert!(m.upsert_topic(topic_config("T2", 2, 6)));
        crate::common::config_file::write(&m.topics_path(), &m.topics_file_bytes()).unwrap();
        let again = Metadata::load(&cfg);
        assert_eq!(again.topics.get("T2").map(|t| t.read_queue_nums), Some(2));
        std::fs::write(m.topics_path(), b"{ not json").unwrap();
        let from_bak = Metadata::load(&cfg);
        assert!(from_bak.topics.contains_key("T1"));
        assert!(!from_bak.topics.contains_key("T2"));
    }
}
