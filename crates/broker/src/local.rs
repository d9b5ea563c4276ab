//! In-process requests, the way Java's proxy runs in "local" mode: a front end that speaks
//! another protocol (the gRPC endpoint) turns each call into the Remoting request a client
//! would send and runs it through the broker's own dispatch table on a shard, over a virtual
//! connection of that shard.
//!
//! A virtual connection is a connection entry like an accepted socket's (an id in the shard's
//! space, an outbox, a response table), so registrations by heartbeat, transaction check-backs
//! and `call_client` reach it; what the broker writes to its outbox goes to the front end, which
//! turns requests into its own protocol's commands and hands answers back with
//! [`complete_answer`]. Answers to the front end's requests come back decoded, zero-copy bodies
//! read out of the commit log, since the front end cannot sendfile them.

use std::net::SocketAddr;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};

use crate::auth::signature::ACCESS_KEY;
use crate::auth::table::{AuthRefusal, Proof};
use crate::auth_gate;
use crate::clients;
use crate::handler::BrokerHandler;
use crate::protocol::body::TopicRouteData;
use crate::protocol::RemotingCommand;
use crate::remoting::{ConnHandle, ConnInfo, Handler, Outbound, ResponseTable};
use crate::runtime::{mailbox, MailboxReceiver};
use crate::shard::Shard;

/// A virtual connection as its front end holds it: the connection's description for requests
/// and the receiving end of its outbox (what the broker sends the client).
pub struct VirtualConn {
    pub info: ConnInfo,
    pub outbox: MailboxReceiver<Outbound>,
}

/// Opens a virtual connection on `shard` for a client at `peer`; its outbox holds `capacity`
/// frames.
pub fn open_conn(shard: &Shard, peer: SocketAddr, capacity: usize) -> VirtualConn {
    let (tx, rx) = mailbox(capacity.max(1));
    let info = ConnInfo {
        id: shard.next_conn_id(),
        peer,
        outbox: tx.clone(),
    };
    let pending = shard.ctx.cfg.limits.max_pending_calls_per_connection;
    let conn = ConnHandle {
        outbox: tx,
        responses: Rc::new(ResponseTable::new(pending)),
    };
    shard.add_conn(info.id, conn);
    VirtualConn { info, outbox: rx }
}

/// Closes virtual connection `conn_id` of `shard`, as a socket's end closes one: requests
/// waiting on the client fail, and shard 0 forgets the producers and consumers it carried.
pub fn close_conn(shard: &Rc<Shard>, conn_id: u64) {
    if let Some(c) = shard.conn(conn_id) {
        c.responses.close();
    }
    shard.remove_conn(conn_id);
    let job = Box::new(move |s0: &Rc<Shard>| clients::connection_closed(s0, conn_id));
    if shard.mesh.post(0, job).is_err() {
        tracing::warn!(
            conn = conn_id,
            "shard 0 busy: a closed virtual connection's clients expire with their heartbeats"
        );
    }
}

/// Hands the client's answer to a request the broker sent on virtual connection `conn_id`;
/// false when nothing waits for it any more.
pub fn complete_answer(shard: &Shard, conn_id: u64, answer: RemotingCommand) -> bool {
    shard
        .conn(conn_id)
        .is_some_and(|c| c.responses.complete(answer))
}

/// Who a gRPC call says it comes from, and its proof: the user of its `authorization` header
/// and that header's signature over the call's `x-mq-date-time`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Signed {
    pub access_key: String,
    pub date_time: String,
    pub signature: String,
}

/// Why an in-process request has no answer.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The request was oneway, or its answer could not be encoded (logged where it happened).
    #[error("the broker gave no answer")]
    NoAnswer,
    #[error("the broker's answer does not decode: {0}")]
    Decode(String),
    #[error("the answer's body cannot be read from the commit log: {0}")]
    Read(std::io::Error),
    /// Access control refused the request: who it is (`authentication`) or what it may do.
    #[error("{reason}")]
    Refused {
        authentication: bool,
        reason: String,
    },
}

/// Runs `cmd` as if it came in on connection `conn` of `shard`, and returns the answer with
/// its whole body in memory. With access control on, the request is checked first as the user
/// `signed` names, proved by its signature.
pub async fn invoke(
    shard: Rc<Shard>,
    conn: ConnInfo,
    mut cmd: RemotingCommand,
    signed: Option<Signed>,
) -> Result<RemotingCommand, LocalError> {
    if shard.ctx.auth.authentication || shard.ctx.auth.authorization {
        let s = signed.unwrap_or_default();
        if !s.access_key.is_empty() {
            cmd.set_ext(ACCESS_KEY, &s.access_key);
        }
        let proof = Proof::Grpc {
            date_time: &s.date_time,
            signature: &s.signature,
        };
        if let Err(r) = auth_gate::admit_proved(&shard, conn.peer, &cmd, proof) {
            return Err(LocalError::Refused {
                authentication: matches!(r, AuthRefusal::Authentication(_)),
                reason: r.to_string(),
            });
        }
    }
    let handler = Rc::new(BrokerHandler {
        shard: shard.clone(),
        fast_port: false,
    });
    let out = handler
        .handle(conn, cmd)
        .await
        .ok_or(LocalError::NoAnswer)?;
    match out {
        Outbound::Frame(frame) => decode(frame),
        Outbound::ZeroCopy { prefix, ranges } => {
            let mut answer = decode(prefix)?;
            let size: usize = ranges.iter().map(|(_, n)| *n as usize).sum();
            let mut body = BytesMut::with_capacity(size);
            let mut reader = shard.reader();
            for (phy, n) in ranges {
                let range = reader
                    .locate(phy, n)
                    .map_err(|e| LocalError::Read(std::io::Error::other(e.to_string())))?;
                body.extend_from_slice(range.bytes());
            }
            answer.body = body.freeze();
            Ok(answer)
        }
        Outbound::Close => Err(LocalError::NoAnswer),
    }
}

/// Decodes an encoded frame (its 4-byte length first).
fn decode(frame: Bytes) -> Result<RemotingCommand, LocalError> {
    if frame.len() < 4 {
        return Err(LocalError::Decode(format!(
            "frame of {} bytes",
            frame.len()
        )));
    }
    RemotingCommand::decode(frame.slice(4..)).map_err(|e| LocalError::Decode(e.to_string()))
}

/// The topic's route from the first name server that answers (none: no name server knows it
/// or none answers).
pub async fn topic_route(shard: Rc<Shard>, topic: String) -> Option<TopicRouteData> {
    crate::assignment::route(&shard, &topic).await
}
