//! A slave's side of classic HA replication (Java's `DefaultHAClient`), on shard 0 of a SLAVE:
//! it connects to its master's HA port (`haMasterAddress`, or the address the name servers
//! answer its registration with), reports its commit-log end, and
//! appends what the master sends at the master's offsets, record by record, through the
//! writer, so its commit log is the master's and its consume queues and index are built by the
//! same dispatch as a master's. It reports its new end after every append and every
//! `haSendHeartbeatInterval`, closes the connection when a transfer does not continue where
//! it stands or when nothing arrives for `haHousekeepingInterval`, and reconnects after 5 s.
//!
//! An empty slave's first transfer may start past its end: the master starts an empty slave at
//! its last segment. The writer then makes the empty log begin there, and the slave follows
//! from that offset, as Java's slave does; a slave holding records refuses any other offset.
//!
//! A transfer may end inside a record: the bytes wait until the record is whole. A segment's
//! blank end marker and the bytes after it are skipped: the slave's writer closes its own
//! segment at the same place, with the same rule.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};

use crate::append::append_replicated;
use crate::common::now_ms;
use crate::constants::{HA_READ_CHUNK, HA_TRANSFER_MAX};
use crate::ha_status::HaClientState;
use crate::protocol::ha::{decode_transfer_header, encode_report, TRANSFER_HEADER_LEN};
use crate::protocol::message::{self, sys_flag, BLANK_MAGIC, BLANK_MARKER_LEN};
use crate::protocol::properties::{self, keys};
use crate::register::LearnedMaster;
use crate::runtime;
use crate::runtime::net::Stream;
use crate::shard::Shard;
use crate::store::{tags_code, StoreError};
use crate::writer::{AppendRecord, IndexKeys};

/// Java's slave waits this long before it connects again.
const RECONNECT: Duration = Duration::from_secs(5);

/// Shard 0 of a slave: follows the master while the broker runs. The master's HA address is
/// `haMasterAddress`, or else what the name servers answered the last registration.
pub async fn follow(shard: Rc<Shard>, learned: LearnedMaster) {
    while !shard.is_stopping() {
        let Some(master) = shard.ctx.cfg.ha.ha_master_address.or(learned.get()) else {
            runtime::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let ended = session(&shard, master).await;
        shard.ctx.ha_client.disconnected();
        match ended {
            Ok(()) => return,
            Err(e) => tracing::warn!(%master, error = %e, "HA connection to the master ended"),
        }
        runtime::sleep(RECONNECT).await;
    }
}

type Ended = Result<(), String>;

/// One connection: report, receive, append, report, until it fails or the broker stops.
async fn session(shard: &Rc<Shard>, master: SocketAddr) -> Ended {
    let cfg = &shard.ctx.cfg.ha;
    let heartbeat = Duration::from_millis(cfg.heartbeat_interval_ms);
    let housekeeping = Duration::from_millis(cfg.housekeeping_interval_ms);
    let mut stream = crate::ha_watch::connect(shard, master)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    // Where the next record goes: this commit log's end.
    let mut at = shard.ctx.writer.max_phy_offset();
    let state = &shard.ctx.ha_client;
    state.connected(master);
    report(&mut stream, at, state).await?;
    let mut last_report = Instant::now();
    // Bytes received in the current second, reported once it is whole.
    let mut second = (Instant::now(), 0u64);
    tracing::info!(%master, from = at, "HA connection to the master");
    let mut frames = BytesMut::with_capacity(HA_READ_CHUNK);
    // Bytes received from `at` on, not yet a whole record.
    let mut pending = BytesMut::new();
    let mut last_read = Instant::now();
    loop {
        if shard.is_stopping() {
            return Ok(());
        }
        match stream.try_read_buf(&mut frames, HA_READ_CHUNK) {
            Some(Ok(0)) => return Err("the master closed the connection".into()),
            Some(Ok(n)) => {
                last_read = Instant::now();
                state.read_at(now_ms() as u64);
                second.1 += n as u64;
                if second.0.elapsed() >= Duration::from_secs(1) {
                    state.received_per_second(second.1);
                    second = (last_read, 0);
                }
            }
            Some(Err(e)) => return Err(format!("read error: {e}")),
            None => {
                if last_read.elapsed() >= housekeeping {
                    return Err(format!(
                        "nothing from the master for {} ms",
                        housekeeping.as_millis()
                    ));
                }
                if last_report.elapsed() >= heartbeat {
                    report(&mut stream, at, state).await?;
                    last_report = Instant::now();
                }
                // Sleep until the master sends, or a report or the housekeeping check is due.
                let due = heartbeat
                    .saturating_sub(last_report.elapsed())
                    .min(housekeeping.saturating_sub(last_read.elapsed()))
                    .max(Duration::from_millis(1));
                // An error shows in the next read.
                let _ = runtime::timeout(due, stream.readable()).await;
                continue;
            }
        }
        while let Some((phy, size)) = decode_transfer_header(&frames) {
            let size = usize::try_from(size)
                .ok()
                .filter(|s| *s <= HA_TRANSFER_MAX)
                .ok_or_else(|| format!("a transfer of {size} bytes"))?;
            if frames.len() < TRANSFER_HEADER_LEN + size {
                break;
            }
            let expected = at + pending.len() as u64;
            if phy as u64 != expected {
                let writer = &shard.ctx.writer;
                let empty = pending.is_empty() && at == writer.min_phy_offset();
                if !empty {
                    return Err(format!(
                        "the master sent offset {phy}, this slave stands at {expected}"
                    ));
                }
                // An empty slave: the master starts it at its last segment (Java's slave
                // creates the file named by that offset); the writer refuses an unaligned one.
                let phy = phy as u64;
                begin_at(shard, phy).await.map_err(|e| {
                    format!("the master starts this empty slave at {phy}, which it cannot: {e}")
                })?;
                tracing::info!(%master, from = phy, "the empty commit log begins where the master's transfer does");
                at = phy;
            }
            frames.advance(TRANSFER_HEADER_LEN);
            pending.extend_from_slice(&frames[..size]);
            frames.advance(size);
        }
        let (records, used) = whole_records(shard, &mut pending)?;
        if used > 0 {
            if !records.is_empty() {
                append_replicated(shard, records)
                    .await
                    .map_err(|e| format!("append failed: {e}"))?;
            }
            at += used as u64;
            report(&mut stream, at, state).await?;
            last_report = Instant::now();
        }
    }
}

/// Reports this slave's commit-log end, `at`, to the master.
async fn report(stream: &mut Stream, at: u64, state: &HaClientState) -> Ended {
    stream
        .write_all(&encode_report(at))
        .await
        .map_err(|e| format!("write error: {e}"))?;
    state.wrote_at(now_ms() as u64);
    Ok(())
}

/// Has the writer make this slave's empty commit log begin at `offset`, and waits until it did.
pub(crate) async fn begin_at(shard: &Rc<Shard>, offset: u64) -> Result<(), String> {
    let (tx, rx) = oneshot::channel::<Result<(), StoreError>>();
    let done = Box::new(move |r| {
        // The receiver is gone only when this connection's task was dropped (shutdown).
        let _ = tx.send(r);
    });
    if !shard.ctx.writer.try_start_at(offset, done) {
        return Err("the writer's inbox is full or the writer stopped".into());
    }
    match rx.await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err("the writer stopped".into()),
    }
}

/// Takes the whole records off the front of `pending`, as appends that own their bytes (split
/// off the buffer, not copied), and returns the bytes they (and any segment end they pass)
/// took up.
pub(crate) fn whole_records(
    shard: &Shard,
    pending: &mut BytesMut,
) -> Result<(Vec<AppendRecord>, usize), String> {
    let levels = &shard.ctx.delay_levels;
    let mut out = Vec::new();
    let mut used = 0;
    while pending.len() >= BLANK_MARKER_LEN {
        let total = u32::from_be_bytes(pending[..4].try_into().unwrap_or_default()) as usize;
        let magic = u32::from_be_bytes(pending[4..8].try_into().unwrap_or_default());
        if total < BLANK_MARKER_LEN {
            return Err(format!("a record of {total} bytes in the master's stream"));
        }
        if pending.len() < total {
            break;
        }
        used += total;
        let raw = pending.split_to(total);
        if magic == BLANK_MAGIC {
            continue;
        }
        let r = message::decode(&raw, false)
            .map_err(|e| format!("a record the master sent does not decode: {e}"))?;
        let tags = tags_code::of_record(r.topic, r.properties, levels);
        // The keys stay in the record: ranges of its KEYS and UNIQ_KEY values, nothing
        // allocated per record.
        let base = raw.as_ptr() as usize;
        let range = |v: &str| {
            let start = (v.as_ptr() as usize - base) as u32;
            (start, start + v.len() as u32)
        };
        let keys = IndexKeys::InRecord {
            keys: properties::get(r.properties, keys::KEYS).map(range),
            uniq: properties::get(r.properties, keys::UNIQ_KEY).map(range),
        };
        let (topic, queue_id, dispatch) = (
            r.topic.into(),
            r.queue_id as u32,
            sys_flag::is_dispatched(r.sys_flag),
        );
        let mut rec = AppendRecord::whole(Some(topic), queue_id, tags, keys, dispatch, raw);
        rec.replicated = true;
        out.push(rec);
    }
    Ok((out, used))
}
