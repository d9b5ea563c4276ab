//! Pure codec for RocketMQ's remoting protocol and stored-message records; no I/O here.

pub mod message;
