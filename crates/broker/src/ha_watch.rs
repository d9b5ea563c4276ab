//! What a master's HA connections (classic and AutoSwitch) share on shard 0: the wait for the
//! writer to publish more of the commit log ([`PublishWatch`], fed by one [`publish_hub`] task
//! that registers with the writer only while a connection waits), reading what a slave sent,
//! sending a run of the commit log by sendfile or a heartbeat with every write bounded, and
//! sleeping until there is something to do; and, for both sides, the link's TLS under
//! `tls.ha.enable` (the runs then go through TLS as copies, `runtime::net`).

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

use std::os::fd::AsRawFd;

use bytes::BytesMut;

use crate::runtime;
use crate::runtime::net::Stream;
use crate::shard::Shard;
use crate::writer::WriterSender;

/// The master's side of `tls.ha.enable`: a TLS handshake before anything else (no plain
/// fallback), bounded by `TLS_HANDSHAKE_TIMEOUT_MS`. Nothing without the key.
pub async fn accept_tls(shard: &Shard, stream: &mut Stream) -> Result<(), String> {
    let tls = &shard.ctx.tls;
    let (true, Some(config)) = (tls.ha, &tls.server) else {
        return Ok(());
    };
    let timeout = Duration::from_millis(crate::constants::TLS_HANDSHAKE_TIMEOUT_MS);
    match runtime::timeout(timeout, stream.accept_tls(config.clone())).await {
        Some(r) => r.map_err(|e| e.to_string()),
        None => Err("timed out".into()),
    }
}

/// A slave's connection to its master's HA port: TLS under `tls.ha.enable` (handshake bounded
/// by `TLS_HANDSHAKE_TIMEOUT_MS`), plain otherwise.
pub async fn connect(shard: &Shard, master: std::net::SocketAddr) -> std::io::Result<Stream> {
    let tls = &shard.ctx.tls;
    let (true, Some(config)) = (tls.ha, &tls.client) else {
        return Stream::connect(master).await;
    };
    let timeout = Duration::from_millis(crate::constants::TLS_HANDSHAKE_TIMEOUT_MS);
    let name = crate::tls::server_name(master);
    runtime::timeout(timeout, Stream::connect_tls(master, config.clone(), name))
        .await
        .unwrap_or_else(|| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            ))
        })
}

/// Shard 0's HA connections waiting for the writer to publish more of the commit log. The
/// writer wakes one waker per publish; [`publish_hub`] passes that on to every waiting
/// connection, and registers with the writer only while one waits.
#[derive(Default)]
pub struct PublishWatch {
    waiting: RefCell<Vec<Waker>>,
    /// The hub, parked while no connection waits.
    hub: Cell<Option<Waker>>,
}

impl PublishWatch {
    /// Ready once the published end of the commit log is past `offset`.
    pub fn past<'a>(
        &'a self,
        writer: &'a WriterSender,
        offset: u64,
    ) -> impl Future<Output = ()> + 'a {
        poll_fn(move |cx| {
            if writer.max_phy_offset() > offset {
                return Poll::Ready(());
            }
            let mut waiting = self.waiting.borrow_mut();
            if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
                waiting.push(cx.waker().clone());
            }
            drop(waiting);
            if let Some(hub) = self.hub.take() {
                hub.wake();
            }
            Poll::Pending
        })
    }
}

/// Wakes the waiting connections after every publish of the writer.
pub async fn publish_hub(shard: Rc<Shard>, watch: Rc<PublishWatch>) {
    let writer = &shard.ctx.writer;
    let mut seen = writer.max_phy_offset();
    loop {
        poll_fn(|cx| {
            if watch.waiting.borrow().is_empty() {
                watch.hub.set(Some(cx.waker().clone()));
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
        poll_fn(|cx| {
            writer.wake_on_publish(cx.waker());
            let now = writer.max_phy_offset();
            if now != seen {
                seen = now;
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        for w in watch.waiting.take() {
            w.wake();
        }
    }
}

pub fn stalled(housekeeping: Duration) -> String {
    format!("the slave read nothing for {} ms", housekeeping.as_millis())
}

/// Reads whatever the slave's socket holds now into `buf`; true when something arrived. `Err`
/// when the slave closed, failed, or sent more than `max` unread bytes.
pub fn read_available(stream: &Stream, buf: &mut BytesMut, max: usize) -> Result<bool, String> {
    let mut any = false;
    loop {
        match stream.try_read_buf(buf, 4096) {
            None => return Ok(any),
            Some(Ok(0)) => return Err("the slave closed the connection".into()),
            Some(Ok(_)) => {
                any = true;
                if buf.len() > max {
                    return Err("the slave sent more than the protocol's messages".into());
                }
            }
            Some(Err(e)) => return Err(format!("read error: {e}")),
        }
    }
}

/// Writes `header`, then the commit log's `len` bytes from `next` straight from the segment
/// file (sendfile). A slave that stops reading stalls these writes: it is dropped after
/// `housekeeping`, as one that stops reporting is.
pub async fn send_run(
    shard: &Shard,
    stream: &mut Stream,
    header: &[u8],
    next: u64,
    len: u32,
    housekeeping: Duration,
) -> Result<(), String> {
    let range = shard
        .reader()
        .locate(next, len)
        .map_err(|e| format!("cannot read the commit log at {next}+{len}: {e}"))?;
    runtime::timeout(housekeeping, async {
        stream.write_all_more(header).await?;
        stream
            .sendfile_all(range.file.as_raw_fd(), range.offset, len as usize, &|| {
                range.is_live()
            })
            .await
    })
    .await
    .ok_or_else(|| stalled(housekeeping))?
    .map_err(|e| format!("write error: {e}"))
}

/// Writes a heartbeat (`header` alone), bounded by `housekeeping`.
pub async fn send_heartbeat(
    stream: &mut Stream,
    header: &[u8],
    housekeeping: Duration,
) -> Result<(), String> {
    runtime::timeout(housekeeping, stream.write_all(header))
        .await
        .ok_or_else(|| stalled(housekeeping))?
        .map_err(|e| format!("write error: {e}"))
}

/// Sleeps until the slave sends something, the writer publishes past `next`, or `due` passes.
pub async fn idle(stream: &Stream, watch: &PublishWatch, shard: &Shard, next: u64, due: Duration) {
    let woken = futures_lite::future::or(
        async {
            // An error shows in the next read.
            let _ = stream.readable().await;
        },
        watch.past(&shard.ctx.writer, next),
    );
    let _ = runtime::timeout(due.max(Duration::from_millis(1)), woken).await;
}
