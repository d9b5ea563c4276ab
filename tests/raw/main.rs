//! Protocol-level tests: hand-built RemotingCommands over sockets to broker and name-server
//! processes. scripts/test.sh runs this binary a second time with every broker under SYNC_FLUSH.
//!
//! One test binary of several files (each a module below), so the suite links the broker once
//! per group instead of once per file.

#[path = "../raw_support/mod.rs"]
mod raw_support;

mod acl;
mod admin_auth;
mod admin_config;
mod admin_groups;
mod admin_namesrv;
mod admin_store;
mod bad_input;
mod broker_stats;
mod broker_to_client;
mod compat;
mod delay_retry_query;
mod ha_join;
mod ha_master;
mod ha_slave;
mod ha_sync;
mod multi_shard;
mod pop;
mod pop_crash;
mod reply_after_unit;
mod retention;
mod send_pull;
mod slave_read;
mod slave_role;
mod slave_sync;
mod sql92_filter;
mod thread_placement;
mod transaction;
