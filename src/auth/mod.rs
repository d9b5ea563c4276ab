//! Access control: who a request comes from and whether it may do what it asks. `signature`
//! checks RocketMQ's request signature; `model` is ACL 2.0's users and ACLs; `authorize` is
//! the decision over them; `request` says what a request touches.

pub mod authorize;
pub mod model;
pub mod request;
pub mod signature;
