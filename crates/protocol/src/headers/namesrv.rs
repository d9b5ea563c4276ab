//! Name-server headers: broker registration, routes, KV config.
//! The broker uses `write_to` on the request headers when it registers itself.

use super::ext_header;

ext_header! {
    pub struct RegisterBrokerRequestHeader {
        pub broker_name: String => "brokerName",
        pub broker_addr: String => "brokerAddr",
        pub cluster_name: String => "clusterName",
        pub ha_server_addr: String => "haServerAddr",
        /// 0 = master.
        pub broker_id: i64 => "brokerId",
        pub heartbeat_timeout_millis: Option<i64> => "heartbeatTimeoutMillis",
        /// Body is the zlib form of RegisterBrokerBody when true.
        pub compressed: bool => "compressed",
        /// CRC32 of the body; 0 = not checked.
        pub body_crc32: i32 => "bodyCrc32" or 0,
    }
}

ext_header! {
    /// Filled for slaves: where the master and its HA port are.
    pub struct RegisterBrokerResponseHeader {
        pub ha_server_addr: Option<String> => "haServerAddr",
        pub master_addr: Option<String> => "masterAddr",
    }
}

ext_header! {
    pub struct UnregisterBrokerRequestHeader {
        pub broker_name: String => "brokerName",
        pub broker_addr: String => "brokerAddr",
        pub cluster_name: String => "clusterName",
        pub broker_id: i64 => "brokerId",
    }
}

ext_header! {
    pub struct GetRouteInfoRequestHeader {
        pub topic: String => "topic",
        /// Quote numeric map keys regardless of the client version.
        pub accept_standard_json_only: bool => "acceptStandardJsonOnly",
    }
}

ext_header! {
    pub struct QueryDataVersionRequestHeader {
        pub broker_name: String => "brokerName",
        pub broker_addr: String => "brokerAddr",
        pub cluster_name: String => "clusterName",
        pub broker_id: i64 => "brokerId",
    }
}

ext_header! {
    pub struct QueryDataVersionResponseHeader {
        pub changed: bool => "changed",
    }
}

ext_header! {
    pub struct BrokerHeartbeatRequestHeader {
        pub cluster_name: String => "clusterName",
        pub broker_addr: String => "brokerAddr",
        pub broker_name: String => "brokerName",
        pub broker_id: Option<i64> => "brokerId",
        pub epoch: Option<i32> => "epoch",
        pub max_offset: Option<i64> => "maxOffset",
        pub confirm_offset: Option<i64> => "confirmOffset",
        pub heartbeat_timeout_mills: Option<i64> => "heartbeatTimeoutMills",
        pub election_priority: Option<i32> => "electionPriority",
    }
}

ext_header! {
    pub struct PutKvConfigRequestHeader {
        pub namespace: String => "namespace",
        pub key: String => "key",
        pub value: String => "value",
    }
}

ext_header! {
    pub struct GetKvConfigRequestHeader {
        pub namespace: String => "namespace",
        pub key: String => "key",
    }
}

ext_header! {
    pub struct GetKvConfigResponseHeader {
        pub value: Option<String> => "value",
    }
}

ext_header! {
    pub struct DeleteKvConfigRequestHeader {
        pub namespace: String => "namespace",
        pub key: String => "key",
    }
}

ext_header! {
    pub struct GetKvListByNamespaceRequestHeader {
        pub namespace: String => "namespace",
    }
}

ext_header! {
    /// REGISTER_TOPIC_IN_NAMESRV (217); the body is a TopicRouteData.
    pub struct RegisterTopicRequestHeader {
        pub topic: String => "topic",
    }
}

ext_header! {
    /// DELETE_TOPIC_IN_NAMESRV (216).
    pub struct DeleteTopicFromNamesrvRequestHeader {
        pub topic: String => "topic",
        pub cluster_name: Option<String> => "clusterName",
    }
}

ext_header! {
    /// WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327).
    pub struct WipeWritePermOfBrokerRequestHeader {
        pub broker_name: String => "brokerName",
    }
}

ext_header! {
    /// WIPE_WRITE_PERM_OF_BROKER's answer: how many topics lost their write permission.
    pub struct WipeWritePermOfBrokerResponseHeader {
        pub wipe_topic_count: i32 => "wipeTopicCount",
    }
}

ext_header! {
    /// ADD_WRITE_PERM_OF_BROKER's answer: how many topics became readable and writable.
    pub struct AddWritePermOfBrokerResponseHeader {
        pub add_topic_count: i32 => "addTopicCount",
    }
}
