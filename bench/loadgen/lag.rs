//! The replication-lag probe (`send --lag-probe`): while the load runs, it asks the master for
//! its HA status (GET_BROKER_HA_STATUS, 907) and measures how long it takes until a slave has
//! acknowledged the commit-log end the master reported at the start of the sample, that is
//! until a SYNC_MASTER could answer a send stored at that moment. The resolution is one status
//! round trip; samples are 2 ms apart so the probe adds little load.
//!
//! Beside it runs the machine's own ceiling for such a figure: a thread that sleeps 1 ms over
//! and over and records how late it wakes ([`start_wake_probe`]). An acknowledgement crosses
//! several threads, each of which must be woken; the lag cannot be steadier than that.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use ringmq::protocol::RemotingCommand;

use crate::stats::new_hist;
use crate::wire::RpcConn;

const GET_BROKER_HA_STATUS: i32 = 907;
const BETWEEN_SAMPLES: Duration = Duration::from_millis(2);
const POLL: Duration = Duration::from_micros(100);

/// (the master's commit-log end, the highest offset a slave acknowledged).
fn status(conn: &mut RpcConn) -> Result<(u64, u64), String> {
    let r = conn.call(&RemotingCommand::new_request(GET_BROKER_HA_STATUS))?;
    if r.code != 0 {
        return Err(format!(
            "HA status answered code {}: {:?}",
            r.code, r.remark
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&r.body).map_err(|e| format!("HA status body: {e}"))?;
    let end = v["masterCommitLogMaxOffset"]
        .as_u64()
        .ok_or("HA status without masterCommitLogMaxOffset (not a master?)")?;
    let acked = v["haConnectionInfo"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["slaveAckOffset"].as_u64())
        .max()
        .ok_or("the master has no slave connected")?;
    Ok((end, acked))
}

/// Starts probing `broker` after `warmup`; the thread returns the lag samples (ns) once `stop`
/// is set.
pub fn start(
    broker: &str,
    warmup: Duration,
    timeout: Duration,
    stop: Arc<AtomicBool>,
) -> JoinHandle<Result<Histogram<u64>, String>> {
    let broker = broker.to_owned();
    std::thread::spawn(move || {
        let mut conn = RpcConn::open(&broker, timeout)?;
        let mut hist = new_hist();
        std::thread::sleep(warmup);
        while !stop.load(Relaxed) {
            let t0 = Instant::now();
            let (end, mut acked) = status(&mut conn)?;
            while acked < end && !stop.load(Relaxed) {
                std::thread::sleep(POLL);
                acked = status(&mut conn)?.1;
            }
            if acked >= end {
                let _ = hist.record(t0.elapsed().as_nanos().max(1) as u64);
            }
            std::thread::sleep(BETWEEN_SAMPLES);
        }
        Ok(hist)
    })
}

/// Records how late a thread wakes from a 1 ms sleep (ns), until `stop`, after `warmup`.
pub fn start_wake_probe(warmup: Duration, stop: Arc<AtomicBool>) -> JoinHandle<Histogram<u64>> {
    std::thread::spawn(move || {
        let mut hist = new_hist();
        std::thread::sleep(warmup);
        let nap = Duration::from_millis(1);
        while !stop.load(Relaxed) {
            let t0 = Instant::now();
            std::thread::sleep(nap);
            let late = t0.elapsed().saturating_sub(nap);
            let _ = hist.record(late.as_nanos().max(1) as u64);
        }
        hist
    })
}
