//! The controller's Raft group on openraft 0.9: the type configuration, the on-disk log
//! (`log_store`), the state machine over `ReplicasInfo` (`state_machine`) and the transport
//! between controllers (`network`). Runs on the controller's tokio `current_thread` runtime.
//!
//! A log entry carries the events one validated request produced; applying it applies them in
//! order. The group's membership is the configured peers; every controller initializes it on
//! its first start (openraft accepts the same initial membership from each).

pub mod log_store;
pub mod network;
pub mod state_machine;

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::config::ControllerConfig;
use super::replicas::Event;
use state_machine::Shared;

pub type NodeId = u64;
pub type Node = openraft::BasicNode;

/// One log entry's payload: the events of one request, applied together.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub events: Vec<Event>,
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} events", self.events.len())
    }
}

/// What applying an entry answers: nothing; the request's answer was computed when it was
/// validated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied;

openraft::declare_raft_types!(
    pub TypeConfig:
        D = Request,
        R = Applied,
        NodeId = NodeId,
        Node = Node,
);

pub type Raft = openraft::Raft<TypeConfig>;

/// Raft timing: a leader heartbeats every 250 ms; a follower that hears nothing for 1-2 s
/// starts an election. Snapshots every 1,000 entries keep the log short.
fn raft_config(cfg: &ControllerConfig) -> Result<openraft::Config, String> {
    let c = openraft::Config {
        cluster_name: cfg.group.clone(),
        heartbeat_interval: 250,
        election_timeout_min: 1000,
        election_timeout_max: 2000,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(1000),
        max_in_snapshot_log_to_keep: 500,
        ..Default::default()
    };
    c.validate().map_err(|e| e.to_string())
}

/// Opens the store, starts openraft, and initializes the group on a first start.
pub async fn start(cfg: &ControllerConfig, shared: Shared) -> Result<Raft, String> {
    let me = cfg.self_peer();
    let dir = &cfg.store_path;
    let log = log_store::LogStore::open(dir)
        .map_err(|e| format!("raft log under {}: {e}", dir.display()))?;
    let sm = state_machine::StateMachine::open(dir, shared)
        .map_err(|e| format!("raft snapshot under {}: {e}", dir.display()))?;
    let config = Arc::new(raft_config(cfg)?);
    let raft = Raft::new(me.node_id, config, network::Network, log, sm)
        .await
        .map_err(|e| format!("raft: {e}"))?;
    let initialized = raft.is_initialized().await.map_err(|e| e.to_string())?;
    if !initialized {
        let members: BTreeMap<NodeId, Node> = cfg
            .peers
            .iter()
            .map(|p| (p.node_id, Node::new(p.addr.to_string())))
            .collect();
        if let Err(e) = raft.initialize(members).await {
            // Another controller's initialization reached us first: fine.
            tracing::info!("raft initialize: {e}");
        }
    }
    Ok(raft)
}
