//! The broker-facing requests a controller answers (Java's `ControllerRequestProcessor`), with
//! Java's header and body field names: BROKER_HEARTBEAT (904), 1001-1006, 1009-1013. Requests
//! on the replicated state go through the scheduler (`service::Ctx::submit`); heartbeats,
//! metadata and config are answered here by any controller. A header or body that does not
//! decode is answered SYSTEM_ERROR, as Java's remoting server answers the processor's
//! exception; nothing from the network panics.

use std::rc::Rc;

use super::answer::{error_answer, finish, ok, prepare_elect, read_only};
use super::config::UPDATABLE_KEYS;
use super::elect::Liveness;
use super::error::ControllerError;
use super::heartbeat::BrokerLiveTable;
use super::raft::network;
use super::service::{Ctx, Validate};
use crate::common::time::now_ms;
use crate::protocol::body::{from_json, to_json, BrokerReplicasInfo, SyncStateSet};
use crate::protocol::codes::{request_code as rq, response_code};
use crate::protocol::headers::*;
use crate::protocol::RemotingCommand;

/// Answers one request from connection `conn`; None for a oneway request.
pub async fn handle(ctx: &Rc<Ctx>, req: RemotingCommand, conn: u64) -> Option<RemotingCommand> {
    let answer = match dispatch(ctx, &req, conn).await {
        Ok(a) => a,
        Err(e) => error_answer(&req, &e),
    };
    (!req.is_oneway()).then_some(answer)
}

async fn dispatch(
    ctx: &Rc<Ctx>,
    req: &RemotingCommand,
    conn: u64,
) -> Result<RemotingCommand, ControllerError> {
    if network::is_raft_code(req.code) {
        return Ok(network::serve(&ctx.raft, req).await);
    }
    match req.code {
        rq::BROKER_HEARTBEAT => heartbeat(ctx, req, conn),
        rq::CONTROLLER_GET_METADATA_INFO => Ok(metadata(ctx, req)),
        rq::GET_CONTROLLER_CONFIG => Ok(ok(req).with_body(ctx.cfg.borrow().to_properties())),
        rq::UPDATE_CONTROLLER_CONFIG => Ok(update_config(ctx, req)),
        rq::CONTROLLER_ALTER_SYNC_STATE_SET => {
            let h = AlterSyncStateSetRequestHeader::from_command(req)?;
            let set: SyncStateSet = from_json(&req.body)?;
            Ok(ctx.submit(req, alter(req, h, set)).await)
        }
        rq::CONTROLLER_ELECT_MASTER => {
            let h = ElectMasterRequestHeader::from_command(req)?;
            Ok(ctx.submit(req, elect(req, h)).await)
        }
        rq::CONTROLLER_REGISTER_BROKER => {
            let h = RegisterBrokerToControllerRequestHeader::from_command(req)?;
            Ok(ctx.submit(req, register(req, h)).await)
        }
        rq::CONTROLLER_GET_REPLICA_INFO => {
            let h = GetReplicaInfoRequestHeader::from_command(req)?;
            Ok(ctx.submit(req, replica_info(req, h)).await)
        }
        rq::CONTROLLER_GET_SYNC_STATE_DATA => sync_state_data(ctx, req).await,
        rq::CLEAN_BROKER_DATA => {
            let h = CleanControllerBrokerDataRequestHeader::from_command(req)?;
            Ok(ctx.submit(req, clean(req, h)).await)
        }
        rq::CONTROLLER_GET_NEXT_BROKER_ID => {
            let h = GetNextBrokerIdRequestHeader::from_command(req)?;
            Ok(ctx.submit(req, next_broker_id(req, h)).await)
        }
        rq::CONTROLLER_APPLY_BROKER_ID => {
            let h = ApplyBrokerIdRequestHeader::from_command(req)?;
            Ok(ctx.submit(req, apply_broker_id(req, h)).await)
        }
        other => Err(ControllerError::NotSupported(other)),
    }
}

fn heartbeat(
    ctx: &Rc<Ctx>,
    req: &RemotingCommand,
    conn: u64,
) -> Result<RemotingCommand, ControllerError> {
    let h = BrokerHeartbeatRequestHeader::from_command(req)?;
    let Some(id) = h.broker_id else {
        return Err(ControllerError::InvalidRequest(
            "Heart beat with empty brokerId".into(),
        ));
    };
    let mut live = ctx.live.borrow_mut();
    live.set_now(now_ms());
    live.on_heartbeat(&h, id, conn);
    Ok(RemotingCommand::response_for(
        req,
        response_code::SUCCESS,
        Some("Heart beat success".into()),
    ))
}

/// CONTROLLER_GET_METADATA_INFO: any controller answers who leads (Java's
/// `DLedgerController.getControllerMetadata`; peers as `id:host:port;` each).
fn metadata(ctx: &Rc<Ctx>, req: &RemotingCommand) -> RemotingCommand {
    let cfg = ctx.cfg.borrow();
    let leader = ctx.raft.metrics().borrow().current_leader;
    let leader_peer = leader.and_then(|l| cfg.peers.iter().find(|p| p.node_id == l));
    let peers: String = cfg
        .peers
        .iter()
        .map(|p| format!("{}:{};", p.id, p.addr))
        .collect();
    let mut a = ok(req);
    GetMetaDataResponseHeader {
        group: Some(cfg.group.clone()),
        controller_leader_id: leader_peer.map(|p| p.id.clone()),
        controller_leader_address: leader_peer.map(|p| p.addr.to_string()),
        is_leader: ctx.is_leader(),
        peers: Some(peers),
    }
    .write_to(&mut a);
    a
}

/// UPDATE_CONTROLLER_CONFIG: a properties body; only `UPDATABLE_KEYS` may change at run time
/// (the black-listed and the structural keys answer NO_PERMISSION, a bad value
/// CONTROLLER_INVALID_REQUEST), and nothing changes unless every key is accepted.
fn update_config(ctx: &Rc<Ctx>, req: &RemotingCommand) -> RemotingCommand {
    let Ok(text) = std::str::from_utf8(&req.body) else {
        return RemotingCommand::response_for(
            req,
            response_code::SYSTEM_ERROR,
            Some("config body is not UTF-8".into()),
        );
    };
    let mut next = ctx.cfg.borrow().clone();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (k, v) = line.split_once('=').unwrap_or((line, ""));
        let (k, v) = (k.trim(), v.trim());
        if !UPDATABLE_KEYS.contains(&k) {
            return RemotingCommand::response_for(
                req,
                response_code::NO_PERMISSION,
                Some(format!("Can not update config {k:?} at run time")),
            );
        }
        if let Err(e) = next.update(k, v) {
            return error_answer(req, &ControllerError::InvalidRequest(e.to_string()));
        }
    }
    *ctx.cfg.borrow_mut() = next;
    ok(req)
}

fn alter(req: &RemotingCommand, h: AlterSyncStateSetRequestHeader, set: SyncStateSet) -> Validate {
    let r = req.clone();
    Box::new(move |state, live, _| {
        let o = state.alter_sync_state_set(
            &h.broker_name,
            h.master_broker_id,
            h.master_epoch,
            &set.sync_state_set,
            set.sync_state_set_epoch,
            live,
        );
        let refused = o.refusal.is_some();
        let mut p = finish(&r, o, |epoch, a| {
            if !refused {
                AlterSyncStateSetResponseHeader {
                    new_sync_state_set_epoch: *epoch,
                }
                .write_to(a);
            }
        });
        if !refused {
            let epoch = state
                .sync_state_info(&h.broker_name)
                .map_or(0, |s| s.sync_state_set_epoch + 1);
            p.answer.body = to_json(&SyncStateSet {
                sync_state_set: set.sync_state_set.clone(),
                sync_state_set_epoch: epoch,
            })
            .into();
        }
        p
    })
}

fn elect(req: &RemotingCommand, h: ElectMasterRequestHeader) -> Validate {
    let r = req.clone();
    Box::new(move |state, live, cfg| {
        let designate = h.designate_elect.unwrap_or(false);
        prepare_elect(
            state,
            live,
            cfg,
            &r,
            &h.broker_name,
            Some(h.broker_id),
            designate,
        )
    })
}

fn clean(req: &RemotingCommand, h: CleanControllerBrokerDataRequestHeader) -> Validate {
    let r = req.clone();
    Box::new(move |state, live, _| {
        let o = state.clean_broker_data(
            h.cluster_name.as_deref().unwrap_or_default(),
            &h.broker_name,
            h.broker_controller_ids_to_clean.as_deref(),
            h.is_clean_living_broker,
            live,
        );
        finish(&r, o, |_, _| {})
    })
}

fn next_broker_id(req: &RemotingCommand, h: GetNextBrokerIdRequestHeader) -> Validate {
    let r = req.clone();
    Box::new(move |state, _, _| {
        let mut a = ok(&r);
        GetNextBrokerIdResponseHeader {
            cluster_name: Some(h.cluster_name.clone()),
            broker_name: Some(h.broker_name.clone()),
            next_broker_id: Some(state.next_broker_id(&h.broker_name)),
        }
        .write_to(&mut a);
        read_only(a)
    })
}

fn apply_broker_id(req: &RemotingCommand, h: ApplyBrokerIdRequestHeader) -> Validate {
    let r = req.clone();
    Box::new(move |state, _, _| {
        let o = state.apply_broker_id(
            &h.cluster_name,
            &h.broker_name,
            h.applied_broker_id,
            &h.register_check_code,
        );
        finish(&r, o, |_, a| {
            ApplyBrokerIdResponseHeader {
                cluster_name: Some(h.cluster_name.clone()),
                broker_name: Some(h.broker_name.clone()),
            }
            .write_to(a)
        })
    })
}

fn register(req: &RemotingCommand, h: RegisterBrokerToControllerRequestHeader) -> Validate {
    let r = req.clone();
    Box::new(move |state, live, _| {
        let o = state.register_broker(&h.broker_name, h.broker_id, &h.broker_address, live);
        let refused = o.refusal.is_some();
        let mut p = finish(&r, o, |(view, _), a| {
            RegisterBrokerToControllerResponseHeader {
                cluster_name: Some(h.cluster_name.clone()),
                broker_name: Some(h.broker_name.clone()),
                master_broker_id: view.master_broker_id,
                master_address: view.master_address.clone(),
                master_epoch: view.master_epoch,
                sync_state_set_epoch: view.sync_state_set_epoch,
            }
            .write_to(a)
        });
        if !refused {
            if let Some(s) = state.sync_state_info(&h.broker_name) {
                p.answer.body = to_json(&SyncStateSet {
                    sync_state_set: s.sync_state_set.clone(),
                    sync_state_set_epoch: s.sync_state_set_epoch,
                })
                .into();
            }
        }
        p
    })
}

fn replica_info(req: &RemotingCommand, h: GetReplicaInfoRequestHeader) -> Validate {
    let r = req.clone();
    Box::new(
        move |state, _, _| match state.replica_view(&h.broker_name) {
            Err(e) => read_only(error_answer(&r, &e)),
            Ok((view, set)) => {
                let mut a = ok(&r);
                GetReplicaInfoResponseHeader {
                    master_broker_id: view.master_broker_id,
                    master_address: view.master_address,
                    master_epoch: view.master_epoch,
                }
                .write_to(&mut a);
                a.body = to_json(&SyncStateSet {
                    sync_state_set: set,
                    sync_state_set_epoch: view.sync_state_set_epoch.unwrap_or_default(),
                })
                .into();
                read_only(a)
            }
        },
    )
}

/// CONTROLLER_GET_SYNC_STATE_DATA: the body is a JSON list of broker names; an empty or
/// absent list gets Java's answer to a request it did not handle (SYSTEM_ERROR).
async fn sync_state_data(
    ctx: &Rc<Ctx>,
    req: &RemotingCommand,
) -> Result<RemotingCommand, ControllerError> {
    let names: Vec<String> = if req.body.is_empty() {
        Vec::new()
    } else {
        from_json(&req.body)?
    };
    if names.is_empty() {
        return Ok(RemotingCommand::response_for(
            req,
            response_code::SYSTEM_ERROR,
            Some("not set any response code".into()),
        ));
    }
    let r = req.clone();
    let validate: Validate = Box::new(move |state, live: &BrokerLiveTable, _| {
        let live: &dyn Liveness = live;
        let body = BrokerReplicasInfo {
            replicas_info_table: state.sync_state_data(&names, live),
        };
        read_only(ok(&r).with_body(to_json(&body)))
    });
    Ok(ctx.submit(req, validate).await)
}
