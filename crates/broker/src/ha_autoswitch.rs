//! The master's side of RocketMQ 5's AutoSwitch HA (Java's `AutoSwitchHAConnection`), for a
//! broker in controller mode, on shard 0: the slave's handshake names it (broker id, whether it
//! starts from the last segment, whether it is an async learner); the master answers with its
//! commit-log end and epochs, so the slave can cut what it holds beyond the point where the two
//! logs agree; the slave's first acknowledgement says where to start. From there the commit log
//! is sent as in classic HA (sendfile from the segment file, a heartbeat when idle, bounded
//! writes, reports validated), except that each transfer header carries the epoch its bytes
//! were written in and the master's confirm offset, and no transfer spans two epochs.
//!
//! Acknowledgements feed the SyncStateSet: a slave that catches up is recorded as caught up,
//! and one that is not yet a member makes the master propose it to the controller
//! (`replicas::check_sync_state_set`). A connection ends when this broker stops being the
//! master it was when the connection began.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};

use crate::common::now_ms;
use crate::group_transfer::MAX_SLAVES;
use crate::ha_watch::{idle, read_available, send_heartbeat, send_run, stalled, PublishWatch};
use crate::protocol::ha_autoswitch::{
    decode_slave_message, encode_master_handshake, SlaveHandshake, SlaveMessage, TransferHeader,
};
use crate::replicas::{self, Replicas};
use crate::role::from_mask;
use crate::runtime;
use crate::runtime::net::Stream;
use crate::shard::Shard;

/// Unread bytes kept from a slave at most; a slave that floods is cut off.
const READ_BUFFER_MAX: usize = 1 << 20;
/// How often the handshake's reads are retried while the slave is silent.
const HANDSHAKE_POLL: Duration = Duration::from_millis(5);

type Ended = Result<(), String>;

/// What the slave has sent so far.
struct FromSlave {
    buf: BytesMut,
    handshake: Option<SlaveHandshake>,
    /// The newest acknowledgement, if any arrived since it was last taken.
    newest: Option<i64>,
    last_read: Instant,
}

impl FromSlave {
    /// Takes whatever the socket holds now and parses every whole message.
    fn poll(&mut self, stream: &Stream) -> Ended {
        if read_available(stream, &mut self.buf, READ_BUFFER_MAX)? {
            self.last_read = Instant::now();
        }
        while let Some((m, used)) = decode_slave_message(&self.buf)? {
            self.buf.advance(used);
            match m {
                SlaveMessage::Handshake(h) => {
                    if self.handshake.is_some() {
                        return Err("a second handshake from the slave".into());
                    }
                    self.handshake = Some(h);
                }
                SlaveMessage::Ack(offset) => {
                    if self.handshake.is_none() {
                        return Err("an acknowledgement before the handshake".into());
                    }
                    self.newest = Some(offset);
                }
            }
        }
        Ok(())
    }

    /// Polls until `ready` holds, the housekeeping deadline passes, or the broker stops.
    async fn until(
        &mut self,
        stream: &Stream,
        shard: &Shard,
        housekeeping: Duration,
        ready: impl Fn(&Self) -> bool,
    ) -> Ended {
        loop {
            self.poll(stream)?;
            if ready(self) {
                return Ok(());
            }
            if shard.is_stopping() {
                return Err("the broker stops".into());
            }
            if self.last_read.elapsed() > housekeeping {
                return Err("the slave did not finish its handshake".into());
            }
            let _ = runtime::timeout(HANDSHAKE_POLL, stream.readable()).await;
        }
    }
}

/// Serves one slave until it goes away, this broker stops being this epoch's master, or the
/// slave asks for what cannot be sent.
pub async fn transfer(
    shard: &Rc<Shard>,
    mut stream: Stream,
    watch: &PublishWatch,
    r: &Rc<Replicas>,
) -> Ended {
    let cfg = &shard.ctx.cfg;
    let role = &shard.ctx.role;
    let segment = cfg.store.mapped_file_size_commit_log;
    let batch = cfg.ha.transfer_batch_size as u64;
    let heartbeat = Duration::from_millis(cfg.ha.heartbeat_interval_ms);
    let housekeeping = Duration::from_millis(cfg.ha.housekeeping_interval_ms);
    let mut from = FromSlave {
        buf: BytesMut::with_capacity(256),
        handshake: None,
        newest: None,
        last_read: Instant::now(),
    };
    from.until(&stream, shard, housekeeping, |f| f.handshake.is_some())
        .await?;
    let hs = from.handshake.unwrap_or(SlaveHandshake {
        sync_from_last_file: false,
        async_learner: false,
        broker_id: -1,
    });
    if role.is_slave() || !role.is_decided() {
        return Err("this broker is not the master".into());
    }
    let epoch_at_start = role.master_epoch();
    let epochs = r.epochs.borrow().clone();
    let max = shard.ctx.writer.max_phy_offset();
    runtime::timeout(
        housekeeping,
        stream.write_all(&encode_master_handshake(max, &epochs.entries())),
    )
    .await
    .ok_or_else(|| stalled(housekeeping))?
    .map_err(|e| format!("write error: {e}"))?;
    // The slave cuts its log to the point of agreement, then says where it stands.
    from.until(&stream, shard, housekeeping, |f| f.newest.is_some())
        .await?;
    let requested = from.newest.take().unwrap_or_default();
    let max = shard.ctx.writer.max_phy_offset();
    let min = shard.ctx.writer.min_phy_offset();
    let mut next = match requested {
        0 if hs.sync_from_last_file => max - max % segment,
        0 => min,
        r if r < 0 || r as u64 > max => {
            return Err(format!(
                "the slave reports offset {r}, past this master's end {max}"
            ))
        }
        r => r as u64,
    };
    if next < min && next != max {
        return Err(format!(
            "the slave asks for offset {next}, below this master's first byte {min}; the slave \
             needs a fresh store"
        ));
    }
    let peer = stream
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let slot = shard
        .ctx
        .slave_acks
        .attach(peer)
        .ok_or_else(|| format!("this master already serves {MAX_SLAVES} slaves"))?;
    slot.identify(hs.broker_id);
    slot.ack(requested as u64);
    slot.sending_from(next);
    tracing::info!(
        slave_id = hs.broker_id,
        from = next,
        epoch = epoch_at_start,
        "AutoSwitch HA transfer starts"
    );
    let mut last_write = Instant::now();
    // The master's end when the last transfer was sent: an acknowledgement of it means the
    // slave caught up.
    let mut sent_up_to = next;
    // The slave's newest acknowledgement.
    let mut acked = requested as u64;
    loop {
        if shard.is_stopping() {
            return Ok(());
        }
        if role.is_slave() || role.master_epoch() != epoch_at_start {
            return Err("this broker is no longer the master of the epoch it served".into());
        }
        from.poll(&stream)?;
        slot.tick();
        let max = shard.ctx.writer.max_phy_offset();
        if let Some(reported) = from.newest.take() {
            acked = slot.report(reported, max)?;
            if acked >= sent_up_to {
                slot.caught_up(now_ms() as u64);
                maybe_expand(shard, r, hs, acked, max);
            }
        }
        if next >= max && acked >= max && from.last_read.elapsed() < housekeeping {
            // Nothing to send and everything acknowledged: as caught up as it can be.
            slot.caught_up(now_ms() as u64);
        }
        let quiet = from.last_read.elapsed();
        if quiet > housekeeping {
            return Err(format!(
                "nothing read from the slave for {} ms",
                housekeeping.as_millis()
            ));
        }
        let confirm = confirm_offset(shard, max);
        if next < max {
            let Some(e) = epochs.find_epoch_entry_by_offset(next) else {
                return Err(format!("offset {next} is in no epoch of this master"));
            };
            let seg_end = (next / segment + 1) * segment;
            let end = max.min(seg_end).min(next + batch).min(e.end_offset);
            let len = (end - next) as u32;
            let header = TransferHeader {
                body_size: len as i32,
                offset: next as i64,
                epoch: e.epoch as i32,
                epoch_start_offset: e.start_offset as i64,
                confirm_offset: confirm as i64,
            };
            send_run(
                shard,
                &mut stream,
                &header.encode(),
                next,
                len,
                housekeeping,
            )
            .await?;
            next += len as u64;
            sent_up_to = max;
            slot.sent(len as u64);
            slot.sending_from(next);
            last_write = Instant::now();
            continue;
        }
        if last_write.elapsed() >= heartbeat {
            let e = epochs.last_entry();
            let header = TransferHeader {
                body_size: 0,
                offset: next as i64,
                epoch: e.map_or(0, |e| e.epoch as i32),
                epoch_start_offset: e.map_or(0, |e| e.start_offset as i64),
                confirm_offset: confirm as i64,
            };
            send_heartbeat(&mut stream, &header.encode(), housekeeping).await?;
            last_write = Instant::now();
        }
        let due = heartbeat
            .saturating_sub(last_write.elapsed())
            .min(housekeeping.saturating_sub(quiet));
        idle(&stream, watch, shard, next, due).await;
    }
}

/// Java's `computeConfirmOffset`: the lowest acknowledgement of the connected SyncStateSet
/// members, at most this log's end.
pub fn confirm_offset(shard: &Shard, max: u64) -> u64 {
    let (mask, _) = shard.ctx.role.sync_state_set();
    shard
        .ctx
        .slave_acks
        .covered_by(mask, shard.ctx.role.own_id())
        .min(max)
}

/// Java's `maybeExpandInSyncStateSet`: a slave that is not an async learner and has caught up
/// with the confirm offset joins the SyncStateSet (proposed to the controller).
fn maybe_expand(shard: &Rc<Shard>, r: &Rc<Replicas>, hs: SlaveHandshake, acked: u64, max: u64) {
    if hs.async_learner || hs.broker_id < 0 {
        return;
    }
    let (mask, _) = shard.ctx.role.sync_state_set();
    if from_mask(mask).any(|id| id == hs.broker_id) {
        return;
    }
    if acked < confirm_offset(shard, max) {
        return;
    }
    let (s, r) = (shard.clone(), r.clone());
    let id = hs.broker_id;
    runtime::spawn(async move { replicas::check_sync_state_set(&s, &r, Some(id)).await });
}
