//! The name server's routing state (Java's `RouteInfoManager`), pure and I/O-free.
//!
//! Owns four tables: topic -> broker name -> queue route; broker name -> broker group (cluster,
//! id -> addr); cluster -> broker names; and the live table keyed by (cluster, addr) with the
//! last heartbeat, timeout, topic-config version, HA address and the connection the broker
//! registered through. `NameServer` is its only caller; wire types live in `handlers`.
//! Invariants (checked by `check_invariants` in tests): every broker group has at least one
//! address; every broker name in a cluster set has a group; every topic has at least one queue
//! route. Removing a broker's last address removes its name from every cluster and all its queue
//! routes, so topics served only by it disappear.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// `MixAll.MASTER_ID`: brokerAddrs key of the master.
pub const MASTER_ID: i64 = 0;
/// Java's `DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`: a broker silent this long is removed.
pub const DEFAULT_HEARTBEAT_TIMEOUT_MS: i64 = 120_000;
/// `PermName.PERM_WRITE`, wiped from queue routes of a broker group that lost its master in
/// acting-master mode.
pub const PERM_WRITE: i32 = 2;
/// `PermName.PERM_READ`.
pub const PERM_READ: i32 = 4;

/// The broker's `DataVersion` of its topic config. Two registrations with equal versions carry
/// the same topics, so the queue routes need no update.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TopicConfigVersion {
    pub counter: i64,
    pub state_version: i64,
    pub timestamp: i64,
}

/// One topic's queues on one broker group (Java's `QueueData` minus the broker name key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueRoute {
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    pub perm: i32,
    pub topic_sys_flag: i32,
}

/// A broker group: a master (id 0) and its slaves sharing one broker name (Java's `BrokerData`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerGroup {
    pub cluster: String,
    pub broker_name: String,
    pub addrs: BTreeMap<i64, String>,
    pub zone_name: Option<String>,
    pub enable_acting_master: bool,
}

/// Liveness of one registered broker address (Java's `BrokerLiveInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerLive {
    pub broker_name: String,
    pub last_update_ms: i64,
    pub heartbeat_timeout_ms: i64,
    pub data_version: TopicConfigVersion,
    pub ha_server_addr: String,
    pub conn_id: u64,
}

/// One REGISTER_BROKER request, already decoded.
#[derive(Clone, Debug)]
pub struct Registration {
    pub cluster: String,
    pub broker_addr: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub ha_server_addr: String,
    pub zone_name: Option<String>,
    /// None = a broker too old to send the field (it never takes part in acting master).
    pub enable_acting_master: Option<bool>,
    pub heartbeat_timeout_ms: i64,
    pub data_version: TopicConfigVersion,
    pub topics: BTreeMap<String, QueueRoute>,
    pub filter_servers: Vec<String>,
    pub conn_id: u64,
}

/// What a slave needs to reach its master; empty for masters and while no master is live.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterOutcome {
    pub master_addr: Option<String>,
    pub ha_server_addr: Option<String>,
}

/// A topic's route, borrowed from the tables.
#[derive(Debug)]
pub struct TopicRoute<'a> {
    pub queue_datas: Vec<(&'a str, QueueRoute)>,
    pub broker_datas: Vec<&'a BrokerGroup>,
    /// broker addr -> filter server addrs; only addrs that reported some.
    pub filter_servers: BTreeMap<&'a str, &'a [String]>,
}

type LiveKey = (String, String); // (cluster, broker addr), Java's BrokerAddrInfo

#[derive(Debug, Default)]
pub struct RouteTable {
    topic_queue_table: BTreeMap<String, BTreeMap<String, QueueRoute>>,
    broker_addr_table: BTreeMap<String, BrokerGroup>,
    cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
    broker_live_table: HashMap<LiveKey, BrokerLive>,
    filter_server_table: HashMap<LiveKey, Vec<String>>,
}

fn live_key(cluster: &str, addr: &str) -> LiveKey {
    (cluster.to_owned(), addr.to_owned())
}

impl RouteTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one registration (Java's `RouteInfoManager.registerBroker`). Queue routes are
    /// rewritten from the master's (or, in acting-master mode, the lowest-id slave's) topic table
    /// when this is the address's first registration or its topic-config version changed.
    pub fn register(&mut self, reg: Registration, now_ms: i64) -> RegisterOutcome {
        let key = live_key(&reg.cluster, &reg.broker_addr);
        // The same address re-registering under another broker name leaves its old group.
        let renamed = self
            .broker_live_table
            .get(&key)
            .filter(|live| live.broker_name != reg.broker_name)
            .map(|live| live.broker_name.clone());
        if let Some(old_name) = renamed {
            self.remove_addr(&reg.cluster, &reg.broker_addr, &old_name);
        }
        let version_changed =
            self.is_broker_topic_config_changed(&reg.cluster, &reg.broker_addr, &reg.data_version);
        self.cluster_addr_table
            .entry(reg.cluster.clone())
            .or_default()
            .insert(reg.broker_name.clone());
        let mut register_first = !self.broker_addr_table.contains_key(&reg.broker_name);
        let group = self
            .broker_addr_table
            .entry(reg.broker_name.clone())
            .or_insert_with(|| BrokerGroup {
                cluster: reg.cluster.clone(),
                broker_name: reg.broker_name.clone(),
                addrs: BTreeMap::new(),
                zone_name: None,
                enable_acting_master: false,
            });
        group.enable_acting_master = reg.enable_acting_master.unwrap_or(false);
        if reg.zone_name.is_some() {
            group.zone_name.clone_from(&reg.zone_name);
        }

        // Another address already holds this id: refuse a registration older (by state
        // version) than the holder's, so a delayed request from a demoted broker cannot
        // overwrite the current one.
        if let Some(old_addr) = group.addrs.get(&reg.broker_id) {
            if *old_addr != reg.broker_addr {
                let holder = self
                    .broker_live_table
                    .get(&live_key(&reg.cluster, old_addr));
                if holder
                    .is_some_and(|h| h.data_version.state_version > reg.data_version.state_version)
                {
                    tracing::warn!(broker = %reg.broker_addr, id = reg.broker_id, holder = %old_addr,
                        "stale registration ignored");
                    self.broker_live_table.remove(&key);
                    return RegisterOutcome::default();
                }
            }
        }
        // Slave promoted to master (or the reverse): drop the address under its old id.
        group
            .addrs
            .retain(|id, addr| *id == reg.broker_id || *addr != reg.broker_addr);
        let old = group.addrs.insert(reg.broker_id, reg.broker_addr.clone());
        register_first |= old.is_none();

        let is_master = reg.broker_id == MASTER_ID;
        let is_prime_slave = reg.enable_acting_master.is_some()
            && !is_master
            && group.addrs.keys().next() == Some(&reg.broker_id);
        if is_master || is_prime_slave {
            let wipe_write = is_prime_slave && group.enable_acting_master;
            for (topic, route) in &reg.topics {
                let queues = self.topic_queue_table.entry(topic.clone()).or_default();
                if register_first || version_changed || !queues.contains_key(&reg.broker_name) {
                    let mut route = *route;
                    if wipe_write {
                        route.perm &= !PERM_WRITE;
                    }
                    queues.insert(reg.broker_name.clone(), route);
                }
            }
        }

        if reg.filter_servers.is_empty() {
            self.filter_server_table.remove(&key);
        } else {
            self.filter_server_table
                .insert(key.clone(), reg.filter_servers.clone());
        }
        let outcome = if is_master {
            RegisterOutcome::default()
        } else {
            self.master_of(
                group_addr(&self.broker_addr_table, &reg.broker_name),
                &reg.cluster,
            )
        };
        self.broker_live_table.insert(
            key,
            BrokerLive {
                broker_name: reg.broker_name,
                last_update_ms: now_ms,
                heartbeat_timeout_ms: reg.heartbeat_timeout_ms,
                data_version: reg.data_version,
                ha_server_addr: reg.ha_server_addr,
                conn_id: reg.conn_id,
            },
        );
        outcome
    }

    fn master_of(&self, master_addr: Option<&String>, cluster: &str) -> RegisterOutcome {
        let Some(master_addr) = master_addr else {
            return RegisterOutcome::default();
        };
        match self.broker_live_table.get(&live_key(cluster, master_addr)) {
            Some(live) => RegisterOutcome {
                master_addr: Some(master_addr.clone()),
                ha_server_addr: Some(live.ha_server_addr.clone()),
            },
            None => RegisterOutcome::default(),
        }
    }

    /// UNREGISTER_BROKER: the broker shut down cleanly.
    pub fn unregister(&mut self, cluster: &str, broker_addr: &str, broker_name: &str) {
        self.remove_addr(cluster, broker_addr, broker_name);
    }

    /// True when the name server has no version for this broker or a different one.
    pub fn is_broker_topic_config_changed(
        &self,
        cluster: &str,
        broker_addr: &str,
        version: &TopicConfigVersion,
    ) -> bool {
        self.data_version(cluster, broker_addr) != Some(*version)
    }

    pub fn data_version(&self, cluster: &str, broker_addr: &str) -> Option<TopicConfigVersion> {
        self.broker_live_table
            .get(&live_key(cluster, broker_addr))
            .map(|l| l.data_version)
    }

    /// Refreshes a live broker's last update (BROKER_HEARTBEAT, QUERY_DATA_VERSION). Returns
    /// false for an address that is not registered.
    pub fn touch(&mut self, cluster: &str, broker_addr: &str, now_ms: i64) -> bool {
        match self
            .broker_live_table
            .get_mut(&live_key(cluster, broker_addr))
        {
            Some(live) => {
                live.last_update_ms = now_ms;
                true
            }
            None => false,
        }
    }

    /// Removes brokers with `last_update + timeout < now` (Java's strict comparison).
    pub fn scan_not_active(&mut self, now_ms: i64) -> Vec<String> {
        let expired: Vec<(LiveKey, String)> = self
            .broker_live_table
            .iter()
            .filter(|(_, l)| l.last_update_ms.saturating_add(l.heartbeat_timeout_ms) < now_ms)
            .map(|(k, l)| (k.clone(), l.broker_name.clone()))
            .collect();
        let mut removed = Vec::with_capacity(expired.len());
        for ((cluster, addr), name) in expired {
            tracing::warn!(broker = %addr, %name, "broker expired: no heartbeat within its timeout");
            self.remove_addr(&cluster, &addr, &name);
            removed.push(addr);
        }
        removed.sort();
        removed
    }

    /// Removes every broker that registered through connection `conn_id`; returns their addrs.
    pub fn remove_by_conn(&mut self, conn_id: u64) -> Vec<String> {
        let gone: Vec<(LiveKey, String)> = self
            .broker_live_table
            .iter()
            .filter(|(_, l)| l.conn_id == conn_id)
            .map(|(k, l)| (k.clone(), l.broker_name.clone()))
            .collect();
        let mut removed = Vec::with_capacity(gone.len());
        for ((cluster, addr), name) in gone {
            self.remove_addr(&cluster, &addr, &name);
            removed.push(addr);
        }
        removed
    }

    /// Forgets one broker address; a group left without addresses takes its queue routes and
    /// cluster membership with it.
    fn remove_addr(&mut self, cluster: &str, broker_addr: &str, broker_name: &str) {
        let key = live_key(cluster, broker_addr);
        self.broker_live_table.remove(&key);
        self.filter_server_table.remove(&key);
        let Some(group) = self.broker_addr_table.get_mut(broker_name) else {
            return;
        };
        group.addrs.retain(|_, addr| addr != broker_addr);
        if group.addrs.is_empty() {
            self.broker_addr_table.remove(broker_name);
            self.cluster_addr_table.retain(|_, names| {
                names.remove(broker_name);
                !names.is_empty()
            });
            self.topic_queue_table.retain(|_, queues| {
                queues.remove(broker_name);
                !queues.is_empty()
            });
        } else if group.enable_acting_master && !group.addrs.contains_key(&MASTER_ID) {
            for queues in self.topic_queue_table.values_mut() {
                if let Some(route) = queues.get_mut(broker_name) {
                    route.perm &= !PERM_WRITE;
                }
            }
        }
    }

    /// The route of `topic`, or None when no live broker group serves it.
    pub fn pickup_route(&self, topic: &str) -> Option<TopicRoute<'_>> {
        let queues = self.topic_queue_table.get(topic)?;
        let broker_datas: Vec<&BrokerGroup> = queues
            .keys()
            .filter_map(|name| self.broker_addr_table.get(name))
            .collect();
        if broker_datas.is_empty() {
            return None;
        }
        let mut filter_servers = BTreeMap::new();
        for group in &broker_datas {
            for addr in group.addrs.values() {
                if let Some(list) = self
                    .filter_server_table
                    .get(&live_key(&group.cluster, addr))
                {
                    filter_servers.insert(addr.as_str(), list.as_slice());
                }
            }
        }
        Some(TopicRoute {
            queue_datas: queues.iter().map(|(n, q)| (n.as_str(), *q)).collect(),
            broker_datas,
            filter_servers,
        })
    }

    pub fn broker_groups(&self) -> &BTreeMap<String, BrokerGroup> {
        &self.broker_addr_table
    }

    pub fn clusters(&self) -> &BTreeMap<String, BTreeSet<String>> {
        &self.cluster_addr_table
    }

    pub fn live(&self, cluster: &str, broker_addr: &str) -> Option<&BrokerLive> {
        self.broker_live_table.get(&live_key(cluster, broker_addr))
    }

    pub fn topics(&self) -> impl Iterator<Item = &str> {
        self.topic_queue_table.keys().map(String::as_str)
    }

    /// Topics with a queue route on any broker group of `cluster`.
    pub fn topics_by_cluster(&self, cluster: &str) -> Vec<String> {
        let Some(names) = self.cluster_addr_table.get(cluster) else {
            return Vec::new();
        };
        self.topic_queue_table
            .iter()
            .filter(|(_, queues)| queues.keys().any(|n| names.contains(n)))
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// REGISTER_TOPIC_IN_NAMESRV: adds queue routes for known broker groups. All-or-nothing:
    /// Err(name) for the first broker name that is not registered.
    pub fn register_topic(
        &mut self,
        topic: &str,
        routes: &[(String, QueueRoute)],
    ) -> Result<(), String> {
        if let Some((name, _)) = routes
            .iter()
            .find(|(n, _)| !self.broker_addr_table.contains_key(n))
        {
            return Err(name.clone());
        }
        if routes.is_empty() {
            return Ok(());
        }
        let queues = self.topic_queue_table.entry(topic.to_owned()).or_default();
        for (name, route) in routes {
            queues.insert(name.clone(), *route);
        }
        Ok(())
    }

    /// DELETE_TOPIC_IN_NAMESRV: the whole topic, or only its routes on `cluster`'s brokers.
    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) {
        let Some(cluster) = cluster else {
            self.topic_queue_table.remove(topic);
            return;
        };
        let Some(names) = self.cluster_addr_table.get(cluster) else {
            return;
        };
        if let Some(queues) = self.topic_queue_table.get_mut(topic) {
            queues.retain(|n, _| !names.contains(n));
            if queues.is_empty() {
                self.topic_queue_table.remove(topic);
            }
        }
    }

    /// WIPE_WRITE_PERM_OF_BROKER (`wipe`) and ADD_WRITE_PERM_OF_BROKER (Java's
    /// `operateWritePermOfBroker`): every queue route of `broker_name` loses its write
    /// permission, or becomes read-write. Returns how many topics were touched. The broker's
    /// next registration with a new topic-config version rewrites the routes, as on Java.
    pub fn operate_write_perm(&mut self, broker_name: &str, wipe: bool) -> i32 {
        let mut count = 0;
        for queues in self.topic_queue_table.values_mut() {
            if let Some(route) = queues.get_mut(broker_name) {
                route.perm = if wipe {
                    route.perm & !PERM_WRITE
                } else {
                    PERM_READ | PERM_WRITE
                };
                count += 1;
            }
        }
        count
    }

    /// GET_SYSTEM_TOPIC_LIST_FROM_NS (Java's `getSystemTopicList`): every cluster name and
    /// every broker name (each is a topic its brokers create), and the first address of the
    /// first broker group, if any.
    pub fn system_topics(&self) -> (Vec<String>, Option<String>) {
        let mut topics = BTreeSet::new();
        for (cluster, names) in &self.cluster_addr_table {
            topics.insert(cluster.clone());
            topics.extend(names.iter().cloned());
        }
        let addr = self
            .broker_addr_table
            .values()
            .find_map(|g| g.addrs.values().next().cloned());
        (topics.into_iter().collect(), addr)
    }

    /// Asserts the module invariants; for tests and debug checks.
    pub fn check_invariants(&self) {
        for (name, group) in &self.broker_addr_table {
            assert!(!group.addrs.is_empty(), "group {name} has no address");
            assert_eq!(&group.broker_name, name);
        }
        for names in self.cluster_addr_table.values() {
            assert!(!names.is_empty());
            for n in names {
                assert!(self.broker_addr_table.contains_key(n), "{n} has no group");
            }
        }
        for (topic, queues) in &self.topic_queue_table {
            assert!(!queues.is_empty(), "topic {topic} has no queue route");
        }
    }
}

fn group_addr<'a>(table: &'a BTreeMap<String, BrokerGroup>, name: &str) -> Option<&'a String> {
    table.get(name).and_then(|g| g.addrs.get(&MASTER_ID))
}
