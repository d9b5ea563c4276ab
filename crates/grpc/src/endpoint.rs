//! What every RPC handler shares: the way onto the shards, the clients, the configuration,
//! and the transactions sent through this endpoint (their offsets, which EndTransaction
//! needs and a gRPC client does not carry).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::clients::Clients;
use crate::questions::Questions;
use crate::renewals::Renewals;
use crate::status::GrpcError;
use ringmq_protocol::body::TopicConfig;

use crate::convert::SendLimits;
use crate::gateway::Gateway;

/// How the endpoint is set up.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// This broker's name (routes, receipt handles).
    pub broker_name: String,
    /// The address routes give clients for this broker's gRPC endpoint.
    pub advertised: SocketAddr,
    pub limits: SendLimits,
    /// At most this many clients at once.
    pub max_clients: usize,
    /// A client with no Telemetry stream that sends nothing for this long is forgotten.
    pub client_idle: Duration,
    /// Frames the broker may queue for one client (its virtual connection's outbox).
    pub outbox_capacity: usize,
    /// `enableTopicMessageTypeCheck`.
    pub check_message_type: bool,
    /// Push consumers' renewed receives (`defaultInvisibleTimeMills`, `renewAheadTimeMillis`,
    /// `renewSchedulePeriodMillis`, `renewMaxTimeMillis`), ms.
    pub renew: RenewConfig,
}

/// How push consumers' messages are renewed, ms.
#[derive(Clone, Copy, Debug)]
pub struct RenewConfig {
    pub invisible_ms: i64,
    pub ahead_ms: i64,
    pub period_ms: i64,
    pub max_ms: i64,
}

/// One transaction sent through this endpoint, as EndTransaction needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransactionData {
    pub tran_state_table_offset: i64,
    pub commit_log_offset: i64,
}

/// Transactions by (producer group, transaction id), bounded and expiring after
/// `transactionDataExpireMillis` as Java's `TransactionDataManager`.
pub struct Transactions {
    inner: Mutex<TxTable>,
    max: usize,
    ttl: Duration,
}

#[derive(Default)]
struct TxTable {
    map: HashMap<(String, String), (TransactionData, Instant)>,
    order: VecDeque<((String, String), Instant)>,
}

impl Transactions {
    pub fn new(max: usize, ttl: Duration) -> Transactions {
        Transactions {
            inner: Mutex::new(TxTable::default()),
            max,
            ttl,
        }
    }

    pub fn put(&self, group: &str, tx_id: &str, data: TransactionData) {
        let mut t = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let key = (group.to_string(), tx_id.to_string());
        t.map.insert(key.clone(), (data, now));
        t.order.push_back((key, now));
        while t.order.len() > self.max
            || t.order
                .front()
                .is_some_and(|(_, at)| now.duration_since(*at) > self.ttl)
        {
            let Some((k, at)) = t.order.pop_front() else {
                break;
            };
            // Only the entry this queue slot put there (a later put of the key stays).
            if t.map.get(&k).is_some_and(|(_, put)| *put == at) {
                t.map.remove(&k);
            }
        }
    }

    pub fn get(&self, group: &str, tx_id: &str) -> Option<TransactionData> {
        let t = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (data, at) = t.map.get(&(group.to_string(), tx_id.to_string()))?;
        (at.elapsed() <= self.ttl).then_some(*data)
    }
}

/// Topic configs as the shards last published them, kept for `TOPIC_CACHE_TTL` so a send does
/// not ask a shard first; at most `TOPIC_CACHE_MAX` topics (a full cache starts over).
const TOPIC_CACHE_TTL: Duration = Duration::from_secs(1);
const TOPIC_CACHE_MAX: usize = 4096;

/// The shared state of every handler.
pub struct Endpoint {
    pub gateway: Gateway,
    pub clients: Clients,
    pub cfg: EndpointConfig,
    pub transactions: Transactions,
    /// Push consumers' messages kept invisible while their clients hold them.
    pub renewals: Renewals,
    /// The broker's questions (307, 309) waiting for clients' answers.
    pub questions: Questions,
    round_robin: AtomicU64,
    topics: Mutex<HashMap<String, (Option<TopicConfig>, Instant)>>,
}

impl Endpoint {
    pub fn new(gateway: Gateway, cfg: EndpointConfig) -> Arc<Endpoint> {
        Arc::new(Endpoint {
            clients: Clients::new(gateway.clone(), cfg.max_clients, cfg.outbox_capacity),
            gateway,
            transactions: Transactions::new(100_000, Duration::from_secs(30)),
            round_robin: AtomicU64::new(0),
            renewals: Renewals::default(),
            questions: Questions::default(),
            topics: Mutex::new(HashMap::new()),
            cfg,
        })
    }

    /// The topic's config as shard `shard` knows it, at most `TOPIC_CACHE_TTL` old (None: no
    /// such topic).
    pub async fn topic_config(
        &self,
        shard: usize,
        topic: &str,
    ) -> Result<Option<TopicConfig>, GrpcError> {
        {
            let cache = self.topics.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((c, at)) = cache.get(topic) {
                if at.elapsed() < TOPIC_CACHE_TTL {
                    return Ok(c.clone());
                }
            }
        }
        let t = topic.to_string();
        let c = self
            .gateway
            .on(shard, move |sh| async move { sh.topics().get(&t).cloned() })
            .await?;
        let mut cache = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= TOPIC_CACHE_MAX {
            cache.clear();
        }
        cache.insert(topic.to_string(), (c.clone(), Instant::now()));
        Ok(c)
    }

    /// The next number of the round robin over queues.
    pub fn next_round_robin(&self) -> u64 {
        self.round_robin.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactions_expire_and_stay_bounded() {
        let t = Transactions::new(2, Duration::from_secs(30));
        let d = |o| TransactionData {
            tran_state_table_offset: o,
            commit_log_offset: o,
        };
        t.put("g", "a", d(1));
        t.put("g", "b", d(2));
        t.put("g", "c", d(3));
        assert_eq!(t.get("g", "a"), None);
        assert_eq!(t.get("g", "c"), Some(d(3)));
        let t = Transactions::new(10, Duration::ZERO);
        t.put("g", "a", d(1));
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(t.get("g", "a"), None);
    }
}
