//! Support for tests, the crash-test driver and benches: build records, append and wait for
//! the reply, collect dispatched units. Not used by the broker itself.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use crossbeam_channel::bounded;

use super::{
    AppendOutcome, AppendRecord, AppendRequest, CqTruncate, DispatchRun, DispatchUnit, Dispatcher,
    ReplyTo, ShardReply, WriterSender,
};
use crate::protocol::message::{encode, encode_without_body, MessageToStore};
use crate::{ConsumeQueue, CqCutFiles, StoreError};

/// The message of the test records: fixed hosts and timestamps, no flags.
fn test_message<'a>(
    topic: &'a str,
    queue_id: u32,
    body: &'a [u8],
    properties: &'a str,
) -> MessageToStore<'a> {
    let host: SocketAddr = "127.0.0.1:10911".parse().expect("literal address");
    MessageToStore {
        topic,
        queue_id: queue_id as i32,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1,
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties,
    }
}

/// An encoded record for `topic`/`queue_id` with this body and properties.
pub fn record(topic: &str, queue_id: u32, body: &[u8], properties: &str) -> AppendRecord {
    let mut bytes = BytesMut::new();
    encode(&test_message(topic, queue_id, body, properties), &mut bytes)
        .expect("test record within limits");
    // The tags code the send path and recovery give such a record (default delay levels).
    let tags_code = crate::tags_code::of_record(topic, properties, &crate::DelayLevels::default());
    AppendRecord::whole(
        Some(topic.into()),
        queue_id,
        tags_code,
        crate::writer::IndexKeys::None,
        true,
        bytes,
    )
}

/// As `record`, with the body kept apart (as the send path keeps it in the received frame).
pub fn record_split(topic: &str, queue_id: u32, body: &[u8], properties: &str) -> AppendRecord {
    let mut bytes = BytesMut::new();
    let at = encode_without_body(&test_message(topic, queue_id, body, properties), &mut bytes)
        .expect("test record within limits");
    AppendRecord {
        bytes,
        body: bytes::Bytes::copy_from_slice(body),
        body_at: at as u32,
        replicated: false,
        ..record(topic, queue_id, b"", "")
    }
}

/// Appends and blocks the calling thread until the reply (spins on a full inbox).
pub fn append_wait(
    w: &WriterSender,
    records: Vec<AppendRecord>,
    wait_flush: bool,
) -> Result<AppendOutcome, StoreError> {
    let (tx, rx) = bounded(1);
    let mut req = AppendRequest {
        records,
        wait_flush,
        reply: ReplyTo::Call(Box::new(move |r| {
            // The waiter may have given up; nothing to do then.
            let _ignored = tx.send(r);
        })),
    };
    loop {
        match w.try_append(req) {
            Ok(()) => break,
            Err(back) => {
                req = back;
                std::thread::yield_now();
            }
        }
    }
    rx.recv()
        .unwrap_or_else(|_| Err(StoreError::NotWritable("writer stopped".into())))
}

/// Collects every dispatched unit (shared with the test).
#[derive(Clone, Default)]
pub struct CollectingDispatcher(pub Arc<Mutex<Vec<DispatchUnit>>>);

/// Shard replies reaching a dispatcher without shards: a test bug, said loudly.
fn no_shards(replies: &[ShardReply]) {
    assert!(
        replies.is_empty(),
        "a test dispatcher got replies for shards it does not have"
    );
}

impl Dispatcher for CollectingDispatcher {
    fn complete(&mut self, runs: Vec<DispatchRun>, replies: Vec<ShardReply>) {
        no_shards(&replies);
        let mut all = self.0.lock().expect("collector lock");
        for r in runs {
            all.extend(r.into_units());
        }
    }
    /// Forgets the units at or past the cut, as a consume queue does.
    fn truncate(&mut self, cut: CqTruncate) {
        let mut all = self.0.lock().expect("collector lock");
        all.retain(|u| u.unit.phy_offset < cut.phy_offset);
        cut.answer(Ok(CqCutFiles::default()));
    }
    fn barrier(&mut self, reply: ShardReply) {
        no_shards(&[reply]);
    }
}

/// Drops every unit.
pub struct NullDispatcher;

impl Dispatcher for NullDispatcher {
    fn complete(&mut self, _runs: Vec<DispatchRun>, replies: Vec<ShardReply>) {
        no_shards(&replies);
    }
    fn barrier(&mut self, reply: ShardReply) {
        no_shards(&[reply]);
    }
    fn truncate(&mut self, cut: CqTruncate) {
        cut.answer(Ok(CqCutFiles::default()));
    }
}

/// (min offset, max offset, max phy offset) of each queue a `CqDispatcher` holds, as of its
/// last dispatch or truncation.
pub type CqBounds = Arc<Mutex<HashMap<(String, u32), (u64, u64, Option<u64>)>>>;

/// Applies units to consume queues the way an owner shard would (panics on I/O errors: tests).
pub struct CqDispatcher {
    root: PathBuf,
    cq_file_size: u64,
    cqs: HashMap<(String, u32), ConsumeQueue>,
    bounds: CqBounds,
}

impl CqDispatcher {
    pub fn new(root: PathBuf, cq_file_size: u64, cqs: Vec<ConsumeQueue>) -> Self {
        let cqs = cqs
            .into_iter()
            .map(|c| ((c.topic().to_string(), c.queue_id()), c))
            .collect();
        let d = CqDispatcher {
            root,
            cq_file_size,
            cqs,
            bounds: CqBounds::default(),
        };
        d.publish_bounds();
        d
    }

    /// The queues' bounds, kept up to date by the writer's thread (tests read them).
    pub fn bounds(&self) -> CqBounds {
        self.bounds.clone()
    }

    fn publish_bounds(&self) {
        let mut b = self.bounds.lock().expect("bounds lock");
        for (k, cq) in &self.cqs {
            b.insert(
                k.clone(),
                (cq.min_offset(), cq.max_offset(), cq.max_phy_offset()),
            );
        }
    }
}

impl Dispatcher for CqDispatcher {
    fn barrier(&mut self, reply: ShardReply) {
        no_shards(&[reply]);
    }
    fn complete(&mut self, runs: Vec<DispatchRun>, replies: Vec<ShardReply>) {
        no_shards(&replies);
        for u in runs.into_iter().flat_map(DispatchRun::into_units) {
            let key = (u.topic.to_string(), u.queue_id);
            if !self.cqs.contains_key(&key) {
                let cq = ConsumeQueue::open(&self.root, &u.topic, u.queue_id, self.cq_file_size)
                    .expect("open consume queue");
                self.cqs.insert(key.clone(), cq);
            }
            let cq = self.cqs.get_mut(&key).expect("inserted above");
            cq.put(u.queue_offset, u.unit).expect("consume queue put");
        }
        self.publish_bounds();
    }

    fn truncate(&mut self, cut: CqTruncate) {
        let mut files = CqCutFiles::default();
        for cq in self.cqs.values_mut() {
            let c = cq.truncate_from(cut.phy_offset);
            files.remove.extend(c.remove);
            files.sync.extend(c.sync);
        }
        self.publish_bounds();
        cut.answer(Ok(files));
    }
}

/// The crash test's record body for a seed: length 1..=3000, bytes from a xorshift stream. The
/// driver (store_torture) writes it and tests/store/crash.rs checks recovered records against
/// it.
pub fn seeded_body(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let len = 1 + (next() % 3000) as usize;
    (0..len).map(|_| next() as u8).collect()
}

/// A record of this topic makes the writer panic (with the `testkit` feature only, so in test
/// builds): how tests prove that any panic ends the process.
#[cfg(feature = "testkit")]
pub const PANIC_WRITER_TOPIC: &str = "RINGMQ_TEST_PANIC_WRITER";

/// The writer's test switch: panics when an append's first record is of `PANIC_WRITER_TOPIC`.
#[cfg(feature = "testkit")]
pub fn panic_switch(topic: Option<&str>) {
    if topic == Some(PANIC_WRITER_TOPIC) {
        panic!("test switch: an append to {PANIC_WRITER_TOPIC}");
    }
}
