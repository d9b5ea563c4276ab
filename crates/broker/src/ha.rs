//! The master's side of classic HA replication (Java's `DefaultHAService` accept loop and
//! `DefaultHAConnection`): shard 0 listens on the HA port and serves each slave connection
//! from one task, in the wire format of `protocol::ha`, so a Java slave can follow a ringmq
//! master.
//!
//! A connection waits for the slave's first report, which says where to start: 0 (an empty
//! slave) means the start of the master's last segment, as in Java; an offset past the
//! master's end, or one retention has already removed, closes the connection with a warning.
//! From there it sends the commit log up to its published end, one transfer per segment run of
//! at most `haTransferBatchSize` bytes, the body by sendfile straight from the segment file (no
//! user-space copy), and an empty transfer as a heartbeat when idle for
//! `haSendHeartbeatInterval`. Reports are read between transfers; the newest is the slave's
//! acknowledged offset, which SYNC_MASTER sends wait for ([`group_transfer`]); a report past
//! what the master has is refused (a peer cannot make a send look replicated). A connection
//! silent for `haHousekeepingInterval` is closed. An idle connection sleeps until the writer
//! publishes more of the commit log or the slave reports, not on a timer.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use crate::group_transfer::{GroupCommitRequest, MAX_SLAVES};
use crate::ha_watch::{idle, publish_hub, read_available, send_heartbeat, send_run, PublishWatch};
use crate::protocol::ha::{encode_transfer_header, last_report, REPORT_LEN};
use crate::runtime;
use crate::runtime::net::{Listener, Stream};
use crate::shard::Shard;
/// How long a connection waits between looks for the slave's first report.
const FIRST_REPORT_POLL: Duration = Duration::from_millis(10);
/// Unread report bytes kept at most (Java's master buffers 1 MiB); a slave that floods reports
/// is cut off.
const REPORT_BUFFER_MAX: usize = 1 << 20;

/// Shard 0: accepts slave connections on the HA listener while the broker runs; in controller
/// mode they speak the AutoSwitch protocol (`ha_autoswitch`).
pub async fn serve(shard: Rc<Shard>, listener: Listener) {
    let watch = Rc::new(PublishWatch::default());
    let replicas = crate::replicas::Replicas::get();
    runtime::spawn(publish_hub(shard.clone(), watch.clone()));
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "HA accept failed");
                runtime::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if shard.is_stopping() {
            return;
        }
        let peer = stream
            .peer_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        tracing::info!(slave = %peer, "HA connection from a slave");
        let s = shard.clone();
        let w = watch.clone();
        let r = replicas.clone();
        runtime::spawn(async move {
            let mut stream = stream;
            if let Err(e) = crate::ha_watch::accept_tls(&s, &mut stream).await {
                tracing::warn!(slave = %peer, error = %e, "HA connection refused: TLS handshake failed");
                return;
            }
            let ended = match r {
                Some(r) => crate::ha_autoswitch::transfer(&s, stream, &w, &r).await,
                None => transfer(&s, stream, &w).await,
            };
            match ended {
                Ok(()) => tracing::info!(slave = %peer, "HA connection closed"),
                Err(e) => tracing::warn!(slave = %peer, error = %e, "HA connection closed"),
            }
        });
    }
}

/// Why a connection ended.
type Ended = Result<(), String>;

/// The slave's side of the conversation as read so far.
struct Reports {
    buf: BytesMut,
    /// The newest complete report, if any arrived.
    newest: Option<i64>,
    last_read: Instant,
}

impl Reports {
    /// Takes whatever the socket holds now. `Err` when the slave closed or flooded.
    fn poll(&mut self, stream: &Stream) -> Ended {
        if read_available(stream, &mut self.buf, REPORT_BUFFER_MAX)? {
            self.last_read = Instant::now();
        }
        if let Some((offset, used)) = last_report(&self.buf) {
            self.newest = Some(offset);
            let _ = self.buf.split_to(used);
        }
        Ok(())
    }
}

/// Serves one slave until it goes away, the broker stops, or the slave asks for what cannot be
/// sent.
async fn transfer(shard: &Rc<Shard>, mut stream: Stream, watch: &PublishWatch) -> Ended {
    let cfg = &shard.ctx.cfg;
    let segment = cfg.store.mapped_file_size_commit_log;
    let batch = cfg.ha.transfer_batch_size as u64;
    let heartbeat = Duration::from_millis(cfg.ha.heartbeat_interval_ms);
    let housekeeping = Duration::from_millis(cfg.ha.housekeeping_interval_ms);
    let mut reports = Reports {
        buf: BytesMut::with_capacity(REPORT_LEN * 16),
        newest: None,
        last_read: Instant::now(),
    };
    // The first report says where to start.
    let requested = loop {
        reports.poll(&stream)?;
        if let Some(r) = reports.newest {
            break r;
        }
        if shard.is_stopping() {
            return Ok(());
        }
        if reports.last_read.elapsed() > housekeeping {
            return Err("no report from the slave".into());
        }
        runtime::sleep(FIRST_REPORT_POLL).await;
    };
    let max = shard.ctx.writer.max_phy_offset();
    let min = shard.ctx.writer.min_phy_offset();
    let mut next = match requested {
        0 => max - max % segment,
        r if r < 0 || r as u64 > max => {
            return Err(format!(
                "the slave reports offset {r}, past this master's end {max}"
            ))
        }
        r => r as u64,
    };
    if next < min && next != max {
        return Err(format!(
            "the slave asks for offset {next}, below this master's first byte {min} (retention \
             removed it); the slave needs a fresh store"
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
    slot.ack(requested as u64);
    slot.sending_from(next);
    tracing::info!(
        from = next,
        slave_reported = requested,
        "HA transfer starts"
    );
    let mut last_write = Instant::now();
    loop {
        if shard.is_stopping() {
            return Ok(());
        }
        reports.poll(&stream)?;
        slot.tick();
        let max = shard.ctx.writer.max_phy_offset();
        if let Some(acked) = reports.newest.take() {
            slot.report(acked, max)?;
        }
        let quiet = reports.last_read.elapsed();
        if quiet > housekeeping {
            return Err(format!(
                "nothing read from the slave for {} ms",
                housekeeping.as_millis()
            ));
        }
        if next < max {
            let seg_end = (next / segment + 1) * segment;
            let len = (max.min(seg_end).min(next + batch) - next) as u32;
            let header = encode_transfer_header(next, len);
            send_run(shard, &mut stream, &header, next, len, housekeeping).await?;
            next += len as u64;
            slot.sent(len as u64);
            slot.sending_from(next);
            last_write = Instant::now();
            continue;
        }
        if last_write.elapsed() >= heartbeat {
            send_heartbeat(&mut stream, &encode_transfer_header(next, 0), housekeeping).await?;
            last_write = Instant::now();
        }
        // Sleep until the slave reports, the writer publishes past `next`, or a heartbeat or
        // the housekeeping deadline is due.
        let due = heartbeat
            .saturating_sub(last_write.elapsed())
            .min(housekeeping.saturating_sub(quiet));
        idle(&stream, watch, shard, next, due).await;
    }
}

/// Shard `i` of a SYNC_MASTER that waits for slaves: answers its waiting sends as the slaves'
/// acknowledgements cover them (one report answers every send it covers), or
/// FLUSH_SLAVE_TIMEOUT once `slaveTimeout` passed.
pub async fn group_transfer(shard: Rc<Shard>) {
    let acks = &shard.ctx.slave_acks;
    let requests = shard.group_transfer();
    while !shard.is_stopping() {
        let earliest = requests.resolve(covered(&shard), Instant::now());
        let woken = poll_fn(|cx| {
            let moved = acks.register(shard.id, cx.waker());
            let pushed = requests.register(cx.waker());
            if moved || pushed {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        });
        match earliest {
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                let _ = runtime::timeout(left, woken).await;
            }
            None => woken.await,
        }
    }
}

/// Whether a send waits for slaves: a SYNC_MASTER with `inSyncReplicas` above 1, or a master
/// in controller mode with `allAckInSyncStateSet`.
pub fn sends_wait_for_slaves(shard: &Shard) -> bool {
    let cfg = &shard.ctx.cfg;
    if cfg.controller_mode.enabled {
        cfg.controller_mode.all_ack_in_sync_state_set || cfg.ha.in_sync_replicas > 1
    } else {
        cfg.ha.needs_slave_acks()
    }
}

/// How far enough copies hold the commit log: with `allAckInSyncStateSet` (controller mode),
/// every member of the SyncStateSet; otherwise `inSyncReplicas` copies, the master's included.
fn covered(shard: &Shard) -> u64 {
    let cfg = &shard.ctx.cfg;
    let acks = &shard.ctx.slave_acks;
    if cfg.controller_mode.enabled && cfg.controller_mode.all_ack_in_sync_state_set {
        let (mask, _) = shard.ctx.role.sync_state_set();
        acks.covered_by(mask, shard.ctx.role.own_id())
    } else {
        acks.covered(cfg.ha.in_sync_replicas.saturating_sub(1))
    }
}

/// Waits until `inSyncReplicas` copies (the master's included) hold the commit log up to
/// `next_offset`, or `slaveTimeout`: false then. Answers at once when the slaves already do.
pub async fn wait_for_slaves(shard: &Shard, next_offset: u64) -> bool {
    let ha = &shard.ctx.cfg.ha;
    if covered(shard) >= next_offset {
        return true;
    }
    let (done, answer) = oneshot::channel();
    shard.group_transfer().push(GroupCommitRequest {
        next_offset,
        deadline: Instant::now() + Duration::from_millis(ha.slave_timeout_ms),
        done,
    });
    answer.await.unwrap_or(false)
}
