//! Controller-to-controller Raft traffic over the remoting protocol, on the same port brokers
//! use (as Java's DLedger controller does). openraft's AppendEntries, Vote and InstallSnapshot
//! travel as JSON bodies of requests with private codes (`RAFT_*`, outside Java's ranges); the
//! answer is a SUCCESS response whose JSON body is openraft's `Result`.
//!
//! `Network` is openraft's client factory: one `PeerClient` per target, holding one TCP
//! connection used one request at a time (openraft calls a client sequentially), reconnected
//! after an error. `serve` is the receiving side, called by the server for the private codes.

use bytes::BytesMut;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::net::TcpStream;

use super::{Node, NodeId, Raft, TypeConfig};
use crate::protocol::codes::response_code;
use crate::protocol::RemotingCommand;
use crate::wire::{read_command, write_command};

/// Private request codes for Raft between ringmq controllers (Java's codes stop at 200151).
pub const RAFT_APPEND_ENTRIES: i32 = 900_001;
pub const RAFT_VOTE: i32 = 900_002;
pub const RAFT_INSTALL_SNAPSHOT: i32 = 900_003;

pub fn is_raft_code(code: i32) -> bool {
    (RAFT_APPEND_ENTRIES..=RAFT_INSTALL_SNAPSHOT).contains(&code)
}

pub struct Network;

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> PeerClient {
        PeerClient {
            target,
            addr: node.addr.clone(),
            conn: None,
        }
    }
}

pub struct PeerClient {
    target: NodeId,
    addr: String,
    conn: Option<(TcpStream, BytesMut)>,
}

type RpcErr<E> = RPCError<NodeId, Node, E>;

impl PeerClient {
    async fn round_trip(
        &mut self,
        req: &RemotingCommand,
    ) -> Result<RemotingCommand, std::io::Error> {
        if self.conn.is_none() {
            let s = TcpStream::connect(&self.addr).await?;
            s.set_nodelay(true)?;
            self.conn = Some((s, BytesMut::new()));
        }
        let Some((s, buf)) = self.conn.as_mut() else {
            return Err(std::io::ErrorKind::NotConnected.into());
        };
        write_command(s, req).await?;
        loop {
            match read_command(s, buf).await? {
                Some(resp) if resp.is_response() && resp.opaque == req.opaque => return Ok(resp),
                Some(_) => continue,
                None => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            }
        }
    }

    async fn call<Q, P, E>(&mut self, code: i32, rpc: &Q, option: RPCOption) -> Result<P, RpcErr<E>>
    where
        Q: Serialize,
        P: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let body = serde_json::to_vec(rpc).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let req = RemotingCommand::new_request(code).with_body(body);
        let sent = tokio::time::timeout(option.hard_ttl(), self.round_trip(&req)).await;
        let resp = match sent {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                self.conn = None;
                return Err(RPCError::Unreachable(Unreachable::new(&e)));
            }
            Err(_) => {
                self.conn = None;
                let e = std::io::Error::new(std::io::ErrorKind::TimedOut, "raft rpc timed out");
                return Err(RPCError::Unreachable(Unreachable::new(&e)));
            }
        };
        if resp.code != response_code::SUCCESS {
            let e = std::io::Error::other(format!(
                "peer answered code {}: {}",
                resp.code,
                resp.remark.unwrap_or_default()
            ));
            return Err(RPCError::Network(NetworkError::new(&e)));
        }
        let result: Result<P, E> = serde_json::from_slice(&resp.body)
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr<RaftError<NodeId>>> {
        self.call(RAFT_APPEND_ENTRIES, &rpc, option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcErr<RaftError<NodeId, InstallSnapshotError>>>
    {
        self.call(RAFT_INSTALL_SNAPSHOT, &rpc, option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcErr<RaftError<NodeId>>> {
        self.call(RAFT_VOTE, &rpc, option).await
    }
}

fn json_answer<T: Serialize>(req: &RemotingCommand, value: &T) -> RemotingCommand {
    match serde_json::to_vec(value) {
        Ok(body) => {
            RemotingCommand::response_for(req, response_code::SUCCESS, None).with_body(body)
        }
        Err(e) => {
            RemotingCommand::response_for(req, response_code::SYSTEM_ERROR, Some(e.to_string()))
        }
    }
}

fn bad_body(req: &RemotingCommand, e: serde_json::Error) -> RemotingCommand {
    let remark = format!("undecodable raft body: {e}");
    RemotingCommand::response_for(req, response_code::SYSTEM_ERROR, Some(remark))
}

/// Answers one private Raft request from a peer controller.
pub async fn serve(raft: &Raft, req: &RemotingCommand) -> RemotingCommand {
    match req.code {
        RAFT_APPEND_ENTRIES => match serde_json::from_slice(&req.body) {
            Ok(rpc) => json_answer(req, &raft.append_entries(rpc).await),
            Err(e) => bad_body(req, e),
        },
        RAFT_VOTE => match serde_json::from_slice(&req.body) {
            Ok(rpc) => json_answer(req, &raft.vote(rpc).await),
            Err(e) => bad_body(req, e),
        },
        RAFT_INSTALL_SNAPSHOT => match serde_json::from_slice(&req.body) {
            Ok(rpc) => json_answer(req, &raft.install_snapshot(rpc).await),
            Err(e) => bad_body(req, e),
        },
        other => RemotingCommand::response_for(
            req,
            response_code::REQUEST_CODE_NOT_SUPPORTED,
            Some(format!("request code {other} not supported")),
        ),
    }
}
