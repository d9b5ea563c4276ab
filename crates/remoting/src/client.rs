//! A minimal request/response client over one connection, used by the broker to register with
//! name servers, to copy its master's metadata and to talk to controllers. One request at a
//! time; responses with another opaque are skipped. With `tls.enable` the connection is TLS
//! (`connect_with`).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;

use crate::constants::{MAX_FRAME_LEN, READ_CHUNK};
use crate::protocol::frame::split_frame;
use crate::protocol::RemotingCommand;
use crate::runtime::{self, net::Stream};
use crate::tls::TlsContext;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("i/o with {addr}: {source}")]
    Io {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("bad response from {addr}: {reason}")]
    Protocol { addr: SocketAddr, reason: String },
    #[error("timed out waiting for {addr}")]
    Timeout { addr: SocketAddr },
}

pub struct Client {
    addr: SocketAddr,
    stream: Stream,
    rbuf: BytesMut,
    next_opaque: i32,
}

impl Client {
    /// A plain connection (the controllers' port has no TLS).
    pub async fn connect(addr: SocketAddr, timeout: Duration) -> Result<Client, ClientError> {
        Self::connect_with(addr, timeout, &TlsContext::plain()).await
    }

    /// A connection that is TLS when `tls` has a client side (`tls.enable`), handshake included
    /// in `timeout`.
    pub async fn connect_with(
        addr: SocketAddr,
        timeout: Duration,
        tls: &TlsContext,
    ) -> Result<Client, ClientError> {
        let connect = async {
            match &tls.client {
                Some(c) => {
                    Stream::connect_tls(addr, c.clone(), crate::tls::server_name(addr)).await
                }
                None => Stream::connect(addr).await,
            }
        };
        let stream = runtime::timeout(timeout, connect)
            .await
            .ok_or(ClientError::Timeout { addr })?
            .map_err(|source| ClientError::Connect { addr, source })?;
        Ok(Client {
            addr,
            stream,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            next_opaque: 1,
        })
    }

    /// Sends `cmd` (its opaque is replaced) and waits for the matching response.
    pub async fn invoke(
        &mut self,
        mut cmd: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        let addr = self.addr;
        cmd.opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        let mut buf = BytesMut::new();
        cmd.encode(&mut buf).map_err(|e| ClientError::Protocol {
            addr,
            reason: e.to_string(),
        })?;
        self.stream
            .write_all(&buf)
            .await
            .map_err(|source| ClientError::Io { addr, source })?;
        runtime::timeout(timeout, self.read_response(cmd.opaque))
            .await
            .ok_or(ClientError::Timeout { addr })?
    }

    /// Sends `cmd` as a oneway request (its opaque is replaced); nothing is awaited back.
    pub async fn send_oneway(
        &mut self,
        mut cmd: RemotingCommand,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let addr = self.addr;
        cmd.opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        cmd.set_oneway();
        let mut buf = BytesMut::new();
        cmd.encode(&mut buf).map_err(|e| ClientError::Protocol {
            addr,
            reason: e.to_string(),
        })?;
        runtime::timeout(timeout, self.stream.write_all(&buf))
            .await
            .ok_or(ClientError::Timeout { addr })?
            .map_err(|source| ClientError::Io { addr, source })
    }

    async fn read_response(&mut self, opaque: i32) -> Result<RemotingCommand, ClientError> {
        let addr = self.addr;
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            while let Some(frame) =
                split_frame(&mut self.rbuf, MAX_FRAME_LEN).map_err(|e| ClientError::Protocol {
                    addr,
                    reason: e.to_string(),
                })?
            {
                let resp = RemotingCommand::decode(frame).map_err(|e| ClientError::Protocol {
                    addr,
                    reason: e.to_string(),
                })?;
                if resp.is_response() && resp.opaque == opaque {
                    return Ok(resp);
                }
            }
            let n = self
                .stream
                .read(&mut chunk)
                .await
                .map_err(|source| ClientError::Io { addr, source })?;
            if n == 0 {
                return Err(ClientError::Io {
                    addr,
                    source: std::io::ErrorKind::UnexpectedEof.into(),
                });
            }
            self.rbuf.extend_from_slice(&chunk[..n]);
        }
    }
}
