//! One remoting request over one blocking std::net connection: connect with a timeout, write
//! the frame, read frames until the reply with the request's opaque, close.
//!
//! A connection per call keeps the client free of shared mutable state (any thread may call)
//! and of half-read streams after a timeout. Replies are bounded by the protocol's frame limit
//! before any byte is buffered for them; a reply that does not decode is `Malformed`, a server
//! that cannot be reached in time `Unreachable` with the io::Error kept. With a TLS client
//! configuration the connection is TLS (rustls over the same blocking socket); a failed
//! handshake is `Unreachable` too.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::AdminError;
use crate::constants::MAX_FRAME_LEN;
use crate::protocol::codes::response_code;
use crate::protocol::frame::split_frame;
use crate::protocol::RemotingCommand;

/// Resolves `host:port` (the first address it names).
fn resolve(addr: &str) -> Result<SocketAddr, AdminError> {
    let unreachable = |source| AdminError::Unreachable {
        addr: addr.to_owned(),
        source,
    };
    addr.to_socket_addrs()
        .map_err(unreachable)?
        .next()
        .ok_or_else(|| {
            unreachable(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the name resolves to no address",
            ))
        })
}

/// Sends `cmd` to `addr` and returns the reply, whatever its code; the whole exchange takes
/// at most about `timeout` per step (connect, each write, each read).
pub fn invoke(
    addr: &str,
    cmd: &RemotingCommand,
    timeout: Duration,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<RemotingCommand, AdminError> {
    let io_err = |source| AdminError::Unreachable {
        addr: addr.to_owned(),
        source,
    };
    let sa = resolve(addr)?;
    let mut out = BytesMut::new();
    cmd.encode(&mut out)
        .map_err(|e| AdminError::InvalidArgument(format!("request cannot be encoded: {e}")))?;
    let stream = TcpStream::connect_timeout(&sa, timeout).map_err(io_err)?;
    stream.set_read_timeout(Some(timeout)).map_err(io_err)?;
    stream.set_write_timeout(Some(timeout)).map_err(io_err)?;
    stream.set_nodelay(true).map_err(io_err)?;
    let Some(config) = tls else {
        return exchange(addr, stream, &out, cmd, timeout);
    };
    let name = crate::tls::server_name(sa);
    let conn = rustls::ClientConnection::new(config.clone(), name)
        .map_err(|e| io_err(std::io::Error::other(e)))?;
    exchange(
        addr,
        rustls::StreamOwned::new(conn, stream),
        &out,
        cmd,
        timeout,
    )
}

/// Writes the request `out` and reads frames until `cmd`'s reply.
fn exchange(
    addr: &str,
    mut stream: impl Read + Write,
    out: &[u8],
    cmd: &RemotingCommand,
    timeout: Duration,
) -> Result<RemotingCommand, AdminError> {
    let io_err = |source| AdminError::Unreachable {
        addr: addr.to_owned(),
        source,
    };
    let malformed = |reason: String| AdminError::Malformed {
        addr: addr.to_owned(),
        reason,
    };
    stream.write_all(out).map_err(io_err)?;
    stream.flush().map_err(io_err)?;
    let deadline = Instant::now() + timeout;
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        while let Some(frame) =
            split_frame(&mut buf, MAX_FRAME_LEN).map_err(|e| malformed(e.to_string()))?
        {
            let reply = RemotingCommand::decode(frame).map_err(|e| malformed(e.to_string()))?;
            if reply.is_response() && reply.opaque == cmd.opaque {
                return Ok(reply);
            }
        }
        if Instant::now() >= deadline {
            return Err(io_err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no reply within {} ms", timeout.as_millis()),
            )));
        }
        let n = stream.read(&mut chunk).map_err(io_err)?;
        if n == 0 {
            return Err(io_err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed before the reply",
            )));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// As [`invoke`], with any code but SUCCESS turned into `Refused` (`what` names the request).
pub fn invoke_ok(
    addr: &str,
    cmd: &RemotingCommand,
    what: &str,
    timeout: Duration,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<RemotingCommand, AdminError> {
    let reply = invoke(addr, cmd, timeout, tls)?;
    if reply.code == response_code::SUCCESS {
        return Ok(reply);
    }
    Err(refused(addr, what, &reply))
}

/// The `Refused` error for a reply.
pub fn refused(addr: &str, what: &str, reply: &RemotingCommand) -> AdminError {
    AdminError::Refused {
        addr: addr.to_owned(),
        what: what.to_owned(),
        code: reply.code,
        remark: reply.remark.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port nobody listens on is `Unreachable`, naming the address.
    #[test]
    fn closed_port_is_unreachable() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let cmd = RemotingCommand::new_request(106);
        let e = invoke(&addr, &cmd, Duration::from_secs(2), None).unwrap_err();
        assert!(e.is_unreachable(), "{e}");
        assert!(e.to_string().contains(&addr), "{e}");
    }

    /// A server that answers with another opaque first, then ours, gets ours; a server that
    /// sends garbage gets `Malformed`.
    #[test]
    fn waits_for_its_opaque_and_rejects_garbage() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            for garbage in [false, true] {
                let (mut s, _) = l.accept().unwrap();
                let mut buf = BytesMut::new();
                let mut chunk = [0u8; 4096];
                let req = loop {
                    if let Some(f) = split_frame(&mut buf, MAX_FRAME_LEN).unwrap() {
                        break RemotingCommand::decode(f).unwrap();
                    }
                    let n = s.read(&mut chunk).unwrap();
                    buf.extend_from_slice(&chunk[..n]);
                };
                let mut out = BytesMut::new();
                if garbage {
                    out.extend_from_slice(&[0, 0, 0, 6, 9, 0, 0, 0, 1, 2]);
                } else {
                    let mut other = RemotingCommand::response_for(&req, 0, None);
                    other.opaque = req.opaque.wrapping_add(1);
                    other.encode(&mut out).unwrap();
                    RemotingCommand::response_for(&req, 17, Some("no".into()))
                        .encode(&mut out)
                        .unwrap();
                }
                s.write_all(&out).unwrap();
            }
        });
        let cmd = RemotingCommand::new_request(105);
        let e = invoke_ok(&addr, &cmd, "route", Duration::from_secs(5), None).unwrap_err();
        match e {
            AdminError::Refused { code, remark, .. } => {
                assert_eq!((code, remark.as_str()), (17, "no"));
            }
            other => panic!("expected Refused, got {other}"),
        }
        let cmd = RemotingCommand::new_request(105);
        let e = invoke(&addr, &cmd, Duration::from_secs(5), None).unwrap_err();
        assert!(matches!(e, AdminError::Malformed { .. }), "{e}");
        server.join().unwrap();
    }
}
