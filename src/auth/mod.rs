//! Access control: who a request comes from and whether it may do what it asks. `signature`
//! checks RocketMQ's request signature.

pub mod signature;
