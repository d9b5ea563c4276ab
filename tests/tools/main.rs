//! `ringmq admin` and the web console (its JSON API, and its pages in Chromium) against live
//! brokers.
//!
//! One test binary of several files (each a module below), so the suite links the broker once
//! per group instead of once per file.

#[path = "../common/mod.rs"]
mod common;
#[path = "../raw_support/mod.rs"]
mod raw_support;

mod admin_cli;
mod api;
mod auth;
mod browser;
mod codes;
mod messages;
