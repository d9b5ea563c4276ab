//! gRPC clients as the endpoint knows them, by their `x-mq-client-id`: each has a virtual
//! connection on one shard (so the broker registers, checks back and asks it like a Remoting
//! client), its settings once received on Telemetry, and its open Telemetry stream (the only
//! way the broker can reach it). The table is bounded (`maxGrpcClients`), and a client with no
//! open stream that sends nothing for the idle time is closed, as Java's proxy drops settings
//! of vanished clients.
//!
//! The maps sit behind `std::sync::Mutex`es only because tonic's handlers must be `Send`: one
//! thread runs every handler, so the locks are never contended, and none is held across an
//! await.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use ringmq_broker::local::{self, Signed};
use ringmq_protocol::codes::language_code;
use ringmq_protocol::RemotingCommand;
use ringmq_remoting::ConnInfo;
use ringmq_remoting::Outbound;
use ringmq_runtime::MailboxReceiver;

use crate::gateway::Gateway;
use crate::pb::{self, Code};
use crate::status::GrpcError;

/// What every request says about its client (its metadata).
#[derive(Clone, Debug)]
pub struct ClientMeta {
    pub client_id: String,
    /// Remoting's language byte for the client's `x-mq-language` (unknown names: OTHER).
    pub language: u8,
    pub version: String,
    pub peer: SocketAddr,
}

impl ClientMeta {
    pub fn new(client_id: String, language: &str, version: String, peer: SocketAddr) -> Self {
        // The Node.js SDK says HTTP, .NET DOTNET, Go GO: Remoting's names, mostly.
        let language = match language {
            "GOLANG" => "GO",
            "DOT_NET" | "CSHARP" => "DOTNET",
            "NODEJS" => "NODE_JS",
            other => other,
        };
        ClientMeta {
            client_id,
            language: language_code(language),
            version,
            peer,
        }
    }
}

/// The sending side of a client's Telemetry stream.
pub type TelemetryTx = mpsc::Sender<Result<pb::TelemetryCommand, tonic::Status>>;

/// One gRPC client.
pub struct Client {
    pub client_id: String,
    /// The shard of its virtual connection, where its requests run.
    pub shard: usize,
    pub conn: ConnInfo,
    pub language: u8,
    state: Mutex<State>,
}

struct State {
    /// The identity the client's latest call proved (its `authorization` header).
    signed: Option<Signed>,
    settings: Option<pb::Settings>,
    telemetry: Option<TelemetryTx>,
    last_seen: Instant,
}

impl Client {
    fn state(&self) -> MutexGuard<'_, State> {
        // A handler that panicked ends the process (`panic = abort` policy); a poisoned lock
        // cannot be observed, but recover rather than unwind anyway.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn touch(&self) {
        self.state().last_seen = Instant::now();
    }

    pub fn set_signed(&self, s: Option<Signed>) {
        self.state().signed = s;
    }

    /// Runs `cmd` on the client's virtual connection, as the user its calls prove.
    pub async fn invoke(
        &self,
        gw: &Gateway,
        cmd: RemotingCommand,
    ) -> Result<RemotingCommand, GrpcError> {
        let signed = self.state().signed.clone();
        gw.invoke(self.shard, self.conn.clone(), cmd, signed).await
    }

    /// As `invoke`, any code but SUCCESS an error.
    pub async fn invoke_ok(
        &self,
        gw: &Gateway,
        cmd: RemotingCommand,
    ) -> Result<RemotingCommand, GrpcError> {
        let signed = self.state().signed.clone();
        gw.invoke_ok(self.shard, self.conn.clone(), cmd, signed)
            .await
    }

    pub fn settings(&self) -> Option<pb::Settings> {
        self.state().settings.clone()
    }

    pub fn set_settings(&self, s: pb::Settings) {
        self.state().settings = Some(s);
    }

    pub fn telemetry(&self) -> Option<TelemetryTx> {
        self.state().telemetry.clone()
    }

    pub fn set_telemetry(&self, tx: Option<TelemetryTx>) {
        self.state().telemetry = tx;
    }

    /// The client's settings, or the error a request that needs them gets.
    pub fn require_settings(&self) -> Result<pb::Settings, GrpcError> {
        self.settings().ok_or_else(|| {
            GrpcError::new(
                Code::UnrecognizedClientType,
                "no settings from this client yet: open Telemetry and send settings first",
            )
        })
    }
}

/// Every client, by id.
pub struct Clients {
    map: Mutex<HashMap<String, Arc<Client>>>,
    max: usize,
    outbox_capacity: usize,
    gateway: Gateway,
}

impl Clients {
    pub fn new(gateway: Gateway, max: usize, outbox_capacity: usize) -> Clients {
        Clients {
            map: Mutex::new(HashMap::new()),
            max,
            outbox_capacity,
            gateway,
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Client>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, client_id: &str) -> Option<Arc<Client>> {
        self.map().get(client_id).cloned()
    }

    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The client's entry, made (with its virtual connection) on first contact. The
    /// receiver of a new entry's outbox comes back for the caller to relay.
    pub async fn open(
        &self,
        meta: &ClientMeta,
    ) -> Result<(Arc<Client>, Option<MailboxReceiver<Outbound>>), GrpcError> {
        if let Some(s) = self.get(&meta.client_id) {
            s.touch();
            return Ok((s, None));
        }
        if self.len() >= self.max {
            return Err(GrpcError::new(
                Code::TooManyRequests,
                format!("too many gRPC clients (maxGrpcClients={})", self.max),
            ));
        }
        let shard = shard_for(&meta.client_id, self.gateway.shards());
        let (peer, cap) = (meta.peer, self.outbox_capacity);
        let vc = self
            .gateway
            .on(
                shard,
                move |s| async move { local::open_conn(&s, peer, cap) },
            )
            .await?;
        let entry = Arc::new(Client {
            client_id: meta.client_id.clone(),
            shard,
            conn: vc.info,
            language: meta.language,
            state: Mutex::new(State {
                signed: None,
                settings: None,
                telemetry: None,
                last_seen: Instant::now(),
            }),
        });
        let raced = {
            let mut map = self.map();
            match map.get(&meta.client_id) {
                Some(existing) => Some(existing.clone()),
                None => {
                    map.insert(meta.client_id.clone(), entry.clone());
                    None
                }
            }
        };
        match raced {
            // Another request of the same client opened it first: keep that one.
            Some(existing) => {
                self.close_conn(&entry);
                Ok((existing, None))
            }
            None => Ok((entry, Some(vc.outbox))),
        }
    }

    /// Forgets the client and closes its virtual connection.
    pub fn close(&self, client_id: &str) {
        let removed = self.map().remove(client_id);
        if let Some(s) = removed {
            s.set_telemetry(None);
            self.close_conn(&s);
        }
    }

    fn close_conn(&self, s: &Client) {
        let id = s.conn.id;
        if !self
            .gateway
            .post(s.shard, move |sh| local::close_conn(sh, id))
        {
            tracing::warn!(client = %s.client_id, "shard busy: virtual connection left to expire");
        }
    }

    /// Closes clients with no open Telemetry stream that sent nothing for `idle`.
    pub fn expire(&self, idle: Duration) -> usize {
        let now = Instant::now();
        let gone: Vec<String> = self
            .map()
            .iter()
            .filter(|(_, s)| {
                let st = s.state();
                st.telemetry.as_ref().is_none_or(|t| t.is_closed())
                    && now.duration_since(st.last_seen) > idle
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            self.close(id);
        }
        gone.len()
    }
}

/// The shard a client's virtual connection lives on.
fn shard_for(client_id: &str, shards: usize) -> usize {
    let h = client_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (h % shards.max(1) as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_map_to_remoting_codes() {
        let peer = "127.0.0.1:1".parse().unwrap();
        let m = |l| ClientMeta::new("c".into(), l, "5".into(), peer).language;
        assert_eq!(m("PYTHON"), 3);
        assert_eq!(m("JAVA"), 0);
        assert_eq!(m("GOLANG"), 9);
        assert_eq!(m("HTTP"), 8);
        assert_eq!(m("whatever"), 7);
    }

    #[test]
    fn clients_spread_over_shards() {
        assert_eq!(shard_for("a", 1), 0);
        let used: std::collections::HashSet<usize> =
            (0..64).map(|i| shard_for(&format!("c{i}"), 4)).collect();
        assert_eq!(used.len(), 4);
    }
}
