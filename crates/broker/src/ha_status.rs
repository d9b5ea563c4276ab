//! GET_BROKER_HA_STATUS (907), `mqadmin haStatus`: a master lists its slaves (address,
//! acknowledged offset, gap, in sync or not by `haMaxGapNotInSync`, bytes per second, where the
//! transfer stands), a slave its link to the master ([`HaClientState`], written by
//! `ha_client` on shard 0), in the field names of Java's `HARuntimeInfo`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::group_transfer::SlaveAcks;

/// A slave's link to its master, as its HA client last saw it.
#[derive(Default)]
pub struct HaClientState {
    /// The master's HA address, set when a connection starts (read only by 907).
    master: Mutex<Option<SocketAddr>>,
    connected: AtomicBool,
    last_read_ms: AtomicU64,
    last_write_ms: AtomicU64,
    bytes_per_s: AtomicU64,
}

impl HaClientState {
    pub fn connected(&self, master: SocketAddr) {
        if let Ok(mut m) = self.master.lock() {
            *m = Some(master);
        }
        self.connected.store(true, Ordering::Release);
    }

    pub fn disconnected(&self) {
        self.connected.store(false, Ordering::Release);
    }

    pub fn read_at(&self, ms: u64) {
        self.last_read_ms.store(ms, Ordering::Release);
    }

    pub fn wrote_at(&self, ms: u64) {
        self.last_write_ms.store(ms, Ordering::Release);
    }

    /// The bytes received in the last whole second.
    pub fn received_per_second(&self, bytes: u64) {
        self.bytes_per_s.store(bytes, Ordering::Release);
    }
}

/// Java's `HARuntimeInfo`; fastjson writes the fields in name order and leaves nulls out.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HaRuntimeInfo {
    ha_client_runtime_info: HaClientRuntimeInfo,
    ha_connection_info: Vec<HaConnectionRuntimeInfo>,
    in_sync_slave_nums: usize,
    master: bool,
    master_commit_log_max_offset: u64,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct HaClientRuntimeInfo {
    last_read_timestamp: u64,
    last_write_timestamp: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    master_addr: Option<String>,
    master_flush_offset: u64,
    max_offset: u64,
    transferred_byte_in_second: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HaConnectionRuntimeInfo {
    addr: String,
    diff: i64,
    in_sync: bool,
    slave_ack_offset: u64,
    transfer_from_where: u64,
    transferred_byte_in_second: u64,
}

/// The body of a GET_BROKER_HA_STATUS answer. `end` is this broker's commit-log end; a slave
/// counts as in sync while it is less than `max_gap` behind it (Java's `isInSyncSlave`).
pub fn runtime_info(
    slave: bool,
    end: u64,
    max_gap: u64,
    acks: &SlaveAcks,
    client: &HaClientState,
) -> Vec<u8> {
    let mut info = HaRuntimeInfo {
        ha_client_runtime_info: HaClientRuntimeInfo::default(),
        ha_connection_info: Vec::new(),
        in_sync_slave_nums: 0,
        master: !slave,
        master_commit_log_max_offset: 0,
    };
    if slave {
        let c = &mut info.ha_client_runtime_info;
        c.master_addr = client
            .master
            .lock()
            .ok()
            .and_then(|m| *m)
            .map(|a| a.to_string());
        c.max_offset = end;
        c.last_read_timestamp = client.last_read_ms.load(Ordering::Acquire);
        c.last_write_timestamp = client.last_write_ms.load(Ordering::Acquire);
        c.transferred_byte_in_second = client.bytes_per_s.load(Ordering::Acquire);
    } else {
        info.master_commit_log_max_offset = end;
        for s in acks.slaves() {
            let diff = end as i64 - s.acked as i64;
            let in_sync = diff < max_gap as i64;
            info.in_sync_slave_nums += usize::from(in_sync);
            info.ha_connection_info.push(HaConnectionRuntimeInfo {
                addr: s.addr.to_string(),
                diff,
                in_sync,
                slave_ack_offset: s.acked,
                transfer_from_where: s.next,
                transferred_byte_in_second: s.bytes_per_s,
            });
        }
    }
    serde_json::to_vec(&info).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A master lists its slaves with Java's field names; in sync is a gap under the limit.
    #[test]
    fn a_master_lists_its_slaves() {
        let acks = Arc::new(SlaveAcks::new(1));
        let near = acks.attach("127.0.0.1:5000".parse().unwrap()).unwrap();
        let far = acks.attach("127.0.0.1:5001".parse().unwrap()).unwrap();
        near.ack(1000);
        far.ack(10);
        near.sending_from(1000);
        let body = runtime_info(false, 1000, 500, &acks, &HaClientState::default());
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["master"], true);
        assert_eq!(v["masterCommitLogMaxOffset"], 1000);
        assert_eq!(v["inSyncSlaveNums"], 1);
        let c = &v["haConnectionInfo"];
        assert_eq!(c[0]["addr"], "127.0.0.1:5000");
        assert_eq!(c[0]["slaveAckOffset"], 1000);
        assert_eq!(c[0]["diff"], 0);
        assert_eq!(c[0]["inSync"], true);
        assert_eq!(c[0]["transferFromWhere"], 1000);
        assert_eq!(c[1]["diff"], 990);
        assert_eq!(c[1]["inSync"], false);
        assert!(v["haClientRuntimeInfo"].get("masterAddr").is_none());
    }

    /// A slave shows its link to the master.
    #[test]
    fn a_slave_shows_its_master() {
        let client = HaClientState::default();
        client.connected("10.0.0.1:10912".parse().unwrap());
        client.read_at(7);
        client.wrote_at(8);
        let body = runtime_info(true, 4096, 1, &SlaveAcks::new(1), &client);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["master"], false);
        let c = &v["haClientRuntimeInfo"];
        assert_eq!(c["masterAddr"], "10.0.0.1:10912");
        assert_eq!(c["maxOffset"], 4096);
        assert_eq!(c["lastReadTimestamp"], 7);
        assert_eq!(c["lastWriteTimestamp"], 8);
        assert_eq!(v["haConnectionInfo"].as_array().unwrap().len(), 0);
    }
}
