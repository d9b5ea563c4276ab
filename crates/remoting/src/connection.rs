//! One connection's life: read frames, run each request as a local task, write the outbox.
//!
//! Bounds (all in [`ConnLimits`], from the broker config): a frame larger than `max_frame_len`
//! closes the connection (as Java's decoder does); at most `max_inflight` requests run at once per
//! connection (reading pauses past it); the outbox (sized by the caller, larger than
//! `max_inflight`) is full only when the client stopped reading, and that client is disconnected
//! so its memory is freed. Reading pauses while the outbox is written, so a client that stops
//! reading early parks the writer instead: no outbox entry completing within
//! `write_stall_timeout` also disconnects. A connection with no traffic for `idle_timeout`
//! closes (RocketMQ's serverChannelMaxIdleTimeSeconds). Response frames the client sends answer
//! the server's own requests: they go to the connection's [`ResponseTable`], which this task
//! closes (failing whatever still waits) when the connection ends.
//!
//! TLS (`tls.server.mode`): before anything is read, a connection to a server in permissive or
//! enforcing mode is told apart by its first byte (0x16 opens a TLS handshake, as Java's
//! `HandshakeHandler` sniffs it); a TLS one shakes hands within `TLS_HANDSHAKE_TIMEOUT_MS`,
//! a plain one is served as before in permissive mode and closed unanswered in enforcing mode.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use futures_lite::FutureExt;

use super::{ConnInfo, FileRange, Handler, Outbound, ResponseTable};
use crate::constants::{
    IDLE_TIMEOUT_SECS, MAX_FRAME_LEN, MAX_INFLIGHT_PER_CONN, READ_CHUNK, READ_CHUNK_INITIAL,
    TLS_HANDSHAKE_TIMEOUT_MS, WRITE_COALESCE_BYTES, WRITE_STALL_TIMEOUT_MS,
};
use crate::protocol::frame::split_frame;
use crate::protocol::RemotingCommand;
use crate::runtime::net::Stream;
use crate::runtime::{self, MailboxReceiver, SendError};
use crate::tls::settings::TlsMode;
use crate::tls::TlsContext;

/// Limits applied to every connection.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    pub max_frame_len: usize,
    pub max_inflight: usize,
    pub idle_timeout: Duration,
    pub write_stall_timeout: Duration,
}

impl Default for ConnLimits {
    /// The constants: what the name server uses (the broker's come from its config).
    fn default() -> Self {
        ConnLimits {
            max_frame_len: MAX_FRAME_LEN,
            max_inflight: MAX_INFLIGHT_PER_CONN,
            idle_timeout: Duration::from_secs(IDLE_TIMEOUT_SECS),
            write_stall_timeout: Duration::from_millis(WRITE_STALL_TIMEOUT_MS),
        }
    }
}

/// Local state shared between the connection task and its request tasks (same shard).
struct ConnShared {
    alive: Cell<bool>,
    inflight: Cell<usize>,
    fd: i32,
}

impl ConnShared {
    /// Kills the socket so a connection task blocked on a write wakes with an error.
    fn abort(&self) {
        if self.alive.replace(false) {
            // SAFETY: the fd belongs to the live stream (alive was true, the stream is only
            // dropped after alive is cleared by the connection task).
            unsafe { libc::shutdown(self.fd, libc::SHUT_RDWR) };
        }
    }
}

enum Event {
    Read(std::io::Result<usize>),
    Out(Option<Outbound>),
    Tick,
}

/// Serves one accepted connection until it closes.
pub async fn serve<H: Handler>(
    mut stream: Stream,
    handler: Rc<H>,
    info: ConnInfo,
    outbox_rx: MailboxReceiver<Outbound>,
    responses: Rc<ResponseTable>,
    limits: ConnLimits,
    tls: TlsContext,
) {
    if let Err(reason) = negotiate(&mut stream, &tls, &info, limits).await {
        responses.close();
        tracing::debug!(conn = info.id, peer = %info.peer, reason = %reason, "connection closed");
        handler.closed(&info);
        return;
    }
    let shared = Rc::new(ConnShared {
        alive: Cell::new(true),
        inflight: Cell::new(0),
        fd: stream_fd(&stream),
    });
    // Buffers start small and grow only for connections that fill them: an idle connection
    // must cost little (a thousand of them used to hold 64 KiB of zeroed read chunk each).
    let mut rbuf = BytesMut::new();
    // Bytes asked of one read; doubles up to READ_CHUNK while reads fill it, halves while they
    // use under a quarter of it. Reads land in
    // `rbuf` itself, so request bodies are copied once (socket -> rbuf) before frames split off.
    let mut want = READ_CHUNK_INITIAL;
    // The last read filled its chunk, so the socket likely holds more: read it straight into
    // rbuf's spare capacity (`try_read_buf`), without zeroing `want` bytes first (a 64 KiB
    // memset per read was ~3 % of a shard under batch sends). Otherwise, and when that finds
    // nothing, read through glommio, which waits for the socket without blocking the core.
    let mut last_read_full = false;
    let mut last_activity = Instant::now();
    // One idle-check timer lives across loop turns (a new one per turn was a timer insert and
    // removal, and a clock read, per request); it is re-armed only when it fires.
    let new_tick = || {
        Box::pin(async {
            runtime::sleep(Duration::from_secs(1)).await;
            Event::Tick
        })
    };
    let mut tick_timer = new_tick();
    let reason = loop {
        let can_read = shared.inflight.get() < limits.max_inflight;
        let ev = {
            let out = async { Event::Out(outbox_rx.recv().await) };
            let tick = tick_timer.as_mut();
            let direct = if can_read && last_read_full {
                stream.try_read_buf(&mut rbuf, want)
            } else {
                None
            };
            if let Some(read) = direct {
                Event::Read(read)
            } else if can_read {
                let len = rbuf.len();
                rbuf.resize(len + want, 0);
                let ev = {
                    let read = async { Event::Read(stream.read(&mut rbuf[len..]).await) };
                    read.or(out).or(tick).await
                };
                let got = match &ev {
                    Event::Read(Ok(n)) => *n,
                    _ => 0,
                };
                rbuf.truncate(len + got);
                ev
            } else {
                out.or(tick).await
            }
        };
        match ev {
            Event::Read(Ok(0)) => break "peer closed".to_string(),
            Event::Read(Ok(n)) => {
                last_activity = Instant::now();
                last_read_full = n == want;
                if n == want && want < READ_CHUNK {
                    want = (want * 2).min(READ_CHUNK);
                } else if n < want / 4 && want > READ_CHUNK_INITIAL {
                    // Back down when reads stay small again (e.g. a fixed-rate producer after a
                    // burst): a read through glommio zeroes `want` bytes of rbuf first.
                    want = (want / 2).max(READ_CHUNK_INITIAL);
                }
                let frames =
                    dispatch_frames(&mut rbuf, &handler, &info, &shared, &responses, limits);
                if let Err(e) = frames {
                    break e;
                }
            }
            Event::Read(Err(e)) => break format!("read error: {e}"),
            Event::Out(None) => break "outbox closed".to_string(),
            Event::Out(Some(first)) => {
                // A peer that stops reading parks this task in a write; without a bound the idle
                // timer never runs and the connection (and its queued responses) live forever.
                // The bound is on progress, not on the whole drain: a long drain to a client that
                // reads slowly but steadily goes on, one entry not written for the timeout stops.
                let progress = Cell::new(Instant::now());
                let stalled = write_watchdog(&progress, limits.write_stall_timeout);
                let written = write_out(&mut stream, &*handler, first, &outbox_rx, &progress);
                if let Err(e) = written.or(stalled).await {
                    break e;
                }
                last_activity = progress.get();
            }
            Event::Tick => {
                tick_timer = new_tick();
                if last_activity.elapsed() > limits.idle_timeout {
                    break "idle timeout".to_string();
                }
            }
        }
        if !shared.alive.get() {
            break "aborted: client not reading its responses".to_string();
        }
    };
    shared.alive.set(false);
    responses.close();
    tracing::debug!(conn = info.id, peer = %info.peer, reason = %reason, "connection closed");
    handler.closed(&info);
}

/// What the server's TLS mode makes of a new connection: nothing in disabled mode (the plain
/// path, not even a peek); otherwise its first byte decides, and a TLS one shakes hands. An
/// error closes the connection; refusals and failed handshakes are logged with the peer.
async fn negotiate(
    stream: &mut Stream,
    tls: &TlsContext,
    info: &ConnInfo,
    limits: ConnLimits,
) -> Result<(), String> {
    let config = match (&tls.server, tls.mode) {
        (Some(c), TlsMode::Permissive | TlsMode::Enforcing) => c.clone(),
        _ => return Ok(()),
    };
    let handshake_timeout = Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS);
    // A permissive server's plain client may wait as long as any connection may idle.
    let wait = match tls.mode {
        TlsMode::Enforcing => handshake_timeout,
        _ => limits.idle_timeout,
    };
    let first = match runtime::timeout(wait, stream.first_byte()).await {
        None => return Err("no first byte before the timeout".into()),
        Some(Err(e)) => return Err(format!("read error: {e}")),
        Some(Ok(None)) => return Err("peer closed".into()),
        Some(Ok(Some(b))) => b,
    };
    if first != TLS_HANDSHAKE_RECORD {
        if tls.mode == TlsMode::Enforcing {
            tracing::warn!(conn = info.id, peer = %info.peer, first_byte = first, "plain connection refused: tls.server.mode=enforcing asks for TLS");
            return Err("not TLS, refused in enforcing mode".into());
        }
        return Ok(());
    }
    match runtime::timeout(handshake_timeout, stream.accept_tls(config)).await {
        Some(Ok(())) => Ok(()),
        Some(Err(e)) => {
            tracing::warn!(conn = info.id, peer = %info.peer, error = %e, "TLS handshake failed");
            Err(format!("TLS handshake failed: {e}"))
        }
        None => {
            tracing::warn!(conn = info.id, peer = %info.peer, timeout_ms = TLS_HANDSHAKE_TIMEOUT_MS, "TLS handshake timed out");
            Err("TLS handshake timed out".into())
        }
    }
}

/// The content type of a TLS handshake record: the first byte a TLS client sends.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

fn stream_fd(stream: &Stream) -> i32 {
    stream.raw_fd()
}

/// Splits and starts every complete frame in `rbuf`. An error closes the connection.
fn dispatch_frames<H: Handler>(
    rbuf: &mut BytesMut,
    handler: &Rc<H>,
    info: &ConnInfo,
    shared: &Rc<ConnShared>,
    responses: &ResponseTable,
    limits: ConnLimits,
) -> Result<(), String> {
    loop {
        let frame = match split_frame(rbuf, limits.max_frame_len) {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(()),
            Err(e) => {
                tracing::warn!(conn = info.id, peer = %info.peer, error = %e, "bad frame, closing");
                return Err(format!("bad frame: {e}"));
            }
        };
        let cmd = match RemotingCommand::decode(frame) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(conn = info.id, peer = %info.peer, error = %e, "undecodable command, closing");
                return Err(format!("bad command: {e}"));
            }
        };
        if cmd.is_response() {
            let opaque = cmd.opaque;
            if !responses.complete(cmd) {
                tracing::debug!(conn = info.id, peer = %info.peer, opaque, "answer nobody waits for (late or unasked), dropped");
            }
            continue;
        }
        if let Err(refusal) = handler.admit(info, &cmd) {
            if let Some(out) = refusal {
                push_out(info, shared, out);
            }
            continue;
        }
        shared.inflight.set(shared.inflight.get() + 1);
        let (h, i, s) = (handler.clone(), info.clone(), shared.clone());
        runtime::spawn(async move {
            let out = h.handle(i.clone(), cmd).await;
            s.inflight.set(s.inflight.get() - 1);
            if let Some(out) = out {
                push_out(&i, &s, out);
            }
        });
    }
}

/// Queues `out` on the connection's outbox; a client whose outbox is full does not read its
/// answers and is disconnected.
fn push_out(info: &ConnInfo, shared: &ConnShared, out: Outbound) {
    if !shared.alive.get() {
        return;
    }
    match info.outbox.try_send(out) {
        Ok(()) => {}
        Err(SendError::Full(_)) => {
            tracing::warn!(conn = info.id, peer = %info.peer, "outbox full, disconnecting a client that does not read");
            shared.abort();
        }
        Err(SendError::Closed(_)) => {}
    }
}

/// Resolves with an error once `progress` (the instant the last outbox entry was written) is
/// more than `timeout` old. One timer per drain in the common case: it re-arms only if a drain
/// outlives it while still making progress.
async fn write_watchdog(progress: &Cell<Instant>, timeout: Duration) -> Result<(), String> {
    loop {
        let since = progress.get().elapsed();
        if since >= timeout {
            return Err(format!(
                "write stalled for {} ms: client not reading its responses",
                since.as_millis()
            ));
        }
        runtime::sleep(timeout - since).await;
    }
}

/// Writes `first` and then everything else already queued, so one wake-up drains the outbox.
/// Consecutive frames (and the header of a zero-copy response after them) are gathered into one
/// buffer of up to `WRITE_COALESCE_BYTES` and written with one send; a lone frame is written
/// as it is, without a copy. `progress` is set to now after each write.
async fn write_out<H: Handler>(
    stream: &mut Stream,
    handler: &H,
    first: Outbound,
    outbox_rx: &MailboxReceiver<Outbound>,
    progress: &Cell<Instant>,
) -> Result<(), String> {
    let mut gathered = BytesMut::new();
    let mut next = Some(first);
    while let Some(out) = next.take() {
        let following = outbox_rx.try_recv();
        match out {
            Outbound::Frame(bytes) => {
                let more = matches!(
                    following,
                    Some(Outbound::Frame(_) | Outbound::ZeroCopy { .. })
                );
                if gathered.is_empty() && !more {
                    write(stream, &bytes, progress).await?;
                } else {
                    gathered.extend_from_slice(&bytes);
                    if !more || gathered.len() >= WRITE_COALESCE_BYTES {
                        write(stream, &gathered, progress).await?;
                        gathered.clear();
                    }
                }
            }
            Outbound::ZeroCopy { prefix, ranges } => {
                let head = if gathered.is_empty() {
                    &prefix[..]
                } else {
                    gathered.extend_from_slice(&prefix);
                    &gathered[..]
                };
                write_zero_copy(stream, handler, head, &coalesce(&ranges)).await?;
                gathered.clear();
                progress.set(Instant::now());
            }
            Outbound::Close => {
                // `gathered` is empty here: a frame followed by Close was written at once.
                return Err("closed by server".into());
            }
        }
        next = following;
    }
    Ok(())
}

/// Writes a zero-copy response: `head` (frames and the response header) and then the
/// commit-log `ranges`. The header is held back (MSG_MORE) until the body follows. One range is
/// one sendfile. Several ranges (records of one queue lie between other queues' in the commit
/// log) go through the shard's pipe, two syscalls whatever their number; if another response
/// holds the pipe, they go by one sendfile each under TCP_CORK, so they do not push a segment
/// apiece. Over TLS every range's mapped bytes are encrypted (through `splice_all`).
async fn write_zero_copy<H: Handler>(
    stream: &mut Stream,
    handler: &H,
    head: &[u8],
    ranges: &[(u64, u32)],
) -> Result<(), String> {
    let open = |&(phy, size): &(u64, u32)| {
        handler
            .open_range(phy, size)
            .map_err(|e| format!("cannot open commit log range {phy}+{size}: {e}"))
    };
    if ranges.is_empty() {
        return stream
            .write_all(head)
            .await
            .map_err(|e| format!("write error: {e}"));
    }
    if let ([one], false) = (ranges, stream.is_tls()) {
        let range = open(one)?;
        write_head(stream, head).await?;
        return send_range(stream, &range).await;
    }
    let sources = ranges.iter().map(open).collect::<Result<Vec<_>, _>>()?;
    write_head(stream, head).await?;
    let slices: Vec<&[u8]> = sources.iter().map(|s| s.bytes()).collect();
    let live = || sources.iter().all(FileRange::is_live);
    let spliced = stream
        .splice_all(&slices, &live)
        .await
        .map_err(|e| format!("splice error: {e}"))?;
    if spliced {
        return Ok(());
    }
    stream
        .set_cork(true)
        .map_err(|e| format!("TCP_CORK: {e}"))?;
    for s in &sources {
        send_range(stream, s).await?;
    }
    stream.set_cork(false).map_err(|e| format!("TCP_CORK: {e}"))
}

/// The header of a response whose body follows: held back (MSG_MORE) to leave with the body.
async fn write_head(stream: &mut Stream, head: &[u8]) -> Result<(), String> {
    stream
        .write_all_more(head)
        .await
        .map_err(|e| format!("write error: {e}"))
}

/// One commit-log range by sendfile.
async fn send_range(stream: &mut Stream, s: &impl FileRange) -> Result<(), String> {
    stream
        .sendfile_all(s.fd(), s.file_offset(), s.size() as usize, &|| s.is_live())
        .await
        .map_err(|e| format!("sendfile error: {e}"))
}

async fn write(stream: &mut Stream, bytes: &[u8], progress: &Cell<Instant>) -> Result<(), String> {
    stream
        .write_all(bytes)
        .await
        .map_err(|e| format!("write error: {e}"))?;
    progress.set(Instant::now());
    Ok(())
}

/// Merges ranges that follow each other in the commit log, so one sendfile covers them. Ranges
/// never merge across a segment boundary because the blank marker sits between them.
pub fn coalesce(ranges: &[(u64, u32)]) -> Vec<(u64, u32)> {
    let mut out: Vec<(u64, u32)> = Vec::with_capacity(ranges.len());
    for &(phy, size) in ranges {
        if let Some(last) = out.last_mut() {
            if last.0 + last.1 as u64 == phy && (last.1 as u64 + size as u64) <= u32::MAX as u64 {
                last.1 += size;
                continue;
            }
        }
        out.push((phy, size));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::coalesce;

    /// Adjacent records become one sendfile; a gap starts a new one.
    #[test]
    fn coalesces_adjacent_ranges() {
        let r = coalesce(&[(0, 10), (10, 5), (20, 1), (21, 2)]);
        assert_eq!(r, vec![(0, 15), (20, 3)]);
        assert!(coalesce(&[]).is_empty());
    }
}
