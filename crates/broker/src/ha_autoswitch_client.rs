//! A slave's side of RocketMQ 5's AutoSwitch HA (Java's `AutoSwitchHAClient`), for a broker in
//! controller mode, on shard 0. While the controller says this broker is a slave, it connects
//! to the master's HA port, says who it is (handshake), and compares the master's epochs with
//! its own: where the two logs last agree is the consistent point, and anything this log holds
//! past it (what a deposed master wrote that nobody acknowledged) is truncated before it
//! follows. Then it reports its end and appends what the master sends at the master's
//! offsets, through the writer, recording each new epoch a transfer names in the epoch file.
//!
//! The master's HA address is the one the name servers answer this slave's registration with,
//! taken only once they name the same master as the controller. A role change ends the
//! connection: a slave turned master stops appending first (`Replicas::may_follow`).

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};

use crate::append::append_replicated;
use crate::common::now_ms;
use crate::constants::{HA_READ_CHUNK, HA_TRANSFER_MAX};
use crate::ha_client::{begin_at, whole_records};
use crate::protocol::ha_autoswitch::{
    decode_master_message, encode_ack, MasterMessage, SlaveHandshake,
};
use crate::register::{self, LearnedMaster, MasterAddr};
use crate::replicas::Replicas;
use crate::runtime;
use crate::runtime::net::Stream;
use crate::shard::Shard;
use crate::store::{EpochFileCache, StoreError};

/// How long a slave waits before it connects again.
const RECONNECT: Duration = Duration::from_secs(1);

type Ended = Result<(), String>;

/// Shard 0 of a broker in controller mode: follows the master while this broker is a slave.
pub async fn follow(shard: Rc<Shard>, r: Rc<Replicas>, learned: LearnedMaster, named: MasterAddr) {
    while !shard.is_stopping() {
        let role = &shard.ctx.role;
        let master = r.master();
        let Some(m) = master.filter(|_| role.is_slave() && role.is_decided()) else {
            let _ = runtime::timeout(RECONNECT, r.changed()).await;
            continue;
        };
        // The name servers' answer must name the controller's master before its HA address
        // counts.
        let ha = match (named.get(), learned.get()) {
            (Some(n), Some(ha)) if n.to_string() == m.addr => ha,
            _ => {
                register::register_soon(&shard);
                let _ = runtime::timeout(Duration::from_millis(300), r.changed()).await;
                continue;
            }
        };
        let ended = session(&shard, &r, ha, m.epoch).await;
        shard.ctx.ha_client.disconnected();
        r.set_appending(false);
        if let Err(e) = ended {
            tracing::warn!(master = %ha, error = %e, "AutoSwitch HA connection to the master ended");
            let _ = runtime::timeout(RECONNECT, r.changed()).await;
        }
    }
}

/// One connection: handshake, truncate, then receive and append until it fails, the role
/// changes, or the broker stops.
async fn session(shard: &Rc<Shard>, r: &Rc<Replicas>, master: SocketAddr, epoch: i32) -> Ended {
    let cfg = &shard.ctx.cfg;
    let heartbeat = Duration::from_millis(cfg.ha.heartbeat_interval_ms);
    let housekeeping = Duration::from_millis(cfg.ha.housekeeping_interval_ms);
    let mut stream = crate::ha_watch::connect(shard, master)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let state = &shard.ctx.ha_client;
    state.connected(master);
    let hs = SlaveHandshake {
        sync_from_last_file: cfg.controller_mode.sync_from_last_file,
        async_learner: cfg.controller_mode.async_learner,
        broker_id: shard.ctx.role.own_id(),
    };
    write(&mut stream, &hs.encode(), housekeeping).await?;
    let mut frames = BytesMut::with_capacity(HA_READ_CHUNK);
    let mut last_read = Instant::now();
    // The master's handshake answer.
    let (master_max, master_epochs) = loop {
        if let Some((m, used)) = decode_master_message(&frames, HA_TRANSFER_MAX)? {
            let MasterMessage::Handshake { max_offset, epochs } = m else {
                return Err("the master sent a transfer before its handshake".into());
            };
            frames.advance(used);
            break (max_offset, epochs);
        }
        read_some(&stream, &mut frames, &mut last_read, housekeeping).await?;
        if !following(shard, r, epoch) {
            return Ok(());
        }
    };
    let mut at = truncate_to_agreement(shard, r, master_max, &master_epochs).await?;
    write(&mut stream, &encode_ack(at), housekeeping).await?;
    state.wrote_at(now_ms() as u64);
    let mut last_report = Instant::now();
    tracing::info!(%master, from = at, "AutoSwitch HA connection to the master");
    // Bytes received from `at` on, not yet a whole record.
    let mut pending = BytesMut::new();
    loop {
        if shard.is_stopping() || !following(shard, r, epoch) {
            return Ok(());
        }
        while let Some((m, used)) = decode_master_message(&frames, HA_TRANSFER_MAX)? {
            let MasterMessage::Transfer(h) = m else {
                return Err("a second handshake from the master".into());
            };
            let size = h.body_size as usize;
            if frames.len() < used + size {
                break;
            }
            let expected = at + pending.len() as u64;
            if size > 0 && h.offset as u64 != expected {
                let writer = &shard.ctx.writer;
                let empty = pending.is_empty()
                    && at == writer.min_phy_offset()
                    && at == writer.max_phy_offset();
                if !empty || h.offset < 0 {
                    return Err(format!(
                        "the master sent offset {}, this slave stands at {expected}",
                        h.offset
                    ));
                }
                let phy = h.offset as u64;
                begin_at(shard, phy).await.map_err(|e| {
                    format!("the master starts this empty slave at {phy}, which it cannot: {e}")
                })?;
                at = phy;
            }
            if size > 0 {
                record_epoch(r, h.epoch, h.epoch_start_offset).await?;
            }
            frames.advance(used);
            pending.extend_from_slice(&frames[..size]);
            frames.advance(size);
        }
        let (records, used) = whole_records(shard, &mut pending)?;
        if used > 0 {
            if !records.is_empty() {
                if !r.may_follow() {
                    return Ok(());
                }
                r.set_appending(true);
                let appended = append_replicated(shard, records).await;
                r.set_appending(false);
                appended.map_err(|e| format!("append failed: {e}"))?;
            }
            at += used as u64;
            write(&mut stream, &encode_ack(at), housekeeping).await?;
            state.wrote_at(now_ms() as u64);
            last_report = Instant::now();
            continue;
        }
        if last_report.elapsed() >= heartbeat {
            write(&mut stream, &encode_ack(at), housekeeping).await?;
            state.wrote_at(now_ms() as u64);
            last_report = Instant::now();
        }
        let n = frames.len();
        read_some(&stream, &mut frames, &mut last_read, housekeeping).await?;
        if frames.len() > n {
            state.read_at(now_ms() as u64);
        }
    }
}

/// Whether this connection still serves: a slave of the master of `epoch`.
fn following(shard: &Shard, r: &Replicas, epoch: i32) -> bool {
    let role = &shard.ctx.role;
    role.is_slave() && role.master_epoch() == epoch && r.may_follow()
}

/// Java's `doTruncate`: the point where this log and the master's agree (by epochs), this log
/// cut back to it when it holds more. Returns this log's end afterwards.
async fn truncate_to_agreement(
    shard: &Rc<Shard>,
    r: &Rc<Replicas>,
    master_max: i64,
    master_epochs: &[crate::protocol::body::EpochEntry],
) -> Result<u64, String> {
    let end = shard.ctx.writer.max_phy_offset();
    let mut local = r.epochs.borrow().clone();
    if local.is_empty() {
        if end > shard.ctx.writer.min_phy_offset() {
            return Err(
                "this commit log has records but no epochs: it cannot be matched with the \
                 master's; the slave needs a fresh store"
                    .into(),
            );
        }
        return Ok(end);
    }
    local.set_last_end(end);
    let mut theirs = EpochFileCache::from_entries(master_epochs).map_err(|e| e.to_string())?;
    theirs.set_last_end(master_max.max(0) as u64);
    let Some(point) = local.find_consistent_point(&theirs) else {
        return Err("no epoch agrees with the master's: the slave needs a fresh store".into());
    };
    if point >= end {
        return Ok(end);
    }
    tracing::warn!(
        from = point,
        to = end,
        "truncating what the master does not hold"
    );
    truncate(shard, point).await?;
    let mut cache = r.epochs.borrow().clone();
    let cache =
        runtime::spawn_blocking(move || cache.truncate_suffix_by_offset(point).map(|()| cache))
            .await
            .map_err(|e| e.to_string())?;
    *r.epochs.borrow_mut() = cache;
    Ok(shard.ctx.writer.max_phy_offset())
}

/// Records that the master's bytes from `start` on belong to `epoch`, when that is new here.
async fn record_epoch(r: &Replicas, epoch: i32, start: i64) -> Ended {
    let epoch = u32::try_from(epoch).map_err(|_| format!("a transfer in epoch {epoch}"))?;
    let start = u64::try_from(start).map_err(|_| format!("an epoch starting at {start}"))?;
    if r.epochs.borrow().last_epoch().is_some_and(|l| l >= epoch) {
        return Ok(());
    }
    let mut cache = r.epochs.borrow().clone();
    let cache = runtime::spawn_blocking(move || cache.append(epoch, start).map(|()| cache))
        .await
        .map_err(|e: StoreError| format!("cannot record epoch {epoch}: {e}"))?;
    *r.epochs.borrow_mut() = cache;
    Ok(())
}

/// Has the writer cut the commit log back to `offset`, and waits until it did.
async fn truncate(shard: &Rc<Shard>, offset: u64) -> Ended {
    let (tx, rx) = oneshot::channel::<Result<(), StoreError>>();
    let done = Box::new(move |r| {
        // The receiver is gone only when this connection's task was dropped (shutdown).
        let _ = tx.send(r);
    });
    if !shard.ctx.writer.try_truncate_to(offset, done) {
        return Err("the writer's inbox is full or the writer stopped".into());
    }
    match rx.await {
        Ok(r) => r.map_err(|e| format!("cannot truncate the commit log to {offset}: {e}")),
        Err(_) => Err("the writer stopped".into()),
    }
}

async fn write(stream: &mut Stream, bytes: &[u8], limit: Duration) -> Ended {
    runtime::timeout(limit, stream.write_all(bytes))
        .await
        .ok_or_else(|| format!("the master read nothing for {} ms", limit.as_millis()))?
        .map_err(|e| format!("write error: {e}"))
}

/// Reads what the master sent, waiting up to a heartbeat for it; an error when the master has
/// been silent for the housekeeping interval.
async fn read_some(
    stream: &Stream,
    frames: &mut BytesMut,
    last_read: &mut Instant,
    housekeeping: Duration,
) -> Ended {
    match stream.try_read_buf(frames, HA_READ_CHUNK) {
        Some(Ok(0)) => Err("the master closed the connection".into()),
        Some(Ok(_)) => {
            *last_read = Instant::now();
            Ok(())
        }
        Some(Err(e)) => Err(format!("read error: {e}")),
        None => {
            if last_read.elapsed() >= housekeeping {
                return Err(format!(
                    "nothing from the master for {} ms",
                    housekeeping.as_millis()
                ));
            }
            let due = housekeeping
                .saturating_sub(last_read.elapsed())
                .min(Duration::from_millis(200));
            let _ = runtime::timeout(due.max(Duration::from_millis(1)), stream.readable()).await;
            Ok(())
        }
    }
}
