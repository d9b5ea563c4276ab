//! A broker in controller mode (RocketMQ 5's `ReplicasManager`), on shard 0: it finds the
//! controller leader, gets a broker id from it once (kept in the store's `brokerIdentity`
//! file), registers, heartbeats to every controller, asks for an election when its group has no
//! master, and applies what the controller decides (CONTROLLER_REGISTER_BROKER's and
//! CONTROLLER_GET_REPLICA_INFO's answers, every `syncBrokerMetadataPeriod`, and the
//! NOTIFY_BROKER_ROLE_CHANGED it pushes): a newer master epoch naming this broker makes it
//! the master, one naming another makes it that master's slave, both without a restart. A
//! master also keeps its group's SyncStateSet: slaves join when they catch up, leave after
//! `haMaxTimeSlaveNotCatchup` behind or disconnected, and each change is proposed to the
//! controller (CONTROLLER_ALTER_SYNC_STATE_SET) before it counts.
//!
//! The role itself is `broker::role::RoleState`, which every shard reads; this module is its
//! only writer. The commit log's epochs are `store::EpochFileCache`, owned here and read by
//! the AutoSwitch HA connections on this shard.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::common::now_ms;
use crate::constants::BROKER_RPC_TIMEOUT;
use crate::error::BrokerError;
use crate::long_poll::Waiter;
use crate::protocol::body::{
    self, ElectMasterResponseBody, EpochEntry, EpochEntryCache, SyncStateSet,
};
use crate::protocol::codes::{request_code as code, response_code as rc};
use crate::protocol::headers::{
    AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader, ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader, ElectMasterRequestHeader, ElectMasterResponseHeader,
    GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader, GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
    NotifyBrokerRoleChangedRequestHeader, RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
};
use crate::protocol::RemotingCommand;
use crate::register;
use crate::remoting::client::Client;
use crate::role::from_mask;
use crate::runtime;
use crate::shard::Shard;
use crate::store::broker_identity::{BrokerIdentity, TempBrokerIdentity};
use crate::store::EpochFileCache;

/// How long start-up waits before it tries the controllers again.
const RETRY: Duration = Duration::from_secs(1);

/// The group's master as the controller last said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MasterInfo {
    pub broker_id: i64,
    /// Its remoting address.
    pub addr: String,
    pub epoch: i32,
}

/// What a controller answers about the group: its master (if any) and SyncStateSet.
#[derive(Clone, Debug, Default)]
struct Decision {
    master: Option<MasterInfo>,
    sync_state_set: BTreeSet<i64>,
    sync_state_set_epoch: i32,
}

/// Shard 0's controller-mode state.
pub struct Replicas {
    leader: Cell<Option<SocketAddr>>,
    /// One connection per controller, taken out of the map for the length of a call.
    clients: RefCell<HashMap<SocketAddr, Client>>,
    master: RefCell<Option<MasterInfo>>,
    pub epochs: RefCell<EpochFileCache>,
    /// The slave's HA client stops appending while this is set (the broker is becoming master).
    stop_following: Cell<bool>,
    /// The slave's HA client is inside an append.
    appending: Cell<bool>,
    /// Woken when the role changes (the HA client waits on it while there is no master).
    changed: RefCell<Rc<Waiter>>,
    /// A SyncStateSet change is being proposed: until the controller answers, acks count the
    /// union of the old and the proposed set.
    proposing: Cell<bool>,
    /// A decision is being applied: the next one waits (a notification and an answer can
    /// carry the same decision at once).
    applying: Cell<bool>,
}

thread_local! {
    static REPLICAS: RefCell<Option<Rc<Replicas>>> = const { RefCell::new(None) };
}

impl Replicas {
    /// Installs the state, with the epochs loaded at start, for shard 0's tasks and handlers.
    pub fn open(epochs: EpochFileCache) -> Rc<Replicas> {
        let r = Rc::new(Replicas {
            leader: Cell::new(None),
            clients: RefCell::default(),
            master: RefCell::new(None),
            epochs: RefCell::new(epochs),
            stop_following: Cell::new(false),
            appending: Cell::new(false),
            changed: RefCell::new(Waiter::new()),
            proposing: Cell::new(false),
            applying: Cell::new(false),
        });
        REPLICAS.with(|c| *c.borrow_mut() = Some(r.clone()));
        r
    }

    /// The state installed on this shard (shard 0 of a broker in controller mode).
    pub fn get() -> Option<Rc<Replicas>> {
        REPLICAS.with(|c| c.borrow().clone())
    }

    /// The master the controller last named, if it is another broker.
    pub fn master(&self) -> Option<MasterInfo> {
        self.master.borrow().clone()
    }

    /// Whether the slave's HA client may append what it receives.
    pub fn may_follow(&self) -> bool {
        !self.stop_following.get()
    }

    /// The HA client marks its appends, so a change to master waits for the one in flight.
    pub fn set_appending(&self, on: bool) {
        self.appending.set(on);
    }

    /// Resolves at the next role change.
    pub fn changed(&self) -> crate::long_poll::Notified {
        self.changed.borrow().notified()
    }

    fn notify_changed(&self) {
        let old = std::mem::replace(&mut *self.changed.borrow_mut(), Waiter::new());
        old.notify();
    }

    /// The commit log's epochs, for the AutoSwitch handshake.
    pub fn epoch_entries(&self) -> Vec<EpochEntry> {
        self.epochs.borrow().entries()
    }
}

/// Shard 0 of a broker in controller mode: start-up with the controller, then the periodic
/// sync; never returns while the broker runs.
pub async fn run(s0: Rc<Shard>, r: Rc<Replicas>) {
    let id = loop {
        if s0.is_stopping() {
            return;
        }
        match broker_id(&s0, &r).await {
            Ok(id) => break id,
            Err(e) => tracing::warn!(error = %e, "no broker id from the controller yet"),
        }
        runtime::sleep(RETRY).await;
    };
    s0.ctx.role.set_own_id(id);
    heartbeats(s0.clone());
    loop {
        if s0.is_stopping() {
            return;
        }
        match register_to_controller(&s0, &r, id).await {
            Ok(()) => break,
            Err(e) => tracing::warn!(error = %e, "registration with the controller failed"),
        }
        runtime::sleep(RETRY).await;
    }
    let cm = &s0.ctx.cfg.controller_mode;
    let sync = Duration::from_millis(cm.sync_broker_metadata_period_ms);
    let check = Duration::from_millis(cm.check_sync_state_set_period_ms);
    let tick = sync.min(check).min(RETRY);
    let (mut last_sync, mut last_check) = (std::time::Instant::now(), std::time::Instant::now());
    while !s0.is_stopping() {
        runtime::sleep(tick).await;
        if last_sync.elapsed() >= sync || !s0.ctx.role.is_decided() {
            last_sync = std::time::Instant::now();
            if let Err(e) = sync_replica_info(&s0, &r).await {
                tracing::warn!(error = %e, "CONTROLLER_GET_REPLICA_INFO failed");
            }
        }
        if !s0.ctx.role.is_slave() && last_check.elapsed() >= check {
            last_check = std::time::Instant::now();
            check_sync_state_set(&s0, &r, None).await;
        }
    }
}

/// This broker's id: from `brokerIdentity`, or else applied for (Java's `GET_NEXT_BROKER_ID`
/// then `APPLY_BROKER_ID` with a check code, the temporary file written in between so a crash
/// there claims the same id again).
async fn broker_id(s0: &Rc<Shard>, r: &Replicas) -> Result<i64, String> {
    let root = s0.ctx.cfg.store.store_path_root_dir.clone();
    let cfg = &s0.ctx.cfg;
    let r2 = root.clone();
    let found = runtime::spawn_blocking(move || BrokerIdentity::read(&r2))
        .await
        .map_err(|e| e.to_string())?;
    if let Some(id) = found {
        if id.cluster_name != cfg.broker_cluster_name || id.broker_name != cfg.broker_name {
            return Err(format!(
                "the store's brokerIdentity belongs to {}#{}, this broker is {}#{}",
                id.cluster_name, id.broker_name, cfg.broker_cluster_name, cfg.broker_name
            ));
        }
        return Ok(id.broker_id as i64);
    }
    let identity = |id: i64| BrokerIdentity {
        cluster_name: cfg.broker_cluster_name.clone(),
        broker_name: cfg.broker_name.clone(),
        broker_id: id as u64,
    };
    let r2 = root.clone();
    let temp = runtime::spawn_blocking(move || TempBrokerIdentity::read(&r2))
        .await
        .map_err(|e| e.to_string())?;
    let (id, check_code) = match temp {
        Some(t) => (t.identity.broker_id as i64, t.register_check_code),
        None => {
            let mut cmd = RemotingCommand::new_request(code::CONTROLLER_GET_NEXT_BROKER_ID);
            GetNextBrokerIdRequestHeader {
                cluster_name: cfg.broker_cluster_name.clone(),
                broker_name: cfg.broker_name.clone(),
            }
            .write_to(&mut cmd);
            let resp = leader_call(s0, r, cmd).await?;
            let h =
                GetNextBrokerIdResponseHeader::from_command(&resp).map_err(|e| e.to_string())?;
            let id = h
                .next_broker_id
                .filter(|id| *id > 0)
                .ok_or("no valid nextBrokerId in the answer")?;
            let check_code = format!("{};{}", s0.ctx.store_host, now_ms());
            let t = TempBrokerIdentity {
                identity: identity(id),
                register_check_code: check_code.clone(),
            };
            let r2 = root.clone();
            runtime::spawn_blocking(move || t.write(&r2))
                .await
                .map_err(|e| e.to_string())?;
            (id, check_code)
        }
    };
    let mut cmd = RemotingCommand::new_request(code::CONTROLLER_APPLY_BROKER_ID);
    ApplyBrokerIdRequestHeader {
        cluster_name: cfg.broker_cluster_name.clone(),
        broker_name: cfg.broker_name.clone(),
        applied_broker_id: id,
        register_check_code: check_code,
    }
    .write_to(&mut cmd);
    if let Err(e) = leader_call(s0, r, cmd).await {
        // Another broker took the id: forget it and ask for the next one.
        let r2 = root.clone();
        if let Err(e2) = runtime::spawn_blocking(move || TempBrokerIdentity::remove(&r2)).await {
            tracing::warn!(error = %e2, "cannot remove the temporary broker identity");
        }
        return Err(format!("applying for broker id {id}: {e}"));
    }
    let identity = identity(id);
    runtime::spawn_blocking(move || {
        identity.write(&root)?;
        TempBrokerIdentity::remove(&root)
    })
    .await
    .map_err(|e| e.to_string())?;
    tracing::info!(broker_id = id, "the controller assigned this broker's id");
    Ok(id)
}

/// CONTROLLER_REGISTER_BROKER, then an election when the group has no master.
async fn register_to_controller(s0: &Rc<Shard>, r: &Rc<Replicas>, id: i64) -> Result<(), String> {
    let cfg = &s0.ctx.cfg;
    let mut cmd = RemotingCommand::new_request(code::CONTROLLER_REGISTER_BROKER);
    RegisterBrokerToControllerRequestHeader {
        cluster_name: cfg.broker_cluster_name.clone(),
        broker_name: cfg.broker_name.clone(),
        broker_id: id,
        broker_address: s0.ctx.store_host.to_string(),
        invoke_time: Some(now_ms()),
    }
    .write_to(&mut cmd);
    let resp = leader_call(s0, r, cmd).await?;
    let h =
        RegisterBrokerToControllerResponseHeader::from_command(&resp).map_err(|e| e.to_string())?;
    let set = sync_state_set_body(&resp);
    let d = Decision {
        master: master_info(h.master_broker_id, h.master_address, h.master_epoch),
        sync_state_set: set.sync_state_set,
        sync_state_set_epoch: h.sync_state_set_epoch.unwrap_or(set.sync_state_set_epoch),
    };
    match d.master {
        Some(_) => apply(s0, r, d).await,
        None => elect(s0, r).await?,
    }
    Ok(())
}

/// Asks the controller to elect a master (itself, if the group has none).
async fn elect(s0: &Rc<Shard>, r: &Rc<Replicas>) -> Result<(), String> {
    let cfg = &s0.ctx.cfg;
    let mut cmd = RemotingCommand::new_request(code::CONTROLLER_ELECT_MASTER);
    ElectMasterRequestHeader {
        cluster_name: cfg.broker_cluster_name.clone(),
        broker_name: cfg.broker_name.clone(),
        broker_id: s0.ctx.role.own_id(),
        designate_elect: Some(false),
        invoke_time: Some(now_ms()),
    }
    .write_to(&mut cmd);
    let resp = leader_call(s0, r, cmd).await?;
    let h = ElectMasterResponseHeader::from_command(&resp).map_err(|e| e.to_string())?;
    let b: ElectMasterResponseBody = if resp.body.is_empty() {
        ElectMasterResponseBody::default()
    } else {
        body::from_json(&resp.body).map_err(|e| e.to_string())?
    };
    let d = Decision {
        master: master_info(h.master_broker_id, h.master_address, h.master_epoch),
        sync_state_set: b.sync_state_set,
        sync_state_set_epoch: h.sync_state_set_epoch.unwrap_or_default(),
    };
    if d.master.is_none() {
        return Err("the controller elected no master".into());
    }
    apply(s0, r, d).await;
    Ok(())
}

/// CONTROLLER_GET_REPLICA_INFO: applies a newer decision; asks for an election when the group
/// has no master.
async fn sync_replica_info(s0: &Rc<Shard>, r: &Rc<Replicas>) -> Result<(), String> {
    let mut cmd = RemotingCommand::new_request(code::CONTROLLER_GET_REPLICA_INFO);
    GetReplicaInfoRequestHeader {
        broker_name: s0.ctx.cfg.broker_name.clone(),
    }
    .write_to(&mut cmd);
    let resp = leader_call(s0, r, cmd).await?;
    let h = GetReplicaInfoResponseHeader::from_command(&resp).map_err(|e| e.to_string())?;
    let set = sync_state_set_body(&resp);
    let d = Decision {
        master: master_info(h.master_broker_id, h.master_address, h.master_epoch),
        sync_state_set: set.sync_state_set,
        sync_state_set_epoch: set.sync_state_set_epoch,
    };
    match d.master {
        Some(_) => apply(s0, r, d).await,
        None => elect(s0, r).await?,
    }
    Ok(())
}

/// NOTIFY_BROKER_ROLE_CHANGED (1008) from a controller, on any shard: applied on shard 0.
pub async fn role_changed(
    shard: Rc<Shard>,
    cmd: RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let answer = RemotingCommand::response_for(&cmd, rc::SUCCESS, None);
    shard
        .mesh
        .call(0, move |s0| async move { on_role_changed(s0, cmd).await })
        .await??;
    Ok(answer)
}

/// GET_BROKER_EPOCH_CACHE (1007): this broker's epochs and commit-log end, on any shard.
pub async fn epoch_cache(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let body = shard
        .mesh
        .call(0, |s0| async move {
            let cfg = &s0.ctx.cfg;
            let epochs = Replicas::get()
                .map(|r| r.epoch_entries())
                .unwrap_or_default();
            body::to_json(&EpochEntryCache {
                broker_id: s0.ctx.role.own_id(),
                broker_name: cfg.broker_name.clone(),
                cluster_name: cfg.broker_cluster_name.clone(),
                epoch_list: epochs,
                max_offset: s0.ctx.writer.max_phy_offset() as i64,
            })
        })
        .await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body))
}

async fn on_role_changed(s0: Rc<Shard>, cmd: RemotingCommand) -> Result<(), BrokerError> {
    let Some(r) = Replicas::get() else {
        return Err(BrokerError::IllegalOperation(
            "this broker is not in controller mode".into(),
        ));
    };
    let h = NotifyBrokerRoleChangedRequestHeader::from_command(&cmd)?;
    let set = sync_state_set_body(&cmd);
    let d = Decision {
        master: master_info(h.master_broker_id, h.master_address, h.master_epoch),
        sync_state_set: set.sync_state_set,
        sync_state_set_epoch: h.sync_state_set_epoch.unwrap_or(set.sync_state_set_epoch),
    };
    if d.master.is_some() {
        apply(&s0, &r, d).await;
    }
    Ok(())
}

fn master_info(id: Option<i64>, addr: Option<String>, epoch: Option<i32>) -> Option<MasterInfo> {
    match (id, addr, epoch) {
        (Some(id), Some(addr), Some(epoch)) if id >= 0 && !addr.is_empty() => Some(MasterInfo {
            broker_id: id,
            addr,
            epoch,
        }),
        _ => None,
    }
}

fn sync_state_set_body(cmd: &RemotingCommand) -> SyncStateSet {
    if cmd.body.is_empty() {
        return SyncStateSet::default();
    }
    body::from_json(&cmd.body).unwrap_or_default()
}

/// Applies a controller's decision: an older master epoch is ignored, as Java does; the same
/// epoch only refreshes the SyncStateSet.
async fn apply(s0: &Rc<Shard>, r: &Rc<Replicas>, d: Decision) {
    while r.applying.replace(true) {
        runtime::sleep(Duration::from_millis(1)).await;
    }
    apply_one(s0, r, d).await;
    r.applying.set(false);
}

async fn apply_one(s0: &Rc<Shard>, r: &Rc<Replicas>, d: Decision) {
    let Some(m) = d.master else { return };
    let role = &s0.ctx.role;
    let own = role.own_id();
    let current = role.master_epoch();
    let same = role.is_decided() && m.epoch == current;
    if role.is_decided() && m.epoch < current {
        tracing::debug!(epoch = m.epoch, current, "a stale role decision ignored");
        return;
    }
    if same {
        let (_, ss_epoch) = role.sync_state_set();
        if !role.is_slave() && d.sync_state_set_epoch > ss_epoch && !r.proposing.get() {
            role.set_sync_state_set(d.sync_state_set.iter().copied(), d.sync_state_set_epoch);
            s0.ctx.slave_acks.wake_all();
        }
        return;
    }
    if m.broker_id == own {
        change_to_master(s0, r, m.epoch, &d.sync_state_set, d.sync_state_set_epoch).await;
    } else {
        change_to_slave(s0, r, m);
    }
}

/// Becomes the master of `epoch`: stops following, records the epoch at this commit log's end,
/// takes writes, and registers with the name servers at once (as id 0).
async fn change_to_master(
    s0: &Rc<Shard>,
    r: &Rc<Replicas>,
    epoch: i32,
    set: &BTreeSet<i64>,
    ss_epoch: i32,
) {
    r.stop_following.set(true);
    while r.appending.get() {
        runtime::sleep(Duration::from_millis(1)).await;
    }
    let end = s0.ctx.writer.max_phy_offset();
    // The epoch starts at the log's end. An earlier epoch that holds no bytes is dropped
    // (Java would keep it and fail to append, leaving this epoch's bytes under the old number).
    // A broker that was already this epoch's master (restarted, and still master) keeps its
    // entry: Java cuts it and appends it again at the log's end, which leaves the bytes
    // written before the restart in no epoch. A newer epoch on file than the controller's is
    // refused, as in Java.
    let new_epoch = epoch.max(0) as u32;
    let mut cache = r.epochs.borrow().clone();
    // The epoch file is written (and fsynced) off this core.
    let recorded = runtime::spawn_blocking(move || {
        match cache.last_epoch() {
            Some(last) if last == new_epoch => return Ok(cache),
            Some(last) if last > new_epoch => {
                return Err(crate::store::StoreError::Invalid(format!(
                    "the epoch file already holds epoch {last}, newer than the controller's \
                     {new_epoch}"
                )))
            }
            _ => {}
        }
        if let Some(last) = cache.last_entry().filter(|l| l.start_offset >= end) {
            cache.truncate_suffix_by_epoch(last.epoch)?;
        }
        cache.append(new_epoch, end).map(|()| cache)
    })
    .await;
    match recorded {
        Ok(cache) => *r.epochs.borrow_mut() = cache,
        Err(e) => {
            tracing::error!(epoch, error = %e, "cannot record the epoch; staying a slave");
            r.stop_following.set(false);
            return;
        }
    }
    *r.master.borrow_mut() = None;
    s0.ctx
        .role
        .set_sync_state_set(set.iter().copied(), ss_epoch);
    s0.ctx.slave_acks.wake_all();
    s0.meta_mut().topics_version.state_version = epoch as i64;
    s0.ctx.role.become_master(epoch);
    r.notify_changed();
    register::register_soon(s0);
    tracing::info!(epoch, from = end, "this broker is the master now");
}

/// Becomes a slave of `m`: refuses writes from now on, and follows it.
fn change_to_slave(s0: &Rc<Shard>, r: &Rc<Replicas>, m: MasterInfo) {
    s0.ctx.role.become_slave(m.epoch);
    tracing::info!(master = %m.addr, master_id = m.broker_id, epoch = m.epoch, "this broker is a slave now");
    *r.master.borrow_mut() = Some(m);
    r.stop_following.set(false);
    r.notify_changed();
    register::register_soon(s0);
}

/// A master's SyncStateSet check (Java's `maybeShrinkSyncStateSet` and the expansion an
/// acknowledgement triggers): members are this broker and each connected slave that caught
/// up within `haMaxTimeSlaveNotCatchup` (`joined` is one that just caught up). A different set
/// is proposed to the controller; it counts once the controller accepts it.
pub async fn check_sync_state_set(s0: &Rc<Shard>, r: &Rc<Replicas>, joined: Option<i64>) {
    if r.proposing.get() || s0.ctx.role.is_slave() {
        return;
    }
    let cm = &s0.ctx.cfg.controller_mode;
    let now = now_ms() as u64;
    let (mask, ss_epoch) = s0.ctx.role.sync_state_set();
    let own = s0.ctx.role.own_id();
    let mut want: BTreeSet<i64> = [own].into();
    for (id, _, caught_up) in s0.ctx.slave_acks.identified() {
        let recent = now.saturating_sub(caught_up) <= cm.max_time_slave_not_catchup_ms;
        if (recent && caught_up > 0) || joined == Some(id) {
            want.insert(id);
        }
    }
    let have: BTreeSet<i64> = from_mask(mask).collect();
    if want == have {
        return;
    }
    r.proposing.set(true);
    // Until the controller answers, acks wait for the union (conservative).
    s0.ctx
        .role
        .set_sync_state_set(have.union(&want).copied(), ss_epoch);
    s0.ctx.slave_acks.wake_all();
    let result = alter_sync_state_set(s0, r, &want, ss_epoch).await;
    match result {
        Ok(new_epoch) => {
            tracing::info!(set = ?want, epoch = new_epoch, "SyncStateSet changed");
            s0.ctx
                .role
                .set_sync_state_set(want.iter().copied(), new_epoch);
            s0.ctx.slave_acks.wake_all();
        }
        Err(e) => {
            tracing::warn!(set = ?want, error = %e, "the controller refused the SyncStateSet");
            s0.ctx
                .role
                .set_sync_state_set(have.iter().copied(), ss_epoch);
            s0.ctx.slave_acks.wake_all();
        }
    }
    r.proposing.set(false);
}

async fn alter_sync_state_set(
    s0: &Rc<Shard>,
    r: &Replicas,
    set: &BTreeSet<i64>,
    epoch: i32,
) -> Result<i32, String> {
    let mut cmd = RemotingCommand::new_request(code::CONTROLLER_ALTER_SYNC_STATE_SET);
    AlterSyncStateSetRequestHeader {
        broker_name: s0.ctx.cfg.broker_name.clone(),
        master_broker_id: s0.ctx.role.own_id(),
        master_epoch: s0.ctx.role.master_epoch(),
        invoke_time: Some(now_ms()),
    }
    .write_to(&mut cmd);
    let cmd = cmd.with_body(body::to_json(&SyncStateSet {
        sync_state_set: set.clone(),
        sync_state_set_epoch: epoch,
    }));
    let resp = leader_call(s0, r, cmd).await?;
    let h = AlterSyncStateSetResponseHeader::from_command(&resp).map_err(|e| e.to_string())?;
    Ok(h.new_sync_state_set_epoch)
}

/// BROKER_HEARTBEAT to every controller every `brokerHeartbeatInterval`, oneway, one task per
/// controller (one that does not answer delays no other), each over its own long-lived
/// connection (a controller also takes a closed one as this broker's death).
fn heartbeats(s0: Rc<Shard>) {
    for addr in s0.ctx.cfg.controller_mode.controller_addrs.clone() {
        runtime::spawn(heartbeat_to(s0.clone(), addr));
    }
}

async fn heartbeat_to(s0: Rc<Shard>, addr: SocketAddr) {
    let period = Duration::from_millis(s0.ctx.cfg.controller_mode.heartbeat_interval_ms);
    let mut conn: Option<Client> = None;
    while !s0.is_stopping() {
        let client = match conn.take() {
            Some(c) => Some(c),
            None => match Client::connect(addr, BROKER_RPC_TIMEOUT).await {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::debug!(controller = %addr, error = %e, "heartbeat: no connection");
                    None
                }
            },
        };
        if let Some(mut c) = client {
            match c
                .send_oneway(heartbeat_command(&s0), BROKER_RPC_TIMEOUT)
                .await
            {
                Ok(()) => conn = Some(c),
                Err(e) => tracing::debug!(controller = %addr, error = %e, "heartbeat failed"),
            }
        }
        runtime::sleep(period).await;
    }
}

fn heartbeat_command(s0: &Shard) -> RemotingCommand {
    let cfg = &s0.ctx.cfg;
    let role = &s0.ctx.role;
    let max = s0.ctx.writer.max_phy_offset() as i64;
    let mut cmd = RemotingCommand::new_request(code::BROKER_HEARTBEAT);
    BrokerHeartbeatRequestHeader {
        cluster_name: cfg.broker_cluster_name.clone(),
        broker_addr: s0.ctx.store_host.to_string(),
        broker_name: cfg.broker_name.clone(),
        broker_id: Some(role.own_id()),
        epoch: Some(role.master_epoch()),
        max_offset: Some(max),
        confirm_offset: Some(max),
        heartbeat_timeout_mills: Some(cfg.controller_mode.heartbeat_timeout_ms as i64),
        election_priority: Some(cfg.controller_mode.election_priority),
    }
    .write_to(&mut cmd);
    cmd
}

/// Calls the controller leader (found through CONTROLLER_GET_METADATA_INFO first); a failure or
/// a CONTROLLER_NOT_LEADER forgets the leader so the next call looks again.
async fn leader_call(
    s0: &Rc<Shard>,
    r: &Replicas,
    cmd: RemotingCommand,
) -> Result<RemotingCommand, String> {
    let leader = match r.leader.get() {
        Some(l) => l,
        None => {
            let l = find_leader(s0, r).await?;
            r.leader.set(Some(l));
            l
        }
    };
    let resp = call(r, leader, cmd)
        .await
        .inspect_err(|_| r.leader.set(None))?;
    match resp.code {
        rc::SUCCESS => Ok(resp),
        c => {
            if c == rc::CONTROLLER_NOT_LEADER {
                r.leader.set(None);
            }
            Err(format!(
                "controller {leader} answered {c}: {}",
                resp.remark.unwrap_or_default()
            ))
        }
    }
}

async fn find_leader(s0: &Rc<Shard>, r: &Replicas) -> Result<SocketAddr, String> {
    let mut last = String::from("no controller configured");
    for addr in s0.ctx.cfg.controller_mode.controller_addrs.clone() {
        let cmd = RemotingCommand::new_request(code::CONTROLLER_GET_METADATA_INFO);
        match call(r, addr, cmd).await {
            Ok(resp) if resp.code == rc::SUCCESS => {
                let Ok(h) = GetMetaDataResponseHeader::from_command(&resp) else {
                    continue;
                };
                if h.is_leader {
                    return Ok(addr);
                }
                if let Some(a) = h.controller_leader_address.and_then(|a| a.parse().ok()) {
                    return Ok(a);
                }
                last = format!("controller {addr} knows no leader");
            }
            Ok(resp) => last = format!("controller {addr} answered {}", resp.code),
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn call(
    r: &Replicas,
    addr: SocketAddr,
    cmd: RemotingCommand,
) -> Result<RemotingCommand, String> {
    let taken = r.clients.borrow_mut().remove(&addr);
    let mut client = match taken {
        Some(c) => c,
        None => Client::connect(addr, BROKER_RPC_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?,
    };
    let resp = client
        .invoke(cmd, BROKER_RPC_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    r.clients.borrow_mut().insert(addr, client);
    Ok(resp)
}
