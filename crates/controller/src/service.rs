//! The controller's running state and its serial request scheduler (Java's
//! `DLedgerController.EventScheduler` plus `ControllerManager`'s reaction to inactive brokers).
//!
//! `Ctx` is owned by the controller's thread (`Rc`, `RefCell`s never held across an await).
//! Every request that reads or writes the replicated state goes through one bounded queue to
//! one task, which, on the leader only, waits until the state machine has applied everything
//! committed (`ensure_linearizable`), validates the request against it, proposes the events and
//! answers once they are committed and applied. So each validation sees every earlier write.
//! A controller that is not the leader answers CONTROLLER_NOT_LEADER.
//!
//! When a master goes inactive (heartbeat timeout, closed connection, or found by the leader's
//! periodic scan) the leader elects a new one through the same queue and, with
//! `notifyBrokerRoleChanged`, pushes NOTIFY_BROKER_ROLE_CHANGED to the group's live brokers.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::answer::{error_answer, Prepared, RoleChange};
use super::config::ControllerConfig;
use super::error::ControllerError;
use super::heartbeat::{BrokerIdentity, BrokerLiveTable};
use super::raft::state_machine::Shared;
use super::raft::{Raft, Request};
use super::replicas::ReplicasInfo;
use super::wire::write_command;
use crate::common::time::now_ms;
use crate::protocol::body::{to_json, SyncStateSet};
use crate::protocol::codes::{request_code, response_code};
use crate::protocol::headers::NotifyBrokerRoleChangedRequestHeader;
use crate::protocol::RemotingCommand;

/// Requests waiting for the scheduler (Java's event queue holds 1024); full = SYSTEM_BUSY.
pub const MAX_QUEUED_JOBS: usize = 1024;
/// How long a request may wait for Raft (Java waits 5 s for its future).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Role-change notifications in flight at once; each has `NOTIFY_TIMEOUT`.
pub const MAX_NOTIFY_IN_FLIGHT: usize = 64;
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(3);

/// A request's validation: run by the scheduler against the applied state, this
/// controller's liveness view and its config.
pub type Validate = Box<dyn FnOnce(&ReplicasInfo, &BrokerLiveTable, &ControllerConfig) -> Prepared>;

struct Job {
    validate: Validate,
    request: RemotingCommand,
    reply: oneshot::Sender<RemotingCommand>,
}

pub struct Ctx {
    pub cfg: RefCell<ControllerConfig>,
    pub raft: Raft,
    pub shared: Shared,
    pub live: RefCell<BrokerLiveTable>,
    jobs: mpsc::Sender<Job>,
    next_conn: Cell<u64>,
    notify_slots: Arc<Semaphore>,
    electing: RefCell<HashSet<String>>,
    started: std::time::Instant,
}

impl Ctx {
    /// The context and the receiving end of its job queue (for `run_scheduler`).
    pub fn new(cfg: ControllerConfig, raft: Raft, shared: Shared) -> (Rc<Ctx>, SchedulerRx) {
        let (tx, rx) = mpsc::channel(MAX_QUEUED_JOBS);
        let ctx = Rc::new(Ctx {
            cfg: RefCell::new(cfg),
            raft,
            shared,
            live: RefCell::new(BrokerLiveTable::default()),
            jobs: tx,
            next_conn: Cell::new(1),
            notify_slots: Arc::new(Semaphore::new(MAX_NOTIFY_IN_FLIGHT)),
            electing: RefCell::new(HashSet::new()),
            started: std::time::Instant::now(),
        });
        (ctx, SchedulerRx(rx))
    }

    pub fn new_conn_id(&self) -> u64 {
        let id = self.next_conn.get();
        self.next_conn.set(id + 1);
        id
    }

    pub fn is_leader(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.current_leader == Some(m.id)
    }

    /// Queues a request for the scheduler and waits for its answer.
    pub async fn submit(&self, request: &RemotingCommand, validate: Validate) -> RemotingCommand {
        if !self.is_leader() {
            return error_answer(request, &ControllerError::NotLeader);
        }
        let (reply, rx) = oneshot::channel();
        let job = Job {
            validate,
            request: request.clone(),
            reply,
        };
        if self.jobs.try_send(job).is_err() {
            return RemotingCommand::response_for(
                request,
                response_code::SYSTEM_BUSY,
                Some("controller request queue is full".into()),
            );
        }
        rx.await.unwrap_or_else(|_| {
            error_answer(
                request,
                &ControllerError::Raft("controller shutting down".into()),
            )
        })
    }
}

pub struct SchedulerRx(mpsc::Receiver<Job>);

/// The one task that validates and commits requests, in arrival order.
pub async fn run_scheduler(ctx: Rc<Ctx>, mut rx: SchedulerRx) {
    while let Some(job) = rx.0.recv().await {
        let answer = run_job(&ctx, job.validate, &job.request).await;
        let _ = job.reply.send(answer);
    }
}

/// Waits until this leader has confirmed its leadership with a quorum and applied all it
/// committed. A quorum that does not answer yet (just after an election, say) is asked again
/// until `WRITE_TIMEOUT`; a higher term means another controller leads.
async fn linearize(ctx: &Rc<Ctx>) -> Result<(), ControllerError> {
    use openraft::error::{CheckIsLeaderError, RaftError};
    let deadline = tokio::time::Instant::now() + WRITE_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, ctx.raft.ensure_linearizable()).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(e)))) => {
                tracing::debug!("leadership not confirmed yet: {e}");
                if tokio::time::Instant::now() + Duration::from_millis(50) >= deadline {
                    return Err(ControllerError::Raft("no quorum in time".into()));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Err(e)) => {
                tracing::info!("not leader for a controller request: {e}");
                return Err(ControllerError::NotLeader);
            }
            Err(_) => return Err(ControllerError::Raft("no quorum in time".into())),
        }
    }
}

async fn run_job(ctx: &Rc<Ctx>, validate: Validate, req: &RemotingCommand) -> RemotingCommand {
    if let Err(e) = linearize(ctx).await {
        return error_answer(req, &e);
    }
    let prepared = {
        let data = ctx.shared.lock();
        let mut live = ctx.live.borrow_mut();
        live.set_now(now_ms());
        validate(&data.replicas, &live, &ctx.cfg.borrow())
    };
    if !prepared.events.is_empty() {
        let write = ctx.raft.client_write(Request {
            events: prepared.events,
        });
        match tokio::time::timeout(WRITE_TIMEOUT, write).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                let err = if e.forward_to_leader().is_some() {
                    ControllerError::NotLeader
                } else {
                    ControllerError::Raft(e.to_string())
                };
                return error_answer(req, &err);
            }
            Err(_) => return error_answer(req, &ControllerError::Raft("commit timed out".into())),
        }
    }
    if let Some(change) = prepared.role_change {
        if ctx.cfg.borrow().notify_broker_role_changed {
            notify_role_change(ctx, change);
        }
    }
    prepared.answer
}

/// Brokers that went inactive on this controller: if this controller leads and one of them
/// was its group's master, elect a new one (Java's `ControllerManager.onBrokerInactive`).
pub fn on_inactive(ctx: &Rc<Ctx>, gone: Vec<BrokerIdentity>) {
    if !ctx.is_leader() {
        return;
    }
    for b in gone {
        let was_master = ctx
            .shared
            .lock()
            .replicas
            .sync_state_info(&b.broker_name)
            .is_some_and(|s| s.master_broker_id == Some(b.broker_id));
        if was_master {
            trigger_elect(ctx, b.broker_name);
        } else {
            tracing::warn!(broker = ?b, "a slave went inactive");
        }
    }
}

/// On the leader: elect again in every group whose master is dead while a member lives
/// (Java's `scanInactiveMasterAndTriggerReelect`). Also run when this controller becomes
/// leader, so a master that died with the old leader is replaced. Not within the first
/// `scanInactiveMasterInterval` after start-up (Java's first scan waits as long): until every
/// broker has been heard from once, a live master would look dead.
pub fn scan_reelect(ctx: &Rc<Ctx>) {
    let grace = Duration::from_millis(ctx.cfg.borrow().scan_inactive_master_interval_ms);
    if !ctx.is_leader() || ctx.started.elapsed() < grace {
        return;
    }
    let names = {
        let mut live = ctx.live.borrow_mut();
        live.set_now(now_ms());
        ctx.shared.lock().replicas.need_reelect(&*live)
    };
    for name in names {
        trigger_elect(ctx, name);
    }
}

/// Runs a controller-triggered election for `broker_name` (one at a time per group), retried
/// `electMasterMaxRetryCount` times when Raft fails; a definitive answer is not retried.
pub fn trigger_elect(ctx: &Rc<Ctx>, broker_name: String) {
    if !ctx.electing.borrow_mut().insert(broker_name.clone()) {
        return;
    }
    let ctx = ctx.clone();
    tokio::task::spawn_local(async move {
        let tries = ctx.cfg.borrow().elect_master_max_retry_count;
        for attempt in 0..tries {
            let trigger = RemotingCommand::new_request(request_code::CONTROLLER_ELECT_MASTER);
            let (req, name) = (trigger.clone(), broker_name.clone());
            let validate: Validate = Box::new(move |state, live, cfg| {
                super::answer::prepare_elect(state, live, cfg, &req, &name, None, false)
            });
            let answer = ctx.submit(&trigger, validate).await;
            tracing::info!(
                broker_name,
                attempt,
                code = answer.code,
                remark = answer.remark.as_deref().unwrap_or(""),
                "controller-triggered election"
            );
            let retry = matches!(
                answer.code,
                response_code::SYSTEM_ERROR | response_code::SYSTEM_BUSY
            );
            if !retry {
                break;
            }
        }
        ctx.electing.borrow_mut().remove(&broker_name);
    });
}

/// Sends NOTIFY_BROKER_ROLE_CHANGED (oneway) to each live member of the group at the address
/// it registered. A broker that cannot be reached in `NOTIFY_TIMEOUT` is logged and skipped.
pub fn notify_role_change(ctx: &Rc<Ctx>, change: RoleChange) {
    let g = &change.member_group;
    let mut live = ctx.live.borrow_mut();
    live.set_now(now_ms());
    use super::elect::Liveness;
    let targets: Vec<String> = g
        .broker_addrs
        .iter()
        .filter(|(id, _)| live.is_alive(&g.cluster, &g.broker_name, **id))
        .map(|(_, addr)| addr.clone())
        .collect();
    drop(live);
    for addr in targets {
        let mut cmd = RemotingCommand::new_request(request_code::NOTIFY_BROKER_ROLE_CHANGED);
        NotifyBrokerRoleChangedRequestHeader {
            master_address: change.master_address.clone(),
            master_epoch: Some(change.master_epoch),
            sync_state_set_epoch: Some(change.sync_state_set_epoch),
            master_broker_id: Some(change.master_broker_id),
        }
        .write_to(&mut cmd);
        cmd.body = to_json(&SyncStateSet {
            sync_state_set: change.sync_state_set.clone(),
            sync_state_set_epoch: change.sync_state_set_epoch,
        })
        .into();
        cmd.set_oneway();
        // Bounded: with every slot taken the notification is dropped; the broker still learns
        // the new master from its periodic CONTROLLER_GET_REPLICA_INFO.
        let Ok(permit) = ctx.notify_slots.clone().try_acquire_owned() else {
            tracing::warn!(
                addr,
                "too many role-change notifications in flight; skipped"
            );
            continue;
        };
        tokio::task::spawn_local(async move {
            let _permit = permit;
            let sent = tokio::time::timeout(NOTIFY_TIMEOUT, async {
                let mut s = TcpStream::connect(&addr).await?;
                write_command(&mut s, &cmd).await?;
                tokio::io::AsyncWriteExt::shutdown(&mut s).await
            })
            .await;
            match sent {
                Ok(Ok(())) => tracing::info!(addr, "notified broker of its role change"),
                Ok(Err(e)) => tracing::warn!(addr, "role-change notification failed: {e}"),
                Err(_) => tracing::warn!(addr, "role-change notification timed out"),
            }
        });
    }
}
