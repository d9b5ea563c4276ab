//! A slave's copy of its master's metadata (Java's `SlaveSynchronize`). Shard 0 of a SLAVE asks
//! the master's remoting port every [`PERIOD`] for its topic configs (GET_ALL_TOPIC_CONFIG 21),
//! consumer offsets (GET_ALL_CONSUMER_OFFSET 43), delay-level progress (GET_ALL_DELAY_OFFSET 45)
//! and subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201), and makes them the slave's.
//! The master is the `masterAddr` the name servers answer the slave's registration with
//! (`register::MasterAddr`). This module owns only the connection to the master and what it has
//! logged; the tables stay with their owners: topics and groups with shard 0's metadata, offsets
//! and delay progress with their owner shards (`offsets::mirror`, `schedule::mirror`).
//!
//! As Java: topics and groups are replaced only when the master's `dataVersion` differs from
//! the slave's (the slave then keeps the master's version); offsets and delay progress carry
//! no version ringmq keeps and are applied on every round. A table the master does not give,
//! or gives unreadable, leaves the slave's as it was; each table is applied on its own.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::auth::signature::sign_request;
use crate::config::auth::Credentials;
use crate::constants::BROKER_RPC_TIMEOUT;
use crate::protocol::body::{
    self, ConsumerOffsetSerializeWrapper, DelayOffsetSerializeWrapper, SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
};
use crate::protocol::codes::{request_code as req, response_code as rc};
use crate::protocol::RemotingCommand;
use crate::register::MasterAddr;
use crate::remoting::client::Client;
use crate::runtime;
use crate::shard::Shard;
use crate::topic_manager::{persist_in_background, topics_changed};
use crate::{offsets, schedule};

/// How often the slave copies its master's metadata: Java's slave timer runs every 3 s (Java's
/// classic mode then skips rounds within 60 s of the last; ringmq copies on every round, which
/// costs four small requests).
pub const PERIOD: Duration = Duration::from_secs(3);

/// Shard 0 of a slave: copies the master's tables every [`PERIOD`] while the broker runs.
pub async fn run(s0: Rc<Shard>, master: MasterAddr) {
    let mut client: Option<Client> = None;
    let mut connected_to: Option<SocketAddr> = None;
    // The last problem logged at WARN: a master that stays away is logged once, not every round.
    let mut last_problem: Option<String> = None;
    while !s0.is_stopping() {
        runtime::sleep(PERIOD).await;
        if s0.is_stopping() {
            return;
        }
        let Some(addr) = master.get() else {
            continue;
        };
        if addr == s0.ctx.store_host || !s0.ctx.role.is_slave() {
            continue;
        }
        if connected_to != Some(addr) {
            client = None;
            connected_to = Some(addr);
        }
        let problems = sync_all(&s0, addr, &mut client).await;
        if problems.is_empty() {
            if last_problem.take().is_some() {
                tracing::info!(master = %addr, "copying the master's metadata again");
            }
            continue;
        }
        let text = problems.join("; ");
        if last_problem.as_deref() != Some(text.as_str()) {
            tracing::warn!(master = %addr, problems = %text, "cannot copy the master's metadata; keeping the slave's");
        } else {
            tracing::debug!(master = %addr, problems = %text, "cannot copy the master's metadata");
        }
        last_problem = Some(text);
    }
}

/// One round: the four tables, each applied when the master gave it readably. Returns what
/// went wrong, one line per table. A lost connection ends the round (the next one connects
/// again), so a master that does not answer costs one timeout per round, not four.
async fn sync_all(s0: &Rc<Shard>, addr: SocketAddr, client: &mut Option<Client>) -> Vec<String> {
    if client.is_none() {
        // tls.enable: the master's remoting port is reached as the name servers are.
        match Client::connect_with(addr, BROKER_RPC_TIMEOUT, &s0.ctx.tls).await {
            Ok(c) => *client = Some(c),
            Err(e) => return vec![format!("connect: {e}")],
        }
    }
    let mut problems = Vec::new();
    let creds = s0.ctx.cfg.auth.inner_client_credentials.as_ref();
    match fetch::<TopicConfigSerializeWrapper>(client, addr, req::GET_ALL_TOPIC_CONFIG, creds).await
    {
        // A master always has its own system topics: an empty table is not a master's answer.
        Ok(w) if w.topic_config_table.is_empty() => {
            problems.push("topic configs: the master answered no topics".to_string())
        }
        Ok(w) => apply_topics(s0, w),
        Err(e) => problems.push(format!("topic configs: {e}")),
    }
    if client.is_none() {
        return problems;
    }
    match fetch::<ConsumerOffsetSerializeWrapper>(client, addr, req::GET_ALL_CONSUMER_OFFSET, creds)
        .await
    {
        Ok(w) => offsets::mirror(s0, w.offset_table).await,
        Err(e) => problems.push(format!("consumer offsets: {e}")),
    }
    if client.is_none() {
        return problems;
    }
    match fetch::<DelayOffsetSerializeWrapper>(client, addr, req::GET_ALL_DELAY_OFFSET, creds).await
    {
        Ok(w) => schedule::mirror(s0, w.offset_table).await,
        Err(e) => problems.push(format!("delay offsets: {e}")),
    }
    if client.is_none() {
        return problems;
    }
    match fetch::<SubscriptionGroupWrapper>(
        client,
        addr,
        req::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        creds,
    )
    .await
    {
        Ok(w) => apply_groups(s0, w),
        Err(e) => problems.push(format!("subscription groups: {e}")),
    }
    problems
}

/// Asks the master for one table, signed with `innerClientAuthenticationCredentials` when
/// they are set; a failed connection is dropped, to be made again next time.
async fn fetch<T: serde::de::DeserializeOwned>(
    client: &mut Option<Client>,
    addr: SocketAddr,
    code: i32,
    creds: Option<&Credentials>,
) -> Result<T, String> {
    let mut request = RemotingCommand::new_request(code);
    if let Some(c) = creds {
        sign_request(&mut request, &c.name, &c.secret).map_err(|e| e.to_string())?;
    }
    let Some(c) = client.as_mut() else {
        return Err(format!("not connected to {addr}"));
    };
    let resp = match c.invoke(request, BROKER_RPC_TIMEOUT).await {
        Ok(r) => r,
        Err(e) => {
            *client = None;
            return Err(e.to_string());
        }
    };
    if resp.code != rc::SUCCESS {
        return Err(format!(
            "the master answered {}: {}",
            resp.code,
            resp.remark.unwrap_or_default()
        ));
    }
    body::from_json(&resp.body).map_err(|e| e.to_string())
}

/// The master's topic table replaces the slave's when its version differs: published to every
/// shard, persisted to topics.json and registered with the name servers (`topics_changed`).
fn apply_topics(s0: &Rc<Shard>, w: TopicConfigSerializeWrapper) {
    let changed = {
        let mut m = s0.meta_mut();
        if m.topics_version == w.data_version {
            false
        } else {
            m.topics = w.topic_config_table;
            m.topics_version = w.data_version;
            true
        }
    };
    if changed {
        tracing::info!(
            topics = s0.meta().topics.len(),
            "topic configs copied from the master"
        );
        topics_changed(s0);
    }
}

/// The master's subscription groups replace the slave's when their version differs, persisted
/// to subscriptionGroup.json.
fn apply_groups(s0: &Rc<Shard>, w: SubscriptionGroupWrapper) {
    let file = {
        let mut m = s0.meta_mut();
        if m.groups_version == w.data_version {
            None
        } else {
            m.groups = w.subscription_group_table;
            m.groups_version = w.data_version;
            Some((m.groups_path(), m.groups_file_bytes()))
        }
    };
    if let Some((path, bytes)) = file {
        tracing::info!("subscription groups copied from the master");
        persist_in_background(path, bytes);
    }
}
