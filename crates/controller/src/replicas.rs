//! The controller's replicated state (Java's `ReplicasInfoManager`): per broker group
//! (`brokerName`) who its replicas are (`BrokerReplicaInfo`) and who is master with which
//! SyncStateSet (`SyncStateInfo`).
//!
//! The state is event-sourced. A request is first validated against the current state by one of
//! the `ReplicasInfo` methods (`alter_sync_state_set`, `elect_master`, `apply_broker_id`,
//! `register_broker`, `clean_broker_data`); that produces the answer and zero or more `Event`s.
//! The state changes only when an event is applied (`ReplicasInfo::apply`), which the Raft state
//! machine does for every committed log entry on every controller, so all controllers hold the
//! same state. Validation reads liveness through `Liveness`, which is each controller's own view
//! of the heartbeats and is never replicated. The checks, their order and their codes are
//! Java's; a refused request produces no event.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::elect::{elect, Liveness};
use super::error::ControllerError;
use crate::protocol::body::{BrokerMemberGroup, ReplicaIdentity, ReplicasInfo as ReplicasInfoBody};

/// The first id the controller hands out in a group (Java's `MixAll.FIRST_BROKER_CONTROLLER_ID`).
pub const FIRST_BROKER_CONTROLLER_ID: i64 = 1;

/// One replica's registration: the address it registered and the check code it applied with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerIdInfo {
    pub address: String,
    pub register_check_code: String,
}

/// A broker group's members.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerReplicaInfo {
    pub cluster_name: String,
    pub broker_name: String,
    pub next_assign_broker_id: i64,
    pub broker_id_info: BTreeMap<i64, BrokerIdInfo>,
}

impl BrokerReplicaInfo {
    pub fn address(&self, id: Option<i64>) -> Option<&str> {
        id.and_then(|id| self.broker_id_info.get(&id))
            .map(|i| i.address.as_str())
    }

    pub fn addresses(&self) -> BTreeMap<i64, String> {
        self.broker_id_info
            .iter()
            .map(|(id, i)| (*id, i.address.clone()))
            .collect()
    }

    pub fn member_group(&self) -> BrokerMemberGroup {
        BrokerMemberGroup {
            broker_addrs: self.addresses(),
            broker_name: self.broker_name.clone(),
            cluster: self.cluster_name.clone(),
        }
    }
}

/// A broker group's master and SyncStateSet, each versioned by its epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncStateInfo {
    pub cluster_name: String,
    pub broker_name: String,
    pub master_broker_id: Option<i64>,
    pub master_epoch: i32,
    pub sync_state_set_epoch: i32,
    pub sync_state_set: BTreeSet<i64>,
}

impl SyncStateInfo {
    /// No master was ever elected (a failed election counts: it bumps the epoch).
    pub fn is_first_time_for_elect(&self) -> bool {
        self.master_epoch == 0
    }
}

/// A change to the replicated state (Java's `EventType`, without the read event).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    AlterSyncStateSet {
        broker_name: String,
        new_sync_state_set: BTreeSet<i64>,
    },
    ApplyBrokerId {
        cluster_name: String,
        broker_name: String,
        broker_address: String,
        new_broker_id: i64,
        register_check_code: String,
    },
    /// `new_master: None`: the old master is gone and nobody could take over.
    ElectMaster {
        broker_name: String,
        new_master: Option<i64>,
    },
    /// `broker_ids: None`: the whole group.
    CleanBrokerData {
        broker_name: String,
        broker_ids: Option<BTreeSet<i64>>,
    },
    UpdateBrokerAddress {
        broker_name: String,
        broker_address: String,
        broker_id: i64,
    },
}

/// A validated request: the answer to send once `events` are committed and applied. A refusal
/// may still carry an answer and events (Java's failed controller-triggered election records
/// that the master is gone; MASTER_STILL_EXIST reports the master).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<H> {
    pub header: H,
    pub body: Option<Vec<u8>>,
    pub refusal: Option<ControllerError>,
    pub events: Vec<Event>,
}

impl<H: Default> Outcome<H> {
    fn refused(e: ControllerError) -> Self {
        Outcome {
            header: H::default(),
            body: None,
            refusal: Some(e),
            events: Vec::new(),
        }
    }
}

/// The master as the answers to 1002/1003/1004 report it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MasterView {
    pub master_broker_id: Option<i64>,
    pub master_address: Option<String>,
    pub master_epoch: Option<i32>,
    pub sync_state_set_epoch: Option<i32>,
}

/// What ELECT_MASTER answers: the new (or kept) master and, on success, the member group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Elected {
    pub master: MasterView,
    pub sync_state_set: BTreeSet<i64>,
    pub member_group: Option<BrokerMemberGroup>,
}

/// Every broker group's replicas and sync state: the Raft state machine's data.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicasInfo {
    replica_info_table: BTreeMap<String, BrokerReplicaInfo>,
    sync_state_set_info_table: BTreeMap<String, SyncStateInfo>,
}

impl ReplicasInfo {
    /// Both halves of the group exist (Java's `isContainsBroker`).
    fn group(&self, broker_name: &str) -> Option<(&BrokerReplicaInfo, &SyncStateInfo)> {
        Some((
            self.replica_info_table.get(broker_name)?,
            self.sync_state_set_info_table.get(broker_name)?,
        ))
    }

    pub fn replica_info(&self, broker_name: &str) -> Option<&BrokerReplicaInfo> {
        self.replica_info_table.get(broker_name)
    }

    pub fn sync_state_info(&self, broker_name: &str) -> Option<&SyncStateInfo> {
        self.sync_state_set_info_table.get(broker_name)
    }

    /// CONTROLLER_ALTER_SYNC_STATE_SET: the master reports a new SyncStateSet, fenced by the
    /// master epoch and the SyncStateSet epoch it knows. Answers the new SyncStateSet epoch.
    pub fn alter_sync_state_set(
        &self,
        broker_name: &str,
        master_broker_id: i64,
        master_epoch: i32,
        new_set: &BTreeSet<i64>,
        new_set_epoch: i32,
        live: &dyn Liveness,
    ) -> Outcome<i32> {
        use ControllerError as E;
        let Some((replicas, sync)) = self.group(broker_name) else {
            return Outcome::refused(E::AlterSyncStateSetFailed(
                "Broker metadata is not existed".into(),
            ));
        };
        if sync.sync_state_set == *new_set {
            return Outcome::refused(E::AlterSyncStateSetFailed(
                "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet"
                    .into(),
            ));
        }
        if sync.master_broker_id != Some(master_broker_id) {
            return Outcome::refused(E::InvalidMaster(format!(
                "Rejecting alter syncStateSet request because the current leader is:{{{:?}}}, not {{{master_broker_id}}}",
                sync.master_broker_id
            )));
        }
        if sync.master_epoch != master_epoch {
            return Outcome::refused(E::FencedMasterEpoch(format!(
                "Rejecting alter syncStateSet request because the current master epoch is:{{{}}}, not {{{master_epoch}}}",
                sync.master_epoch
            )));
        }
        if sync.sync_state_set_epoch != new_set_epoch {
            return Outcome::refused(E::FencedSyncStateSetEpoch(format!(
                "Rejecting alter syncStateSet request because the current syncStateSet epoch is:{{{}}}, not {{{new_set_epoch}}}",
                sync.sync_state_set_epoch
            )));
        }
        for id in new_set {
            if !replicas.broker_id_info.contains_key(id) {
                return Outcome::refused(E::InvalidReplicas(format!(
                    "Rejecting alter syncStateSet request because the replicas {{{id}}} don't exist"
                )));
            }
            if !live.is_alive(&replicas.cluster_name, broker_name, *id) {
                return Outcome::refused(E::BrokerNotAlive(format!(
                    "Rejecting alter syncStateSet request because the replicas {{{id}}} don't alive"
                )));
            }
        }
        if !new_set.contains(&master_broker_id) {
            return Outcome::refused(E::AlterSyncStateSetFailed(format!(
                "Rejecting alter syncStateSet request because the newSyncStateSet don't contains origin leader {{{master_broker_id}}}"
            )));
        }
        let epoch = sync.sync_state_set_epoch + 1;
        Outcome {
            header: epoch,
            body: None,
            refusal: None,
            events: vec![Event::AlterSyncStateSet {
                broker_name: broker_name.to_owned(),
                new_sync_state_set: new_set.clone(),
            }],
        }
    }

    /// CONTROLLER_ELECT_MASTER. `broker_id` None or -1 is the controller's own trigger (a
    /// master went inactive); otherwise the requester, elected outright if the group never had
    /// a master, or by force with `designate_elect`.
    pub fn elect_master(
        &self,
        broker_name: &str,
        broker_id: Option<i64>,
        designate_elect: bool,
        elect_unclean: bool,
        live: &dyn Liveness,
    ) -> Outcome<Elected> {
        use ControllerError as E;
        let Some((replicas, sync)) = self.group(broker_name) else {
            return Outcome::refused(E::BrokerNeedToBeRegistered(
                "Broker hasn't been registered".into(),
            ));
        };
        let all = elect_unclean.then(|| replicas.broker_id_info.keys().copied().collect());
        let old_master = sync.master_broker_id;
        let mut new_master = None;
        if sync.is_first_time_for_elect() {
            new_master = broker_id;
        }
        if new_master.is_none() || new_master == Some(-1) {
            let prefer = if designate_elect { broker_id } else { None };
            new_master = elect(
                live,
                &replicas.cluster_name,
                broker_name,
                &sync.sync_state_set,
                all.as_ref(),
                old_master,
                prefer,
            );
        }
        if new_master.is_some() && new_master == old_master {
            return Outcome {
                header: Elected {
                    master: MasterView {
                        master_broker_id: old_master,
                        master_address: replicas.address(old_master).map(str::to_owned),
                        master_epoch: Some(sync.master_epoch),
                        sync_state_set_epoch: Some(sync.sync_state_set_epoch),
                    },
                    sync_state_set: sync.sync_state_set.clone(),
                    member_group: None,
                },
                body: None,
                refusal: Some(E::MasterStillExist(format!(
                    "The old master {old_master:?} is still alive, not need to elect new master for broker {broker_name}"
                ))),
                events: Vec::new(),
            };
        }
        if let Some(m) = new_master {
            return Outcome {
                header: Elected {
                    master: MasterView {
                        master_broker_id: Some(m),
                        master_address: replicas.address(Some(m)).map(str::to_owned),
                        master_epoch: Some(sync.master_epoch + 1),
                        sync_state_set_epoch: Some(sync.sync_state_set_epoch + 1),
                    },
                    sync_state_set: [m].into(),
                    member_group: Some(replicas.member_group()),
                },
                body: None,
                refusal: None,
                events: vec![Event::ElectMaster {
                    broker_name: broker_name.to_owned(),
                    new_master: Some(m),
                }],
            };
        }
        if broker_id.is_none_or(|id| id == -1) {
            // The controller's own trigger: record that the master is gone, so a later
            // heartbeat or request can elect again.
            return Outcome {
                header: Elected::default(),
                body: None,
                refusal: Some(E::MasterNotAvailable(
                    "Old master has down and failed to elect a new broker master".into(),
                )),
                events: vec![Event::ElectMaster {
                    broker_name: broker_name.to_owned(),
                    new_master: None,
                }],
            };
        }
        Outcome::refused(E::ElectMasterFailed("Failed to elect a new master".into()))
    }

    /// CONTROLLER_GET_NEXT_BROKER_ID: a read.
    pub fn next_broker_id(&self, broker_name: &str) -> i64 {
        self.replica_info_table
            .get(broker_name)
            .map_or(FIRST_BROKER_CONTROLLER_ID, |r| r.next_assign_broker_id)
    }

    /// CONTROLLER_APPLY_BROKER_ID: claim `id`; the address is the check code's part before `;`.
    pub fn apply_broker_id(
        &self,
        cluster_name: &str,
        broker_name: &str,
        id: i64,
        register_check_code: &str,
    ) -> Outcome<()> {
        let address = register_check_code
            .split(';')
            .next()
            .unwrap_or_default()
            .to_owned();
        let event = Event::ApplyBrokerId {
            cluster_name: cluster_name.to_owned(),
            broker_name: broker_name.to_owned(),
            broker_address: address,
            new_broker_id: id,
            register_check_code: register_check_code.to_owned(),
        };
        let ok = Outcome {
            header: (),
            body: None,
            refusal: None,
            events: vec![event],
        };
        let Some(replicas) = self.replica_info_table.get(broker_name) else {
            if id == FIRST_BROKER_CONTROLLER_ID {
                return ok;
            }
            return Outcome::refused(ControllerError::BrokerIdInvalid(format!(
                "Broker-set: {broker_name} hasn't been registered in controller, but broker try to apply brokerId: {id}"
            )));
        };
        match replicas.broker_id_info.get(&id) {
            None => ok,
            Some(i) if i.register_check_code == register_check_code => ok,
            Some(_) => Outcome::refused(ControllerError::BrokerIdInvalid(format!(
                "Fail to apply brokerId: {id} in broker-set: {broker_name}"
            ))),
        }
    }

    /// CONTROLLER_REGISTER_BROKER: a broker with an applied id says where it is now; answers
    /// the master if it is alive, and the SyncStateSet.
    pub fn register_broker(
        &self,
        broker_name: &str,
        id: i64,
        address: &str,
        live: &dyn Liveness,
    ) -> Outcome<(MasterView, BTreeSet<i64>)> {
        use ControllerError as E;
        let Some((replicas, sync)) = self.group(broker_name) else {
            return Outcome::refused(E::BrokerNeedToBeRegistered(format!(
                "Broker-set: {broker_name} hasn't been registered in controller"
            )));
        };
        if !replicas.broker_id_info.contains_key(&id) {
            return Outcome::refused(E::BrokerNeedToBeRegistered(format!(
                "BrokerId: {id} hasn't been registered in broker-set: {broker_name}"
            )));
        }
        let mut view = MasterView::default();
        if let Some(m) = sync.master_broker_id {
            if live.is_alive(&replicas.cluster_name, broker_name, m) {
                view = MasterView {
                    master_broker_id: Some(m),
                    master_address: replicas.address(Some(m)).map(str::to_owned),
                    master_epoch: Some(sync.master_epoch),
                    sync_state_set_epoch: Some(sync.sync_state_set_epoch),
                };
            }
        }
        let mut events = Vec::new();
        if replicas.address(Some(id)) != Some(address) {
            events.push(Event::UpdateBrokerAddress {
                broker_name: broker_name.to_owned(),
                broker_address: address.to_owned(),
                broker_id: id,
            });
        }
        Outcome {
            header: (view, sync.sync_state_set.clone()),
            body: None,
            refusal: None,
            events,
        }
    }

    /// CONTROLLER_GET_REPLICA_INFO: a read; the master (even if dead) and the SyncStateSet.
    pub fn replica_view(
        &self,
        broker_name: &str,
    ) -> Result<(MasterView, BTreeSet<i64>), ControllerError> {
        let (replicas, sync) = self.group(broker_name).ok_or_else(|| {
            ControllerError::BrokerMetadataNotExist("Broker metadata is not existed".into())
        })?;
        let view = MasterView {
            master_broker_id: sync.master_broker_id,
            master_address: replicas.address(sync.master_broker_id).map(str::to_owned),
            master_epoch: Some(sync.master_epoch),
            sync_state_set_epoch: Some(sync.sync_state_set_epoch),
        };
        Ok((view, sync.sync_state_set.clone()))
    }

    /// CONTROLLER_GET_SYNC_STATE_DATA: a read over the named groups (unknown names skipped).
    pub fn sync_state_data(
        &self,
        broker_names: &[String],
        live: &dyn Liveness,
    ) -> BTreeMap<String, ReplicasInfoBody> {
        let mut table = BTreeMap::new();
        for name in broker_names {
            let Some((replicas, sync)) = self.group(name) else {
                continue;
            };
            let mut info = ReplicasInfoBody {
                master_broker_id: sync.master_broker_id,
                master_address: replicas.address(sync.master_broker_id).map(str::to_owned),
                master_epoch: Some(sync.master_epoch),
                sync_state_set_epoch: Some(sync.sync_state_set_epoch),
                ..Default::default()
            };
            for (id, i) in &replicas.broker_id_info {
                let r = ReplicaIdentity {
                    alive: live.is_alive(&replicas.cluster_name, name, *id),
                    broker_address: i.address.clone(),
                    broker_id: *id,
                    broker_name: name.clone(),
                };
                if sync.sync_state_set.contains(id) {
                    info.in_sync_replicas.push(r);
                } else {
                    info.not_in_sync_replicas.push(r);
                }
            }
            table.insert(name.clone(), info);
        }
        table
    }

    /// CLEAN_BROKER_DATA: drop a group, or some of its ids, from the controller's memory.
    /// Refused while a named id (or, with no ids, the group's master) is still alive, unless
    /// `clean_living` is set.
    pub fn clean_broker_data(
        &self,
        cluster_name: &str,
        broker_name: &str,
        ids_to_clean: Option<&str>,
        clean_living: bool,
        live: &dyn Liveness,
    ) -> Outcome<()> {
        use ControllerError as E;
        let ids_text = ids_to_clean.map(str::trim).filter(|s| !s.is_empty());
        let mut ids = None;
        if let Some(text) = ids_text {
            let mut set = BTreeSet::new();
            for part in text.split(';') {
                let Ok(id) = part.trim().parse::<i64>() else {
                    return Outcome::refused(E::InvalidCleanBrokerMetadata(format!(
                        "Please set the option <brokerControllerIdsToClean> according to the format, bad id {:?}",
                        part.chars().take(32).collect::<String>()
                    )));
                };
                set.insert(id);
            }
            ids = Some(set);
        }
        if !clean_living {
            let sync = self.sync_state_set_info_table.get(broker_name);
            if ids.is_none() && sync.is_some_and(|s| s.master_broker_id.is_some()) {
                return Outcome::refused(E::InvalidCleanBrokerMetadata(format!(
                    "Broker {broker_name} is still alive, clean up failure"
                )));
            }
            for id in ids.iter().flatten() {
                if live.is_alive(cluster_name, broker_name, *id) {
                    return Outcome::refused(E::InvalidCleanBrokerMetadata(format!(
                        "Broker [{broker_name},  {id}] is still alive, clean up failure"
                    )));
                }
            }
        }
        if self.group(broker_name).is_none() {
            return Outcome::refused(E::InvalidCleanBrokerMetadata(format!(
                "Broker {broker_name} is not existed,clean broker data failure."
            )));
        }
        Outcome {
            header: (),
            body: None,
            refusal: None,
            events: vec![Event::CleanBrokerData {
                broker_name: broker_name.to_owned(),
                broker_ids: ids,
            }],
        }
    }

    /// Groups whose master is inactive while another member is alive: the leader re-elects
    /// them (Java's `scanNeedReelectBrokerSets`).
    pub fn need_reelect(&self, live: &dyn Liveness) -> Vec<String> {
        let mut out = Vec::new();
        for (name, sync) in &self.sync_state_set_info_table {
            let Some(master) = sync.master_broker_id else {
                continue;
            };
            if live.is_alive(&sync.cluster_name, name, master) {
                continue;
            }
            let Some(replicas) = self.replica_info_table.get(name) else {
                continue;
            };
            if replicas
                .broker_id_info
                .keys()
                .any(|id| live.is_alive(&sync.cluster_name, name, *id))
            {
                out.push(name.clone());
            }
        }
        out
    }

    /// Applies one committed event. Events that name a group or id that no longer exists
    /// change nothing, as in Java.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::AlterSyncStateSet {
                broker_name,
                new_sync_state_set,
            } => {
                if self.group(broker_name).is_some() {
                    if let Some(s) = self.sync_state_set_info_table.get_mut(broker_name) {
                        s.sync_state_set = new_sync_state_set.clone();
                        s.sync_state_set_epoch += 1;
                    }
                }
            }
            Event::ApplyBrokerId {
                cluster_name,
                broker_name,
                broker_address,
                new_broker_id,
                register_check_code,
            } => self.apply_broker_id_event(
                cluster_name,
                broker_name,
                broker_address,
                *new_broker_id,
                register_check_code,
            ),
            Event::ElectMaster {
                broker_name,
                new_master,
            } => {
                if self.group(broker_name).is_none() {
                    tracing::error!(broker_name, "elect-master event for an unregistered group");
                    return;
                }
                if let Some(s) = self.sync_state_set_info_table.get_mut(broker_name) {
                    s.master_broker_id = *new_master;
                    s.master_epoch += 1;
                    if let Some(m) = new_master {
                        s.sync_state_set = [*m].into();
                        s.sync_state_set_epoch += 1;
                    }
                }
            }
            Event::CleanBrokerData {
                broker_name,
                broker_ids,
            } => self.clean_event(broker_name, broker_ids.as_ref()),
            Event::UpdateBrokerAddress {
                broker_name,
                broker_address,
                broker_id,
            } => {
                if let Some(i) = self
                    .replica_info_table
                    .get_mut(broker_name)
                    .and_then(|r| r.broker_id_info.get_mut(broker_id))
                {
                    i.address = broker_address.clone();
                }
            }
        }
    }

    fn apply_broker_id_event(
        &mut self,
        cluster_name: &str,
        broker_name: &str,
        address: &str,
        id: i64,
        register_check_code: &str,
    ) {
        let info = BrokerIdInfo {
            address: address.to_owned(),
            register_check_code: register_check_code.to_owned(),
        };
        if self.group(broker_name).is_some() {
            if let Some(r) = self.replica_info_table.get_mut(broker_name) {
                if let std::collections::btree_map::Entry::Vacant(v) = r.broker_id_info.entry(id) {
                    v.insert(info);
                    r.next_assign_broker_id += 1;
                }
            }
            return;
        }
        let replicas = BrokerReplicaInfo {
            cluster_name: cluster_name.to_owned(),
            broker_name: broker_name.to_owned(),
            next_assign_broker_id: FIRST_BROKER_CONTROLLER_ID + 1,
            broker_id_info: [(id, info)].into(),
        };
        self.replica_info_table
            .insert(broker_name.to_owned(), replicas);
        let sync = SyncStateInfo {
            cluster_name: cluster_name.to_owned(),
            broker_name: broker_name.to_owned(),
            master_broker_id: None,
            master_epoch: 0,
            sync_state_set_epoch: 0,
            sync_state_set: BTreeSet::new(),
        };
        self.sync_state_set_info_table
            .insert(broker_name.to_owned(), sync);
    }

    fn clean_event(&mut self, broker_name: &str, ids: Option<&BTreeSet<i64>>) {
        let Some(ids) = ids.filter(|s| !s.is_empty()) else {
            self.replica_info_table.remove(broker_name);
            self.sync_state_set_info_table.remove(broker_name);
            return;
        };
        if self.group(broker_name).is_none() {
            return;
        }
        if let Some(r) = self.replica_info_table.get_mut(broker_name) {
            for id in ids {
                r.broker_id_info.remove(id);
            }
            if r.broker_id_info.is_empty() {
                self.replica_info_table.remove(broker_name);
            }
        }
        if let Some(s) = self.sync_state_set_info_table.get_mut(broker_name) {
            for id in ids {
                s.sync_state_set.remove(id);
            }
            if s.sync_state_set.is_empty() {
                self.sync_state_set_info_table.remove(broker_name);
            }
        }
    }
}
