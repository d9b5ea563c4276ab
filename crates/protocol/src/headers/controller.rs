//! The controller's headers (RocketMQ 5's `protocol.header.controller` classes and
//! `NotifyBrokerRoleChangedRequestHeader`): what a broker in controller mode and an admin tool
//! send a controller, what it answers, and the role change it pushes to a broker. The broker's
//! heartbeat to a controller is the name server's `BrokerHeartbeatRequestHeader`.

use super::ext_header;

ext_header! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET (1001); the body is the proposed `SyncStateSet`.
    pub struct AlterSyncStateSetRequestHeader {
        pub broker_name: String => "brokerName",
        pub master_broker_id: i64 => "masterBrokerId",
        pub master_epoch: i32 => "masterEpoch",
        pub invoke_time: Option<i64> => "invokeTime",
    }
}

ext_header! {
    pub struct AlterSyncStateSetResponseHeader {
        pub new_sync_state_set_epoch: i32 => "newSyncStateSetEpoch",
    }
}

ext_header! {
    /// CONTROLLER_ELECT_MASTER (1002): `brokerId` -1 and `designateElect` false let the
    /// controller choose.
    pub struct ElectMasterRequestHeader {
        pub cluster_name: String => "clusterName",
        pub broker_name: String => "brokerName",
        pub broker_id: i64 => "brokerId",
        pub designate_elect: Option<bool> => "designateElect",
        pub invoke_time: Option<i64> => "invokeTime",
    }
}

ext_header! {
    pub struct ElectMasterResponseHeader {
        pub master_broker_id: Option<i64> => "masterBrokerId",
        pub master_address: Option<String> => "masterAddress",
        pub master_epoch: Option<i32> => "masterEpoch",
        pub sync_state_set_epoch: Option<i32> => "syncStateSetEpoch",
    }
}

ext_header! {
    /// CONTROLLER_REGISTER_BROKER (1003).
    pub struct RegisterBrokerToControllerRequestHeader {
        pub cluster_name: String => "clusterName",
        pub broker_name: String => "brokerName",
        pub broker_id: i64 => "brokerId",
        pub broker_address: String => "brokerAddress",
        pub invoke_time: Option<i64> => "invokeTime",
    }
}

ext_header! {
    pub struct RegisterBrokerToControllerResponseHeader {
        pub cluster_name: Option<String> => "clusterName",
        pub broker_name: Option<String> => "brokerName",
        pub master_broker_id: Option<i64> => "masterBrokerId",
        pub master_address: Option<String> => "masterAddress",
        pub master_epoch: Option<i32> => "masterEpoch",
        pub sync_state_set_epoch: Option<i32> => "syncStateSetEpoch",
    }
}

ext_header! {
    /// CONTROLLER_GET_REPLICA_INFO (1004).
    pub struct GetReplicaInfoRequestHeader {
        pub broker_name: String => "brokerName",
    }
}

ext_header! {
    /// The answer's body is the group's `SyncStateSet`.
    pub struct GetReplicaInfoResponseHeader {
        pub master_broker_id: Option<i64> => "masterBrokerId",
        pub master_address: Option<String> => "masterAddress",
        pub master_epoch: Option<i32> => "masterEpoch",
    }
}

ext_header! {
    /// CONTROLLER_GET_METADATA_INFO (1005)'s answer: the Raft group, who leads it and where,
    /// and the peers as `id-host:port` joined by `;`.
    pub struct GetMetaDataResponseHeader {
        pub group: Option<String> => "group",
        pub controller_leader_id: Option<String> => "controllerLeaderId",
        pub controller_leader_address: Option<String> => "controllerLeaderAddress",
        pub is_leader: bool => "isLeader",
        pub peers: Option<String> => "peers",
    }
}

ext_header! {
    /// NOTIFY_BROKER_ROLE_CHANGED (1008), controller to broker; the body is the `SyncStateSet`.
    pub struct NotifyBrokerRoleChangedRequestHeader {
        pub master_address: Option<String> => "masterAddress",
        pub master_epoch: Option<i32> => "masterEpoch",
        pub sync_state_set_epoch: Option<i32> => "syncStateSetEpoch",
        pub master_broker_id: Option<i64> => "masterBrokerId",
    }
}

ext_header! {
    /// CLEAN_BROKER_DATA (1011): `brokerControllerIdsToClean` is `;`-separated ids; none
    /// means the whole group.
    pub struct CleanControllerBrokerDataRequestHeader {
        pub cluster_name: Option<String> => "clusterName",
        pub broker_name: String => "brokerName",
        pub broker_controller_ids_to_clean: Option<String> => "brokerControllerIdsToClean",
        pub is_clean_living_broker: bool => "isCleanLivingBroker",
        pub invoke_time: Option<i64> => "invokeTime",
    }
}

ext_header! {
    /// CONTROLLER_GET_NEXT_BROKER_ID (1012).
    pub struct GetNextBrokerIdRequestHeader {
        pub cluster_name: String => "clusterName",
        pub broker_name: String => "brokerName",
    }
}

ext_header! {
    pub struct GetNextBrokerIdResponseHeader {
        pub cluster_name: Option<String> => "clusterName",
        pub broker_name: Option<String> => "brokerName",
        pub next_broker_id: Option<i64> => "nextBrokerId",
    }
}

ext_header! {
    /// CONTROLLER_APPLY_BROKER_ID (1013): `registerCheckCode` is `address;millis`, which lets a
    /// broker that restarts before writing its identity file claim its id again.
    pub struct ApplyBrokerIdRequestHeader {
        pub cluster_name: String => "clusterName",
        pub broker_name: String => "brokerName",
        pub applied_broker_id: i64 => "appliedBrokerId",
        pub register_check_code: String => "registerCheckCode",
    }
}

ext_header! {
    pub struct ApplyBrokerIdResponseHeader {
        pub cluster_name: Option<String> => "clusterName",
        pub broker_name: Option<String> => "brokerName",
    }
}
