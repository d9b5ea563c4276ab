//! Answers built from validated outcomes: the response command (SUCCESS or the refusal's code,
//! with the request's header and body in Java's field names), the events to commit first, and
//! a role change to announce. Shared by the request processor and the controller's own
//! election trigger.

use std::collections::BTreeSet;

use super::config::ControllerConfig;
use super::error::ControllerError;
use super::heartbeat::BrokerLiveTable;
use super::replicas::{Event, Outcome, ReplicasInfo};
use crate::protocol::body::{to_json, BrokerMemberGroup, ElectMasterResponseBody};
use crate::protocol::codes::response_code;
use crate::protocol::headers::ElectMasterResponseHeader;
use crate::protocol::RemotingCommand;

/// A request's answer, computed from the state, and the events to commit before sending it.
pub struct Prepared {
    pub events: Vec<Event>,
    pub answer: RemotingCommand,
    /// A new master to announce to the group once committed.
    pub role_change: Option<RoleChange>,
}

/// What NOTIFY_BROKER_ROLE_CHANGED tells a group's brokers.
#[derive(Clone, Debug)]
pub struct RoleChange {
    pub master_broker_id: i64,
    pub master_address: Option<String>,
    pub master_epoch: i32,
    pub sync_state_set_epoch: i32,
    pub sync_state_set: BTreeSet<i64>,
    pub member_group: BrokerMemberGroup,
}

pub fn error_answer(req: &RemotingCommand, e: &ControllerError) -> RemotingCommand {
    RemotingCommand::response_for(req, e.response_code(), Some(e.to_string()))
}

pub fn ok(req: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_for(req, response_code::SUCCESS, None)
}

pub fn read_only(answer: RemotingCommand) -> Prepared {
    Prepared {
        events: Vec::new(),
        answer,
        role_change: None,
    }
}

/// Turns a validated outcome into the answer (SUCCESS or the refusal's code) and its events.
pub fn finish<H>(
    req: &RemotingCommand,
    o: Outcome<H>,
    fill: impl FnOnce(&H, &mut RemotingCommand),
) -> Prepared {
    let mut answer = match &o.refusal {
        None => ok(req),
        Some(e) => error_answer(req, e),
    };
    fill(&o.header, &mut answer);
    Prepared {
        events: o.events,
        answer,
        role_change: None,
    }
}

/// CONTROLLER_ELECT_MASTER, from a broker (`broker_id` Some) or the controller itself (None).
pub fn prepare_elect(
    state: &ReplicasInfo,
    live: &BrokerLiveTable,
    cfg: &ControllerConfig,
    req: &RemotingCommand,
    broker_name: &str,
    broker_id: Option<i64>,
    designate: bool,
) -> Prepared {
    let o = state.elect_master(
        broker_name,
        broker_id,
        designate,
        cfg.enable_elect_unclean_master,
        live,
    );
    let success = o.refusal.is_none();
    let elected = o.header.clone();
    let mut p = finish(req, o, |e, a| {
        ElectMasterResponseHeader {
            master_broker_id: e.master.master_broker_id,
            master_address: e.master.master_address.clone(),
            master_epoch: e.master.master_epoch,
            sync_state_set_epoch: e.master.sync_state_set_epoch,
        }
        .write_to(a)
    });
    if elected.master.master_broker_id.is_some() {
        p.answer.body = to_json(&ElectMasterResponseBody {
            broker_member_group: elected.member_group.clone(),
            sync_state_set: elected.sync_state_set.clone(),
        })
        .into();
    }
    if let (true, Some(m), Some(group)) = (
        success,
        elected.master.master_broker_id,
        elected.member_group,
    ) {
        p.role_change = Some(RoleChange {
            master_broker_id: m,
            master_address: elected.master.master_address,
            master_epoch: elected.master.master_epoch.unwrap_or_default(),
            sync_state_set_epoch: elected.master.sync_state_set_epoch.unwrap_or_default(),
            sync_state_set: elected.sync_state_set,
            member_group: group,
        });
    }
    p
}
