//! Registration with the name servers (REGISTER_BROKER every `registerNameServerPeriod`, at once
//! after start and after any topic change; UNREGISTER_BROKER on clean shutdown). Runs on shard 0,
//! which owns the topic table it announces.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::constants::BROKER_RPC_TIMEOUT;
use crate::long_poll::Waiter;
use crate::metadata::topic_validator;
use crate::protocol::body::{self, RegisterBrokerBody, TopicConfigSerializeWrapper};
use crate::protocol::codes::{request_code, response_code as rc};
use crate::protocol::headers::{
    RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader,
};
use crate::protocol::RemotingCommand;
use crate::remoting::client::Client;
use crate::runtime;
use crate::shard::Shard;

thread_local! {
    /// Shard 0's "register now" signal; replaced after each wake-up.
    static SIGNAL: RefCell<Rc<Waiter>> = RefCell::new(Waiter::new());
}

/// Asks the registration task to register as soon as it can.
pub fn register_soon(_s0: &Rc<Shard>) {
    SIGNAL.with(|s| s.borrow().notify());
}

fn broker_addr(s0: &Shard) -> String {
    s0.ctx.store_host.to_string()
}

fn register_command(s0: &Shard) -> RemotingCommand {
    let (table, version) = {
        let m = s0.meta();
        (
            m.topics
                .iter()
                .filter(|(k, _)| !topic_validator::is_hidden_from_routes(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            m.topics_version.clone(),
        )
    };
    let body = body::to_json(&RegisterBrokerBody {
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            topic_config_table: table,
            data_version: version,
        },
        filter_server_list: Vec::new(),
    });
    let cfg = &s0.ctx.cfg;
    // Java's getHAServerAddr: brokerIP2 (brokerIP1 when unset) and the HA port.
    let ha_port = match s0.ctx.ha_addr {
        Some(a) => a.port(),
        None => cfg.ha.ha_port(s0.ctx.store_host.port()),
    };
    let ha =
        std::net::SocketAddr::new(cfg.ha.broker_ip2.unwrap_or(s0.ctx.store_host.ip()), ha_port);
    let mut cmd = RemotingCommand::new_request(request_code::REGISTER_BROKER);
    RegisterBrokerRequestHeader {
        broker_name: cfg.broker_name.clone(),
        broker_addr: broker_addr(s0),
        cluster_name: cfg.broker_cluster_name.clone(),
        ha_server_addr: ha.to_string(),
        broker_id: s0.ctx.role.registered_broker_id(),
        heartbeat_timeout_millis: Some(120_000),
        compressed: false,
        body_crc32: body_crc32(&body),
    }
    .write_to(&mut cmd);
    cmd.with_body(body)
}

/// The body checksum Java's name server compares against: CRC32 with the sign bit cleared
/// (`UtilAll.crc32`). An unmasked CRC fails its check whenever the top bit is set.
fn body_crc32(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// Where a slave's master listens for slaves, as the name servers last answered a registration
/// (Java's `updateHaMasterAddress` from `RegisterBrokerResult`); shared on shard 0 by the
/// registration loop (writer) and the slave's HA client (reader).
pub type LearnedMaster = Rc<std::cell::Cell<Option<SocketAddr>>>;

/// Where a slave's master serves remoting requests: the `masterAddr` the name servers last
/// answered a registration with (Java's `updateMasterAddress`, `SlaveSynchronize.masterAddr`);
/// written by the registration loop on shard 0, read by `slave_sync`. Learned whether or not
/// haMasterAddress is set.
pub type MasterAddr = Rc<std::cell::Cell<Option<SocketAddr>>>;

/// Shard 0's registration loop; never returns while the broker runs.
pub async fn run(s0: Rc<Shard>, learned: LearnedMaster, master: MasterAddr) {
    let period = Duration::from_millis(s0.ctx.cfg.register_name_server_period_ms);
    let mut clients: HashMap<SocketAddr, Client> = HashMap::new();
    loop {
        if s0.is_stopping() {
            return;
        }
        register_all(&s0, &mut clients, &learned, &master).await;
        let signal = SIGNAL.with(|s| s.borrow().clone());
        let _ = runtime::timeout(period, signal.notified()).await;
        SIGNAL.with(|s| *s.borrow_mut() = Waiter::new());
    }
}

async fn register_all(
    s0: &Rc<Shard>,
    clients: &mut HashMap<SocketAddr, Client>,
    learned: &LearnedMaster,
    master: &MasterAddr,
) {
    // In controller mode nothing is announced until the controller has said who this is.
    if !s0.ctx.role.is_decided() {
        return;
    }
    let mut all_ok = true;
    for addr in s0.ctx.cfg.namesrv_addr.clone() {
        let cmd = register_command(s0);
        match invoke(clients, addr, cmd, &s0.ctx.tls).await {
            Ok(resp) => {
                let header = RegisterBrokerResponseHeader::from_command(&resp).ok();
                let parse = |a: Option<String>| a.and_then(|a| a.parse::<SocketAddr>().ok());
                let (ha, remoting) = match header {
                    Some(h) => (parse(h.ha_server_addr), parse(h.master_addr)),
                    None => (None, None),
                };
                if let Some(ha) = ha {
                    if learned.replace(Some(ha)) != Some(ha) {
                        tracing::info!(namesrv = %addr, master_ha = %ha, "the master's HA address");
                    }
                }
                if let Some(m) = remoting {
                    if master.replace(Some(m)) != Some(m) {
                        tracing::info!(namesrv = %addr, master = %m, "the master's address");
                    }
                }
            }
            Err(e) => {
                all_ok = false;
                tracing::warn!(namesrv = %addr, error = %e, "register broker failed");
            }
        }
    }
    if all_ok {
        s0.ctx
            .registered
            .store(true, std::sync::atomic::Ordering::Release);
    }
}

async fn invoke(
    clients: &mut HashMap<SocketAddr, Client>,
    addr: SocketAddr,
    cmd: RemotingCommand,
    tls: &crate::tls::TlsContext,
) -> Result<RemotingCommand, String> {
    let client = match clients.entry(addr) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(v) => v.insert(
            Client::connect_with(addr, BROKER_RPC_TIMEOUT, tls)
                .await
                .map_err(|e| e.to_string())?,
        ),
    };
    match client.invoke(cmd, BROKER_RPC_TIMEOUT).await {
        Ok(resp) if resp.code == rc::SUCCESS => Ok(resp),
        Ok(resp) => Err(format!(
            "name server answered {}: {}",
            resp.code,
            resp.remark.unwrap_or_default()
        )),
        Err(e) => {
            clients.remove(&addr);
            Err(e.to_string())
        }
    }
}

/// Clean shutdown: tell every name server we are gone.
pub async fn unregister_all(s0: &Rc<Shard>) {
    let cfg = &s0.ctx.cfg;
    let mut clients = HashMap::new();
    for addr in cfg.namesrv_addr.clone() {
        let mut cmd = RemotingCommand::new_request(request_code::UNREGISTER_BROKER);
        UnregisterBrokerRequestHeader {
            broker_name: cfg.broker_name.clone(),
            broker_addr: broker_addr(s0),
            cluster_name: cfg.broker_cluster_name.clone(),
            broker_id: s0.ctx.role.registered_broker_id(),
        }
        .write_to(&mut cmd);
        if let Err(e) = invoke(&mut clients, addr, cmd, &s0.ctx.tls).await {
            tracing::warn!(namesrv = %addr, error = %e, "unregister broker failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::body_crc32;

    /// The checksum is Java's masked CRC32: never negative, equal to the CRC without its top bit.
    #[test]
    fn register_crc_is_masked_like_java() {
        let bodies: Vec<Vec<u8>> = (0u32..64)
            .map(|i| format!("{{\"n\":{i}}}").into_bytes())
            .collect();
        let high = bodies
            .iter()
            .find(|b| crc32fast::hash(b) & 0x8000_0000 != 0)
            .expect("some body has a CRC with the top bit set");
        assert!(body_crc32(high) >= 0);
        assert_eq!(body_crc32(high) as u32, crc32fast::hash(high) & 0x7FFF_FFFF);
        for b in &bodies {
            assert_eq!(body_crc32(b) as u32, crc32fast::hash(b) & 0x7FFF_FFFF);
        }
    }
}
