//! Sockets only (it knows nothing of the store: a zero-copy body is a [`FileRange`] its handler
//! opens): the per-connection read/write loop shared by the broker and the name server,
//! and a small request/response client (the broker's link to name servers).
//!
//! A connection is served by one task on the shard that accepted it. It reads frames, hands each
//! request to the [`Handler`] as its own local task (so a long-polled pull never holds up the
//! requests behind it), and writes whatever lands in the connection's bounded outbox: responses,
//! zero-copy pull bodies, and requests the broker sends to the client. The answers to those
//! requests come back on the same connection and are matched to their askers by the
//! connection's [`ResponseTable`]; [`ConnHandle`] is how a task on the connection's shard asks.

pub mod client;
pub mod connection;
pub mod response_table;
pub mod tls;

// The lower crates, under the names this crate's modules use for them.
use ringmq_protocol as protocol;
use ringmq_protocol::common;
use ringmq_protocol::constants;
use ringmq_runtime as runtime;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;

use bytes::Bytes;

use crate::protocol::RemotingCommand;
use crate::runtime::{MailboxSender, SendError};
pub use response_table::{InvokeError, ResponseTable};

/// What a connection task writes to its socket.
pub enum Outbound {
    /// A complete encoded frame.
    Frame(Bytes),
    /// A frame whose body is sent with sendfile: `prefix` already counts the body length;
    /// the body is the concatenation of the commit-log ranges `(phy_offset, size)`.
    ZeroCopy {
        prefix: Bytes,
        ranges: Vec<(u64, u32)>,
    },
    /// Close the connection after everything queued before it is written.
    Close,
}

/// The sending side of a connection's outbox; `Send`, so other shards can push to it.
pub type Outbox = MailboxSender<Outbound>;

/// What a handler knows about the connection a request came in on.
#[derive(Clone)]
pub struct ConnInfo {
    /// Process-unique connection id (shard number in the top bits).
    pub id: u64,
    pub peer: SocketAddr,
    pub outbox: Outbox,
}

/// A connection as its shard keeps it: where to write, and its requests awaiting answers.
/// Local to that shard (`Rc`); other shards reach it through the shard's mailbox.
#[derive(Clone)]
pub struct ConnHandle {
    pub outbox: Outbox,
    pub responses: Rc<ResponseTable>,
}

impl ConnHandle {
    /// Sends `request` to the client and waits up to `timeout` for its answer.
    pub async fn invoke(
        &self,
        request: RemotingCommand,
        timeout: std::time::Duration,
    ) -> Result<RemotingCommand, InvokeError> {
        self.responses.invoke(&self.outbox, request, timeout).await
    }

    /// Queues an encoded oneway request; nothing waits for an answer.
    pub fn send_oneway(&self, frame: Bytes) -> Result<(), InvokeError> {
        match self.outbox.try_send(Outbound::Frame(frame)) {
            Ok(()) => Ok(()),
            Err(SendError::Full(_)) => Err(InvokeError::OutboxFull),
            Err(SendError::Closed(_)) => Err(InvokeError::ConnectionClosed),
        }
    }
}

/// A boxed local future.
pub type LocalFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// Serves requests for one kind of server (broker or name server) on one shard.
pub trait Handler: 'static {
    /// Handles one request; the response (if any) is pushed to `conn.outbox` by the handler or
    /// returned here.
    fn handle(
        self: Rc<Self>,
        conn: ConnInfo,
        cmd: RemotingCommand,
    ) -> LocalFuture<Option<Outbound>>;

    /// Decides, before the request's task is spawned, whether the request may run at all
    /// (access control): `Err` carries what to answer instead (`None`: nothing, for a oneway
    /// request). Runs on the connection's task, once per request; a refused request is never
    /// handed to [`Handler::handle`].
    fn admit(&self, _conn: &ConnInfo, _cmd: &RemotingCommand) -> Result<(), Option<Outbound>> {
        Ok(())
    }

    /// The connection closed (peer gone, error, or shutdown).
    fn closed(self: Rc<Self>, conn: &ConnInfo);

    /// What a zero-copy body's ranges are opened as.
    type Range: FileRange;

    /// Opens a range `(phy_offset, size)` of an `Outbound::ZeroCopy` body: the handle keeps the
    /// file (and whatever maps it) open for the duration of the write.
    fn open_range(&self, phy_offset: u64, size: u32) -> std::io::Result<Self::Range>;
}

pub use crate::runtime::net::FileRange;

/// The range type of a handler that never sends a zero-copy body (the name server).
pub enum NoRange {}

impl FileRange for NoRange {
    fn fd(&self) -> std::os::fd::RawFd {
        match *self {}
    }
    fn file_offset(&self) -> u64 {
        match *self {}
    }
    fn size(&self) -> u32 {
        match *self {}
    }
    fn bytes(&self) -> &[u8] {
        match *self {}
    }
    fn is_live(&self) -> bool {
        match *self {}
    }
}

/// Encodes a command into a frame, logging (not panicking) if it cannot be encoded.
pub fn encode_frame(cmd: &RemotingCommand) -> Option<Outbound> {
    let mut buf = bytes::BytesMut::with_capacity(256 + cmd.body.len());
    match cmd.encode(&mut buf) {
        Ok(()) => Some(Outbound::Frame(buf.freeze())),
        Err(e) => {
            tracing::error!(code = cmd.code, error = %e, "cannot encode command");
            None
        }
    }
}
