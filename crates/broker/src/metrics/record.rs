//! The figures a shard records for metrics and broker statistics, in a thread-local that only
//! that shard's thread touches: messages and bytes in per topic and message type (with a size
//! histogram), out per topic and consumer group, RPC latency per (request code, response code,
//! long polling, result), sends to a dead-letter queue, transaction commits and rollbacks (and
//! the half messages opened or closed otherwise), messages sent back for retry, and how long
//! topic and group creations took.
//!
//! Recording costs the message path a `RefCell` borrow and a hash lookup by the borrowed topic
//! (and group) `&str`; only the first record of a topic (or topic and group, or code pair) on a
//! shard allocates its entry. There is no lock and no atomic: the figures are read at scrape
//! time by the shard itself, which the scraping shard asks with `Mesh::call` (`snapshot`).
//! The maps grow with the topics and groups a shard has seen; entries are not removed when a
//! topic is deleted (Java's OpenTelemetry counters keep them as well), and `TOPICS_MAX`
//! entries bound each map: past it, a new topic's figures are not kept (counted in `dropped`).

use std::cell::{Cell, RefCell};

use hashbrown::HashMap;

/// Most entries kept in each of a shard's maps (Java's `metricsOtelCardinalityLimit` is 50,000
/// points over all instruments).
pub const TOPICS_MAX: usize = 10_000;

/// `rocketmq_rpc_latency`'s bucket bounds in ms (Java's `RemotingMetricsManager`).
pub const RPC_LATENCY_BOUNDS_MS: [f64; 9] =
    [1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0];
/// `rocketmq_message_size`'s bucket bounds in bytes (Java's `BrokerMetricsManager`).
pub const MESSAGE_SIZE_BOUNDS: [f64; 6] = [
    1024.0,
    4096.0,
    524_288.0,
    1_048_576.0,
    2_097_152.0,
    4_194_304.0,
];
/// The creation-time histograms' bucket bounds in ms (Java's `createTimeBuckets`).
pub const CREATE_TIME_BOUNDS_MS: [f64; 5] = [10.0, 100.0, 1000.0, 3000.0, 5000.0];
/// Slots of a histogram: the most bounds of any histogram here, plus +Inf.
pub const HIST_SLOTS: usize = 10;
const _: () = assert!(RPC_LATENCY_BOUNDS_MS.len() < HIST_SLOTS);
const _: () = assert!(MESSAGE_SIZE_BOUNDS.len() < HIST_SLOTS);
const _: () = assert!(CREATE_TIME_BOUNDS_MS.len() < HIST_SLOTS);

/// A histogram's counts per bucket (not cumulative; slot `bounds.len()` is +Inf) and its sum.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Hist {
    pub counts: [u64; HIST_SLOTS],
    pub sum: f64,
}

impl Hist {
    pub fn observe(&mut self, bounds: &[f64], v: f64) {
        let slot = bounds.iter().position(|b| v <= *b).unwrap_or(bounds.len());
        self.counts[slot] += 1;
        self.sum += v;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn add(&mut self, o: &Hist) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
        self.sum += o.sum;
    }
}

/// Java's `TopicMessageType` as the `message_type` label writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MessageType {
    Normal,
    Delay,
    Transaction,
}

impl MessageType {
    pub const ALL: [MessageType; 3] = [
        MessageType::Normal,
        MessageType::Delay,
        MessageType::Transaction,
    ];

    pub fn label(self) -> &'static str {
        match self {
            MessageType::Normal => "normal",
            MessageType::Delay => "delay",
            MessageType::Transaction => "transaction",
        }
    }
}

/// Messages and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Flow {
    pub msgs: u64,
    pub bytes: u64,
}

impl Flow {
    pub fn add(&mut self, o: &Flow) {
        self.msgs += o.msgs;
        self.bytes += o.bytes;
    }
}

/// One topic's messages in, per message type.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TopicIn {
    pub flow: [Flow; 3],
    pub sizes: [Hist; 3],
}

/// `rocketmq_rpc_latency`'s labels other than the constant `protocol_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RpcKey {
    pub request_code: i32,
    pub response_code: i32,
    pub long_polling: bool,
    pub result: RpcResult,
}

/// Java's `result` label values that ringmq produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RpcResult {
    Success,
    Oneway,
    ProcessRequestFailed,
}

impl RpcResult {
    pub fn label(self) -> &'static str {
        match self {
            RpcResult::Success => "success",
            RpcResult::Oneway => "oneway",
            RpcResult::ProcessRequestFailed => "process_request_failed",
        }
    }
}

/// What an UPDATE_AND_CREATE_TOPIC or UPDATE_AND_CREATE_SUBSCRIPTIONGROUP created or updated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Creation {
    Topic { system: bool },
    Group,
}

/// A shard's recorded figures.
#[derive(Default)]
pub struct ShardFigures {
    pub topics_in: HashMap<Box<str>, TopicIn>,
    /// topic -> consumer group -> messages and bytes pulled.
    pub out: HashMap<Box<str>, HashMap<Box<str>, Flow>>,
    pub rpc: HashMap<RpcKey, Hist>,
    /// Messages moved to `%DLQ%<group>`, by group.
    pub dlq: HashMap<Box<str>, u64>,
    /// Messages sent back for retry (CONSUMER_SEND_MSG_BACK), by `topic@group` (Java's
    /// SNDBCK_PUT_NUMS key).
    pub send_back: HashMap<Box<str>, u64>,
    /// POP messages redelivered to their retry topic, by `topic@group` (the topic popped).
    pub pop_retried: HashMap<Box<str>, u64>,
    /// Transaction decisions by the half message's topic: (commits, rollbacks).
    pub decisions: HashMap<Box<str>, (u64, u64)>,
    /// Half messages by real topic counted otherwise than by the sends and decisions above:
    /// those found open at start count up, those closed without a decision (discarded or
    /// skipped by the check) down.
    pub half_adjust: HashMap<Box<str>, i64>,
    /// Topic creation times by [succeeded][system topic], group creation times by
    /// [succeeded] (ms).
    pub topic_creates: [[Hist; 2]; 2],
    pub group_creates: [Hist; 2],
    /// Records not kept because a map was full.
    pub dropped: u64,
}

thread_local! {
    static FIGURES: RefCell<ShardFigures> = RefCell::new(ShardFigures::default());
    /// Set by a pull answered after parking, taken by the request's `RpcTimer` before the
    /// task yields again.
    static LONG_POLLED: Cell<bool> = const { Cell::new(false) };
}

/// The request being answered on this thread was parked (long polling).
pub fn mark_long_polled() {
    LONG_POLLED.with(|c| c.set(true));
}

/// Whether the request just answered was parked; clears the mark.
pub fn take_long_polled() -> bool {
    LONG_POLLED.with(|c| c.replace(false))
}

/// Runs `f` over this thread's figures (a shard's, or a test's).
pub fn with<R>(f: impl FnOnce(&mut ShardFigures) -> R) -> R {
    FIGURES.with(|x| f(&mut x.borrow_mut()))
}

/// The entry for `key`, created when there is room; `None` (and `dropped` counted) when not.
fn entry<'m, V: Default>(
    map: &'m mut HashMap<Box<str>, V>,
    dropped: &mut u64,
    key: &str,
) -> Option<&'m mut V> {
    if !map.contains_key(key) {
        if map.len() >= TOPICS_MAX {
            *dropped += 1;
            return None;
        }
        map.insert(key.into(), V::default());
    }
    map.get_mut(key)
}

/// A send stored messages in `topic`: `sizes` is their body sizes' histogram
/// (`MESSAGE_SIZE_BOUNDS`), built by the caller on its stack; its count and sum are the
/// messages and bytes.
pub fn message_in(topic: &str, kind: MessageType, sizes: &Hist) {
    with(|f| {
        let Some(t) = entry(&mut f.topics_in, &mut f.dropped, topic) else {
            return;
        };
        let i = kind as usize;
        t.flow[i].msgs += sizes.count();
        t.flow[i].bytes += sizes.sum as u64;
        t.sizes[i].add(sizes);
    })
}

/// A pull returned `msgs` messages of `bytes` bytes from `topic` to `group`.
pub fn message_out(topic: &str, group: &str, msgs: u64, bytes: u64) {
    with(|f| {
        let ShardFigures { out, dropped, .. } = f;
        let Some(groups) = entry(out, dropped, topic) else {
            return;
        };
        if let Some(g) = entry(groups, dropped, group) {
            g.msgs += msgs;
            g.bytes += bytes;
        }
    })
}

/// A request was answered (or, oneway, served) after `elapsed_ms`.
pub fn rpc(key: RpcKey, elapsed_ms: f64) {
    with(|f| {
        let len = f.rpc.len();
        match f.rpc.get_mut(&key) {
            Some(h) => h.observe(&RPC_LATENCY_BOUNDS_MS, elapsed_ms),
            None if len < TOPICS_MAX => {
                let mut h = Hist::default();
                h.observe(&RPC_LATENCY_BOUNDS_MS, elapsed_ms);
                f.rpc.insert(key, h);
            }
            None => f.dropped += 1,
        }
    })
}

/// A message of `group` went to its dead-letter queue.
pub fn sent_to_dlq(group: &str) {
    with(|f| {
        if let Some(n) = entry(&mut f.dlq, &mut f.dropped, group) {
            *n += 1;
        }
    })
}

/// A consumer sent a message of `topic_at_group` (`topic@group`) back for retry.
pub fn sent_back(topic_at_group: &str) {
    with(|f| {
        if let Some(n) = entry(&mut f.send_back, &mut f.dropped, topic_at_group) {
            *n += 1;
        }
    })
}

/// `n` popped messages of `topic_at_group` (`topic@group`) passed their invisible time
/// un-acked and were stored again in the group's retry topic.
pub fn pop_retried(topic_at_group: &str, n: u64) {
    with(|f| {
        if let Some(c) = entry(&mut f.pop_retried, &mut f.dropped, topic_at_group) {
            *c += n;
        }
    })
}

/// A transactional message of `topic` was committed (`commit`) or rolled back.
pub fn decision(topic: &str, commit: bool) {
    with(|f| {
        if let Some(d) = entry(&mut f.decisions, &mut f.dropped, topic) {
            if commit {
                d.0 += 1;
            } else {
                d.1 += 1;
            }
        }
    })
}

/// `delta` half messages of `topic` opened (found open at start) or closed without a decision.
pub fn half_adjust(topic: &str, delta: i64) {
    with(|f| {
        if let Some(n) = entry(&mut f.half_adjust, &mut f.dropped, topic) {
            *n += delta;
        }
    })
}

/// A topic or group creation request was answered after `elapsed_ms`.
pub fn created(what: Creation, succeeded: bool, elapsed_ms: f64) {
    with(|f| {
        let h = match what {
            Creation::Topic { system } => &mut f.topic_creates[succeeded as usize][system as usize],
            Creation::Group => &mut f.group_creates[succeeded as usize],
        };
        h.observe(&CREATE_TIME_BOUNDS_MS, elapsed_ms);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value lands in the first bucket whose bound it does not exceed, past the last in +Inf.
    #[test]
    fn histogram_buckets() {
        let mut h = Hist::default();
        for v in [0.5, 1.0, 1.5, 3000.0, 3000.5] {
            h.observe(&RPC_LATENCY_BOUNDS_MS, v);
        }
        assert_eq!(&h.counts[..10], &[2, 1, 0, 0, 0, 0, 0, 0, 1, 1]);
        assert_eq!(h.count(), 5);
        assert_eq!(h.sum, 6003.5);
    }

    /// Ins and outs add up per topic (and group) on this thread; a full map keeps its entries
    /// and counts what it could not keep.
    #[test]
    fn records_add_up_and_stay_bounded() {
        let mut h = Hist::default();
        h.observe(&MESSAGE_SIZE_BOUNDS, 10.0);
        h.observe(&MESSAGE_SIZE_BOUNDS, 2000.0);
        message_in("T", MessageType::Normal, &h);
        let mut h = Hist::default();
        h.observe(&MESSAGE_SIZE_BOUNDS, 5.0);
        message_in("T", MessageType::Delay, &h);
        message_out("T", "G", 2, 30);
        message_out("T", "G", 1, 5);
        sent_to_dlq("G");
        decision("T", true);
        decision("T", false);
        decision("T", false);
        with(|f| {
            let t = &f.topics_in["T"];
            assert_eq!(
                t.flow[0],
                Flow {
                    msgs: 2,
                    bytes: 2010
                }
            );
            assert_eq!(t.flow[1], Flow { msgs: 1, bytes: 5 });
            assert_eq!(t.sizes[0].counts[..2], [1, 1]);
            assert_eq!(f.out["T"]["G"], Flow { msgs: 3, bytes: 35 });
            assert_eq!(f.dlq["G"], 1);
            assert_eq!(f.decisions["T"], (1, 2));
            for i in 0..TOPICS_MAX {
                f.dlq.insert(format!("g{i}").into(), 0);
            }
        });
        sent_to_dlq("one-too-many");
        with(|f| {
            assert!(!f.dlq.contains_key("one-too-many"));
            assert_eq!(f.dropped, 1);
        });
    }
}
