//! Blocking socket plumbing of the load generator: frame reading into a reused buffer, a
//! cheap response-header scan for the hot path, and a synchronous RPC for admin calls.
//!
//! Called by the send, pull and route modules. Invariants: frames are read into one buffer
//! that is allocated once and only grows for a frame larger than itself, so reading costs no
//! allocation and never copies a message body; every blocking call has a timeout (the socket
//! read timeout, or the RPC deadline), so nothing here can hang a run.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::OnceLock;

use crate::link::Link;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ringmq::auth::signature::sign_request;
use ringmq::constants::MAX_FRAME_LEN;
use ringmq::protocol::frame::peek_frame_len;
use ringmq::protocol::RemotingCommand;

/// Reads beyond this much free space are not worth a syscall; compact first.
const MIN_READ_SPACE: usize = 16 * 1024;
/// Initial buffer: holds a full 256 KiB pull response plus slack.
const INITIAL_BUF: usize = 512 * 1024;

/// Connects with a timeout and TCP_NODELAY (latency runs would otherwise see Nagle delays);
/// with `--tls`, a TLS link (handshake done).
pub fn connect(addr: &str, timeout: Duration) -> Result<Link, String> {
    let sa = addr
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr} resolves to no address"))?;
    let s = TcpStream::connect_timeout(&sa, timeout)
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    s.set_nodelay(true)
        .map_err(|e| format!("set_nodelay on {addr}: {e}"))?;
    Link::open(s, timeout).map_err(|e| format!("TLS handshake with {addr}: {e}"))
}

/// Splits frames off a blocking stream. `next_frame` returns the bytes after the length
/// prefix, borrowed from the internal buffer until the next call.
pub struct FrameReader {
    stream: Link,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl FrameReader {
    /// `poll` is the socket read timeout: how often `next_frame` returns `Ok(None)` so the
    /// caller can look at its stop flags and deadlines.
    pub fn new(stream: impl Into<Link>, poll: Duration) -> io::Result<Self> {
        let stream = stream.into();
        stream.set_read_timeout(Some(poll))?;
        Ok(FrameReader {
            stream,
            buf: vec![0; INITIAL_BUF],
            start: 0,
            end: 0,
        })
    }

    /// A complete frame already in the buffer (no socket read), or `Ok(None)`.
    pub fn next_buffered(&mut self) -> Result<Option<&[u8]>, String> {
        Ok(match self.buffered()? {
            Ok(range) => Some(&self.buf[range]),
            Err(_) => None,
        })
    }

    /// Ok(range of a complete frame) or Err(bytes needed from the start of the partial frame).
    fn buffered(&mut self) -> Result<Result<std::ops::Range<usize>, usize>, String> {
        let avail = &self.buf[self.start..self.end];
        match peek_frame_len(avail, MAX_FRAME_LEN) {
            Ok(Some(len)) if avail.len() >= 4 + len => {
                let s = self.start + 4;
                self.start += 4 + len;
                Ok(Ok(s..s + len))
            }
            Ok(Some(len)) => Ok(Err(4 + len)),
            Ok(None) => Ok(Err(4)),
            Err(e) => Err(format!("bad frame from broker: {e}")),
        }
    }

    /// The next complete frame, or `Ok(None)` when the read timeout passed first.
    /// Errors: the peer closed the connection, a socket error, or a malformed length prefix.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, String> {
        let range = loop {
            let need = match self.buffered()? {
                Ok(range) => break range,
                Err(need) => need,
            };
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            }
            let room_after = self.buf.len() - self.start;
            if room_after < need || self.buf.len() - self.end < MIN_READ_SPACE {
                // Move the partial frame to the front; grow only for an oversized frame.
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
                if self.buf.len() < need + MIN_READ_SPACE {
                    self.buf.resize(need + MIN_READ_SPACE, 0);
                }
            }
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err("connection closed by the other side".to_owned()),
                Ok(n) => self.end += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read failed: {e}")),
            }
        };
        Ok(Some(&self.buf[range]))
    }
}

/// What the hot path needs from a response: no extFields map, no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderSummary {
    pub code: i32,
    pub opaque: i32,
    pub flag: i32,
}

/// Reads code, opaque and flag from a frame (bytes after the length prefix), JSON or ROCKETMQ
/// header. The JSON scan walks the top-level object only, skipping nested values and strings
/// with escapes, so a remark or ext field that mentions `"code":` cannot fool it.
pub fn scan_header(frame: &[u8]) -> Result<HeaderSummary, String> {
    let word = frame
        .get(..4)
        .ok_or("frame shorter than the header length word")?;
    let word = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
    let header_len = (word & 0x00FF_FFFF) as usize;
    let header = frame
        .get(4..4 + header_len)
        .ok_or("header length exceeds the frame")?;
    match word >> 24 {
        0 => scan_json(header),
        1 => {
            // code short, language byte, version short, opaque int, flag int.
            let h = header.get(..13).ok_or("short ROCKETMQ header")?;
            Ok(HeaderSummary {
                code: i16::from_be_bytes([h[0], h[1]]) as i32,
                opaque: i32::from_be_bytes([h[5], h[6], h[7], h[8]]),
                flag: i32::from_be_bytes([h[9], h[10], h[11], h[12]]),
            })
        }
        t => Err(format!("unknown serialize type {t}")),
    }
}

fn scan_json(h: &[u8]) -> Result<HeaderSummary, String> {
    let mut p = skip_ws(h, 0);
    if h.get(p) != Some(&b'{') {
        return Err("JSON header is not an object".to_owned());
    }
    p += 1;
    let (mut code, mut opaque, mut flag) = (None, 0, 0);
    loop {
        p = skip_ws(h, p);
        match h.get(p) {
            Some(b'}') => break,
            Some(b',') => {
                p += 1;
                continue;
            }
            Some(b'"') => {}
            _ => return Err("JSON header: expected a key".to_owned()),
        }
        let key_end = skip_string(h, p)?;
        let key = &h[p + 1..key_end - 1];
        p = skip_ws(h, key_end);
        if h.get(p) != Some(&b':') {
            return Err("JSON header: expected ':'".to_owned());
        }
        p = skip_ws(h, p + 1);
        let value_end = skip_value(h, p)?;
        let num = || -> Result<i32, String> {
            std::str::from_utf8(&h[p..value_end])
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| "JSON header: bad number".to_owned())
        };
        match key {
            b"code" => code = Some(num()?),
            b"opaque" => opaque = num()?,
            b"flag" => flag = num()?,
            _ => {}
        }
        p = value_end;
    }
    let code = code.ok_or("JSON header without code")?;
    Ok(HeaderSummary { code, opaque, flag })
}

fn skip_ws(h: &[u8], mut p: usize) -> usize {
    while h.get(p).is_some_and(|b| b.is_ascii_whitespace()) {
        p += 1;
    }
    p
}

/// `h[p]` is `"`; returns the index after the closing quote.
fn skip_string(h: &[u8], mut p: usize) -> Result<usize, String> {
    p += 1;
    while let Some(&b) = h.get(p) {
        match b {
            b'\\' => p += 2,
            b'"' => return Ok(p + 1),
            _ => p += 1,
        }
    }
    Err("JSON header: unterminated string".to_owned())
}

/// Returns the index after the value starting at `p` (string, object, array or scalar).
fn skip_value(h: &[u8], p: usize) -> Result<usize, String> {
    match h.get(p) {
        Some(b'"') => skip_string(h, p),
        Some(b'{') | Some(b'[') => {
            let mut depth = 0usize;
            let mut q = p;
            while let Some(&b) = h.get(q) {
                match b {
                    b'"' => {
                        q = skip_string(h, q)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(q + 1);
                        }
                    }
                    _ => {}
                }
                q += 1;
            }
            Err("JSON header: unterminated object".to_owned())
        }
        Some(_) => {
            let mut q = p;
            while h.get(q).is_some_and(|b| !matches!(b, b',' | b'}' | b']')) {
                q += 1;
            }
            Ok(q)
        }
        None => Err("JSON header: missing value".to_owned()),
    }
}

/// Decodes a full command from a frame, copying only the header (the body stays in the
/// reader's buffer; callers that need it slice `frame` themselves via `body_of`).
pub fn decode_header(frame: &[u8]) -> Result<RemotingCommand, String> {
    let header_end = body_start(frame)?;
    RemotingCommand::decode(Bytes::copy_from_slice(&frame[..header_end]))
        .map_err(|e| format!("bad response header: {e}"))
}

/// Offset of the body inside a frame.
pub fn body_start(frame: &[u8]) -> Result<usize, String> {
    let word = frame.get(..4).ok_or("frame shorter than 4 bytes")?;
    let header_len =
        (u32::from_be_bytes([word[0], word[1], word[2], word[3]]) & 0x00FF_FFFF) as usize;
    let end = 4 + header_len;
    if end > frame.len() {
        return Err("header length exceeds the frame".to_owned());
    }
    Ok(end)
}

/// A connection for occasional synchronous requests (routes, topic creation, offsets).
/// The credentials every [`RpcConn::call`] signs its request with (`--access-key`); set once.
static CALL_CREDENTIALS: OnceLock<Option<(String, String)>> = OnceLock::new();

/// Signs every later [`RpcConn::call`] with these credentials (none: unsigned). First call wins.
pub fn sign_calls_with(credentials: Option<(String, String)>) {
    let _ = CALL_CREDENTIALS.set(credentials);
}

pub struct RpcConn {
    pub addr: String,
    writer: Link,
    reader: FrameReader,
    timeout: Duration,
}

impl RpcConn {
    pub fn open(addr: &str, timeout: Duration) -> Result<Self, String> {
        let s = connect(addr, timeout)?;
        let writer = s.try_clone().map_err(|e| format!("clone socket: {e}"))?;
        writer
            .set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        let reader = FrameReader::new(s, Duration::from_millis(100)).map_err(|e| e.to_string())?;
        Ok(RpcConn {
            addr: addr.to_owned(),
            writer,
            reader,
            timeout,
        })
    }

    /// Sends `cmd` and waits for the response with the same opaque (other frames are skipped).
    pub fn call(&mut self, cmd: &RemotingCommand) -> Result<RemotingCommand, String> {
        let mut out = BytesMut::new();
        let signed;
        let cmd = match CALL_CREDENTIALS.get() {
            Some(Some((ak, sk))) => {
                let mut c = cmd.clone();
                sign_request(&mut c, ak, sk).map_err(|e| format!("sign: {e}"))?;
                signed = c;
                &signed
            }
            _ => cmd,
        };
        cmd.encode(&mut out)
            .map_err(|e| format!("encode request {}: {e}", cmd.code))?;
        self.writer
            .write_all(&out)
            .map_err(|e| format!("write to {}: {e}", self.addr))?;
        let deadline = Instant::now() + self.timeout;
        loop {
            if Instant::now() > deadline {
                return Err(format!(
                    "no response from {} to request code {} within {:?}",
                    self.addr, cmd.code, self.timeout
                ));
            }
            let Some(frame) = self
                .reader
                .next_frame()
                .map_err(|e| format!("{}: {e}", self.addr))?
            else {
                continue;
            };
            let h = scan_header(frame)?;
            if h.flag & 1 == 0 || h.opaque != cmd.opaque {
                continue;
            }
            let mut resp = decode_header(frame)?;
            let start = body_start(frame)?;
            resp.body = Bytes::copy_from_slice(&frame[start..]);
            return Ok(resp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_of(cmd: &RemotingCommand) -> Vec<u8> {
        let mut out = BytesMut::new();
        cmd.encode(&mut out).unwrap();
        out[4..].to_vec()
    }

    /// The scan agrees with the crate's encoder, including remarks and ext values that
    /// contain the field names, quotes and braces.
    #[test]
    fn scan_matches_encoder_with_hostile_strings() {
        let mut req = RemotingCommand::new_request(310);
        req.opaque = 1_234_567_890;
        let mut resp =
            RemotingCommand::response_for(&req, 17, Some("\"code\":5, {\"opaque\":1}".into()));
        resp.set_ext("code", "\"flag\":9}");
        resp.set_ext("x{", "[\\\"");
        let h = scan_header(&frame_of(&resp)).unwrap();
        assert_eq!(
            h,
            HeaderSummary {
                code: 17,
                opaque: 1_234_567_890,
                flag: 1
            }
        );
        let mut bin = resp.clone();
        bin.serialize_type = ringmq::protocol::SerializeType::RocketMq;
        assert_eq!(scan_header(&frame_of(&bin)).unwrap(), h);
    }

    /// Whitespace as other JSON writers emit it, negative numbers, and broken input.
    #[test]
    fn scan_tolerates_whitespace_and_rejects_garbage() {
        let json = br#" { "opaque" : -7 , "flag":1, "extFields": {"a":"}"}, "code" : 2 } "#;
        let mut f = (json.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(json);
        let h = scan_header(&f).unwrap();
        assert_eq!((h.code, h.opaque, h.flag), (2, -7, 1));
        for bad in [
            &b"[1]"[..],
            b"{\"code\":",
            b"{\"code\":x}",
            b"{\"opaque\":1}",
            b"{\"a",
        ] {
            let mut f = (bad.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(bad);
            assert!(
                scan_header(&f).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(scan_header(&[0, 0, 0, 9, b'{']).is_err());
    }
}
