//! Model-based property test of the store: random appends (sizes crossing 128 KiB segment
//! boundaries, several queues, sync and async flush), reads, truncations of the running log back
//! to an acknowledged record, clean reopens and simulated crashes (writer stopped without a clean
//! shutdown), all checked against an in-memory model of what was acknowledged and not truncated. Short by default; `scripts/store-model-long.sh` sets PROPTEST_CASES.

use std::path::Path;

use proptest::prelude::*;
use ringmq::protocol::message::decode;
use ringmq::store::{open, CommitLogReader, FlushDiskType, StoreConfig};
use ringmq::writer::testkit::{append_wait, record, CqDispatcher};
use ringmq::writer::{spawn_writer, WriterHandle, WriterParts};

const SEG: u64 = 128 << 10;
const QUEUES: u32 = 3;

#[derive(Clone, Debug)]
enum Op {
    Append {
        qid: u32,
        sizes: Vec<usize>,
        wait: bool,
    },
    ReadAll,
    /// Truncate back to the acknowledged record at this fraction (per mille) of the list.
    Truncate(usize),
    Reopen,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..QUEUES, proptest::collection::vec(0usize..20_000, 1..4), any::<bool>())
            .prop_map(|(qid, sizes, wait)| Op::Append { qid, sizes, wait }),
        1 => Just(Op::ReadAll),
        1 => (0usize..1000).prop_map(Op::Truncate),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
    ]
}

struct Acked {
    phy: u64,
    qid: u32,
    qo: u64,
    body: Vec<u8>,
}

#[derive(Default)]
struct Model {
    acked: Vec<Acked>,
    next_qo: [u64; QUEUES as usize],
    counter: u64,
}

fn body(n: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (n as usize * 31 + i) as u8).collect()
}

fn cfg(root: &Path, sync: bool) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: SEG,
        max_message_size: 32 << 10,
        flush_disk_type: if sync {
            FlushDiskType::SyncFlush
        } else {
            FlushDiskType::AsyncFlush
        },
        flush_interval_commit_log_ms: 5,
        ..StoreConfig::with_root(root)
    }
}

/// Opens the store, checks recovered state against the model, starts the writer.
fn start(c: &StoreConfig, m: &Model) -> Result<WriterHandle, TestCaseError> {
    let o = open(c).expect("open");
    for q in 0..QUEUES {
        let got = o
            .queue_offsets
            .get(&("M".to_string(), q))
            .copied()
            .unwrap_or(0);
        prop_assert_eq!(
            got,
            m.next_qo[q as usize],
            "queue {} offset after reopen",
            q
        );
    }
    for a in &m.acked {
        let cq = o
            .consume_queues
            .iter()
            .find(|c| c.queue_id() == a.qid)
            .expect("cq of an acked record");
        prop_assert_eq!(cq.get(a.qo).map(|u| u.phy_offset), Some(a.phy));
    }
    let (parts, cqs) = WriterParts::from_opened(o);
    let d = CqDispatcher::new(
        c.store_path_root_dir.clone(),
        c.mapped_file_size_consume_queue,
        cqs,
    );
    Ok(spawn_writer(parts, c, Box::new(d)).expect("spawn writer"))
}

fn read_all(root: &Path, m: &Model) -> Result<(), TestCaseError> {
    let mut r = CommitLogReader::new(root, SEG);
    for a in &m.acked {
        let len = (91 + 1 + a.body.len()) as u32;
        let rec = decode(r.read(a.phy, len).expect("read acked"), true).expect("decode");
        prop_assert_eq!(rec.body, &a.body[..]);
        prop_assert_eq!(rec.queue_offset as u64, a.qo);
        prop_assert_eq!(rec.queue_id as u32, a.qid);
    }
    Ok(())
}

fn run(ops: Vec<Op>, sync: bool) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = cfg(dir.path(), sync);
    let mut m = Model::default();
    let mut w = Some(start(&c, &m)?);
    for op in ops {
        let h = w.as_ref().expect("writer running");
        match op {
            Op::Append { qid, sizes, wait } => {
                let bodies: Vec<Vec<u8>> = sizes
                    .iter()
                    .map(|&len| {
                        m.counter += 1;
                        body(m.counter, len)
                    })
                    .collect();
                let recs = bodies.iter().map(|b| record("M", qid, b, "")).collect();
                let out = append_wait(&h.clone_sender(), recs, wait).expect("append");
                for (i, b) in bodies.into_iter().enumerate() {
                    let qo = m.next_qo[qid as usize];
                    prop_assert_eq!(out.queue_offsets[i], qo);
                    m.next_qo[qid as usize] += 1;
                    let phy = out.phy_offsets[i];
                    if let Some(prev) = m.acked.last() {
                        let prev_end = prev.phy + 92 + prev.body.len() as u64;
                        // Either right after the previous record, or at the next segment start.
                        prop_assert!(
                            phy == prev_end || (phy.is_multiple_of(SEG) && phy > prev_end)
                        );
                    }
                    prop_assert_eq!(phy / SEG, (phy + 92 + b.len() as u64 - 1) / SEG);
                    m.acked.push(Acked {
                        phy,
                        qid,
                        qo,
                        body: b,
                    });
                }
            }
            Op::ReadAll => read_all(dir.path(), &m)?,
            Op::Truncate(permille) => {
                if m.acked.is_empty() {
                    continue;
                }
                let cut = m.acked.len() * permille / 1000;
                let offset = m.acked[cut].phy;
                let (tx, rx) = crossbeam_channel::bounded(1);
                let done = Box::new(move |r| {
                    // Waited for below.
                    let _waiting = tx.send(r);
                });
                prop_assert!(h.clone_sender().try_truncate_to(offset, done));
                rx.recv().expect("answered").expect("truncation");
                prop_assert_eq!(h.max_phy_offset(), offset);
                for a in m.acked.drain(cut..) {
                    let next = &mut m.next_qo[a.qid as usize];
                    *next = (*next).min(a.qo);
                }
            }
            Op::Reopen => {
                w.take()
                    .expect("running")
                    .shutdown()
                    .expect("clean shutdown");
                w = Some(start(&c, &m)?);
            }
            Op::Crash => {
                w.take().expect("running").abandon().expect("abandon");
                w = Some(start(&c, &m)?);
            }
        }
    }
    read_all(dir.path(), &m)?;
    w.take()
        .expect("running")
        .shutdown()
        .expect("clean shutdown");
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn store_matches_model(ops in proptest::collection::vec(op(), 1..40), sync in any::<bool>()) {
        run(ops, sync)?;
    }
}
