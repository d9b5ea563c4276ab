//! Request codes, response codes, language codes and the version we announce.
//!
//! Values are RocketMQ's `RequestCode`, `ResponseCode`/`RemotingSysResponseCode` and
//! `LanguageCode`, plus `MQVersion`. Used by every handler and by
//! `command` to turn the JSON language name into the wire byte and back.

/// Declares a module of `i32` code constants and, in it, `NAMES`: each code with its Java
/// constant's name, in declaration order (ascending, as a unit test checks). This is the one list
/// of codes: metric labels and error texts read names from it, never from a copy.
macro_rules! code_table {
    ($(#[$doc:meta])* pub mod $module:ident { $($name:ident = $value:literal,)* }) => {
        $(#[$doc])*
        pub mod $module {
            $(pub const $name: i32 = $value;)*

            /// Every code of this module with its Java name, ascending by code.
            pub const NAMES: &[(i32, &str)] = &[$(($value, stringify!($name)),)*];

            /// The Java name of `code`, None for a code ringmq does not know.
            pub fn name(code: i32) -> Option<&'static str> {
                NAMES
                    .binary_search_by_key(&code, |e| e.0)
                    .ok()
                    .map(|i| NAMES[i].1)
            }
        }
    };
}

/// `MQVersion.Version.V5_3_3.ordinal()`: the version we put into commands we emit.
pub const CURRENT_VERSION: i32 = 479;

code_table! {
    /// Request codes (client to server, and broker to client for 39/40/220/221/307/309/326).
    pub mod request_code {
        SEND_MESSAGE = 10,
        PULL_MESSAGE = 11,
        QUERY_MESSAGE = 12,
        QUERY_BROKER_OFFSET = 13,
        QUERY_CONSUMER_OFFSET = 14,
        UPDATE_CONSUMER_OFFSET = 15,
        UPDATE_AND_CREATE_TOPIC = 17,
        UPDATE_AND_CREATE_TOPIC_LIST = 18,
        GET_ALL_TOPIC_CONFIG = 21,
        GET_TOPIC_CONFIG_LIST = 22,
        GET_TOPIC_NAME_LIST = 23,
        UPDATE_BROKER_CONFIG = 25,
        GET_BROKER_CONFIG = 26,
        TRIGGER_DELETE_FILES = 27,
        GET_BROKER_RUNTIME_INFO = 28,
        SEARCH_OFFSET_BY_TIMESTAMP = 29,
        GET_MAX_OFFSET = 30,
        GET_MIN_OFFSET = 31,
        GET_EARLIEST_MSG_STORETIME = 32,
        VIEW_MESSAGE_BY_ID = 33,
        HEART_BEAT = 34,
        UNREGISTER_CLIENT = 35,
        CONSUMER_SEND_MSG_BACK = 36,
        END_TRANSACTION = 37,
        GET_CONSUMER_LIST_BY_GROUP = 38,
        CHECK_TRANSACTION_STATE = 39,
        NOTIFY_CONSUMER_IDS_CHANGED = 40,
        LOCK_BATCH_MQ = 41,
        UNLOCK_BATCH_MQ = 42,
        GET_ALL_CONSUMER_OFFSET = 43,
        GET_ALL_DELAY_OFFSET = 45,
        CHECK_CLIENT_CONFIG = 46,
        GET_TIMER_CHECK_POINT = 60,
        GET_TIMER_METRICS = 61,
        PUT_KV_CONFIG = 100,
        GET_KV_CONFIG = 101,
        DELETE_KV_CONFIG = 102,
        REGISTER_BROKER = 103,
        UNREGISTER_BROKER = 104,
        GET_ROUTEINFO_BY_TOPIC = 105,
        GET_BROKER_CLUSTER_INFO = 106,
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200,
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201,
        GET_TOPIC_STATS_INFO = 202,
        GET_CONSUMER_CONNECTION_LIST = 203,
        GET_PRODUCER_CONNECTION_LIST = 204,
        WIPE_WRITE_PERM_OF_BROKER = 205,
        GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206,
        DELETE_SUBSCRIPTIONGROUP = 207,
        GET_CONSUME_STATS = 208,
        DELETE_TOPIC_IN_BROKER = 215,
        DELETE_TOPIC_IN_NAMESRV = 216,
        REGISTER_TOPIC_IN_NAMESRV = 217,
        GET_KVLIST_BY_NAMESPACE = 219,
        RESET_CONSUMER_CLIENT_OFFSET = 220,
        GET_CONSUMER_STATUS_FROM_CLIENT = 221,
        INVOKE_BROKER_TO_RESET_OFFSET = 222,
        INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223,
        GET_TOPICS_BY_CLUSTER = 224,
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST = 225,
        QUERY_TOPIC_CONSUME_BY_WHO = 300,
        QUERY_CONSUME_TIME_SPAN = 303,
        GET_SYSTEM_TOPIC_LIST_FROM_NS = 304,
        GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305,
        CLEAN_EXPIRED_CONSUMEQUEUE = 306,
        GET_CONSUMER_RUNNING_INFO = 307,
        QUERY_CORRECTION_OFFSET = 308,
        CONSUME_MESSAGE_DIRECTLY = 309,
        SEND_MESSAGE_V2 = 310,
        CLONE_GROUP_OFFSET = 314,
        VIEW_BROKER_STATS_DATA = 315,
        CLEAN_UNUSED_TOPIC = 316,
        GET_BROKER_CONSUME_STATS = 317,
        UPDATE_NAMESRV_CONFIG = 318,
        GET_NAMESRV_CONFIG = 319,
        SEND_BATCH_MESSAGE = 320,
        QUERY_CONSUME_QUEUE = 321,
        QUERY_DATA_VERSION = 322,
        SEND_REPLY_MESSAGE = 324,
        SEND_REPLY_MESSAGE_V2 = 325,
        PUSH_REPLY_MESSAGE_TO_CLIENT = 326,
        ADD_WRITE_PERM_OF_BROKER = 327,
        GET_ALL_PRODUCER_INFO = 328,
        DELETE_EXPIRED_COMMITLOG = 329,
        QUERY_TOPICS_BY_CONSUMER = 343,
        QUERY_SUBSCRIPTION_BY_CONSUMER = 345,
        GET_TOPIC_CONFIG = 351,
        GET_SUBSCRIPTIONGROUP_CONFIG = 352,
        LITE_PULL_MESSAGE = 361,
        RECALL_MESSAGE = 370,
        QUERY_ASSIGNMENT = 400,
        SET_MESSAGE_REQUEST_MODE = 401,
        GET_ALL_MESSAGE_REQUEST_MODE = 402,
        BROKER_HEARTBEAT = 904,
        GET_BROKER_HA_STATUS = 907,
        CONTROLLER_ALTER_SYNC_STATE_SET = 1001,
        CONTROLLER_ELECT_MASTER = 1002,
        CONTROLLER_REGISTER_BROKER = 1003,
        CONTROLLER_GET_REPLICA_INFO = 1004,
        CONTROLLER_GET_METADATA_INFO = 1005,
        CONTROLLER_GET_SYNC_STATE_DATA = 1006,
        GET_BROKER_EPOCH_CACHE = 1007,
        NOTIFY_BROKER_ROLE_CHANGED = 1008,
        UPDATE_CONTROLLER_CONFIG = 1009,
        GET_CONTROLLER_CONFIG = 1010,
        CLEAN_BROKER_DATA = 1011,
        CONTROLLER_GET_NEXT_BROKER_ID = 1012,
        CONTROLLER_APPLY_BROKER_ID = 1013,
        AUTH_CREATE_USER = 3001,
        AUTH_UPDATE_USER = 3002,
        AUTH_DELETE_USER = 3003,
        AUTH_GET_USER = 3004,
        AUTH_LIST_USER = 3005,
        AUTH_CREATE_ACL = 3006,
        AUTH_UPDATE_ACL = 3007,
        AUTH_DELETE_ACL = 3008,
        AUTH_GET_ACL = 3009,
        AUTH_LIST_ACL = 3010,
        POP_MESSAGE = 200050,
        ACK_MESSAGE = 200051,
        PEEK_MESSAGE = 200052,
        CHANGE_MESSAGE_INVISIBLETIME = 200053,
        NOTIFICATION = 200054,
        POLLING_INFO = 200055,
        POP_ROLLBACK = 200056,
        BATCH_ACK_MESSAGE = 200151,
    }
}

code_table! {
    /// Response codes: the system codes 0-4 plus `ResponseCode`.
    pub mod response_code {
        SUCCESS = 0,
        SYSTEM_ERROR = 1,
        SYSTEM_BUSY = 2,
        REQUEST_CODE_NOT_SUPPORTED = 3,
        TRANSACTION_FAILED = 4,
        FLUSH_DISK_TIMEOUT = 10,
        SLAVE_NOT_AVAILABLE = 11,
        FLUSH_SLAVE_TIMEOUT = 12,
        MESSAGE_ILLEGAL = 13,
        SERVICE_NOT_AVAILABLE = 14,
        VERSION_NOT_SUPPORTED = 15,
        NO_PERMISSION = 16,
        TOPIC_NOT_EXIST = 17,
        TOPIC_EXIST_ALREADY = 18,
        PULL_NOT_FOUND = 19,
        PULL_RETRY_IMMEDIATELY = 20,
        PULL_OFFSET_MOVED = 21,
        QUERY_NOT_FOUND = 22,
        SUBSCRIPTION_PARSE_FAILED = 23,
        SUBSCRIPTION_NOT_EXIST = 24,
        SUBSCRIPTION_NOT_LATEST = 25,
        SUBSCRIPTION_GROUP_NOT_EXIST = 26,
        FILTER_DATA_NOT_EXIST = 27,
        FILTER_DATA_NOT_LATEST = 28,
        INVALID_PARAMETER = 29,
        TRANSACTION_SHOULD_COMMIT = 200,
        TRANSACTION_SHOULD_ROLLBACK = 201,
        TRANSACTION_STATE_UNKNOW = 202,
        TRANSACTION_STATE_GROUP_WRONG = 203,
        NO_BUYER_ID = 204,
        NOT_IN_CURRENT_UNIT = 205,
        CONSUMER_NOT_ONLINE = 206,
        CONSUME_MSG_TIMEOUT = 207,
        NO_MESSAGE = 208,
        POLLING_FULL = 209,
        POLLING_TIMEOUT = 210,
        BROKER_NOT_EXIST = 211,
        BROKER_DISPATCH_NOT_COMPLETE = 212,
        BROADCAST_CONSUMPTION = 213,
        FLOW_CONTROL = 215,
        NOT_LEADER_FOR_QUEUE = 501,
        ILLEGAL_OPERATION = 604,
        GO_AWAY = 1500,
        CONTROLLER_FENCED_MASTER_EPOCH = 2000,
        CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001,
        CONTROLLER_INVALID_MASTER = 2002,
        CONTROLLER_INVALID_REPLICAS = 2003,
        CONTROLLER_MASTER_NOT_AVAILABLE = 2004,
        CONTROLLER_INVALID_REQUEST = 2005,
        CONTROLLER_BROKER_NOT_ALIVE = 2006,
        CONTROLLER_NOT_LEADER = 2007,
        CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008,
        CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009,
        CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010,
        CONTROLLER_MASTER_STILL_EXIST = 2011,
        CONTROLLER_ELECT_MASTER_FAILED = 2012,
        CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013,
        CONTROLLER_BROKER_ID_INVALID = 2014,
        CONTROLLER_JRAFT_INTERNAL_ERROR = 2015,
        CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016,
        USER_NOT_EXIST = 3001,
        POLICY_NOT_EXIST = 3002,
    }
}

/// `LanguageCode` names indexed by their wire byte (JSON headers carry the name).
pub const LANGUAGE_NAMES: [&str; 14] = [
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
    "OMS", "RUST", "NODE_JS",
];

/// `LanguageCode.JAVA`: what we announce, since old fastjson clients know no newer names.
pub const LANGUAGE_JAVA: u8 = 0;
/// `LanguageCode.OTHER`: where unknown names land.
pub const LANGUAGE_OTHER: u8 = 7;

/// Wire byte for a language name; unknown names map to OTHER rather than failing the command.
pub fn language_code(name: &str) -> u8 {
    LANGUAGE_NAMES
        .iter()
        .position(|n| *n == name)
        .map_or(LANGUAGE_OTHER, |i| i as u8)
}

/// Name for a wire byte; bytes past the table map to "OTHER".
pub fn language_name(code: u8) -> &'static str {
    LANGUAGE_NAMES
        .get(code as usize)
        .copied()
        .unwrap_or(LANGUAGE_NAMES[LANGUAGE_OTHER as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The language table round-trips and matches Java's `LanguageCode` byte codes.
    #[test]
    fn language_names_round_trip() {
        for (i, n) in LANGUAGE_NAMES.iter().enumerate() {
            assert_eq!(language_code(n), i as u8);
            assert_eq!(language_name(i as u8), *n);
        }
        assert_eq!(language_code("RUST"), 12);
        assert_eq!(language_code("NODE_JS"), 13);
        assert_eq!(language_code("COBOL"), LANGUAGE_OTHER);
        assert_eq!(language_name(200), "OTHER");
    }

    /// Each table is strictly ascending (so `name` finds every code) and names Java's constants.
    #[test]
    fn code_tables_are_sorted_and_named() {
        for names in [request_code::NAMES, response_code::NAMES] {
            assert!(names.windows(2).all(|w| w[0].0 < w[1].0), "{names:?}");
            for (code, name) in names {
                assert_eq!(
                    names.iter().find(|e| e.0 == *code).map(|e| e.1),
                    Some(*name)
                );
            }
        }
        assert_eq!(request_code::name(310), Some("SEND_MESSAGE_V2"));
        assert_eq!(response_code::name(19), Some("PULL_NOT_FOUND"));
        assert_eq!(request_code::name(-7), None);
        assert!(request_code::NAMES.len() > 100);
    }
}
