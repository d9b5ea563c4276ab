//! Access control: who a request comes from and whether it may do what it asks. `signature`
//! checks RocketMQ's request signature; `model` is ACL 2.0's users and ACLs; `authorize` is
//! the decision over them; `request` says what a request touches; `plain_acl` reads ACL 1.0's
//! `plain_acl.yml` into that model; `table` checks one request against all of it.

// The lower crates, under the names this crate's modules use for them.
use ringmq_protocol as protocol;
use ringmq_protocol::common;

pub mod authorize;
pub mod bodies;
pub mod metadata;
pub mod model;
pub mod plain_acl;
pub mod request;
pub mod signature;
pub mod table;
