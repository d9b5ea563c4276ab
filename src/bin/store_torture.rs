//! Crash-test driver (child process of tests/store/crash.rs): opens the store at argv[1] with
//! SYNC_FLUSH and small segments, appends records with deterministic content from several
//! threads, and prints `ACK <phy> <queue_offset> <seed>` only after the writer's reply (i.e.
//! after the fdatasync covering the record). It runs until killed.
//!
//! Record content is a pure function of the seed (`testkit::seeded_body`), which the test
//! recomputes.
//!
//! Usage: `store_torture <dir> [threads (4)] [segment bytes (1 MiB)]`.
//!
//! With STORE_TORTURE_RECYCLE=1, retention runs every 20 ms and takes every segment but the
//! active one out of the log at once, keeping two for reuse with no quarantine, so the log is
//! mostly written into reused segments full of older records.
//!
//! With STORE_TORTURE_TRUNCATE=1, the threads append in rounds of `TRUNCATE_ROUND` records
//! each; after every round the log is truncated back to the start of one of the records this
//! run acknowledged (`WriterSender::try_truncate_to`), between the lines
//! `TRUNCATING <offset>` (before asking) and `TRUNC <offset>` (after it succeeded).

use std::io::Write;
use std::path::PathBuf;

use ringmq::store::config::DeleteWhen;
use ringmq::store::{open, FlushDiskType, StoreConfig};
use ringmq::writer::testkit::{append_wait, record, seeded_body, CqDispatcher};
use ringmq::writer::{spawn_writer, WriterParts, WriterSender};

/// Records each thread appends between two truncations (STORE_TORTURE_TRUNCATE).
const TRUNCATE_ROUND: u64 = 12;

fn main() {
    let mut args = std::env::args().skip(1);
    let root = PathBuf::from(
        args.next()
            .expect("usage: store_torture <dir> [threads] [segment bytes]"),
    );
    let threads: u64 = args.next().map_or(4, |s| s.parse().expect("threads"));
    let segment: u64 = args
        .next()
        .map_or(1 << 20, |s| s.parse().expect("segment bytes"));
    let mut cfg = StoreConfig {
        mapped_file_size_commit_log: segment,
        max_message_size: 64 << 10,
        flush_disk_type: FlushDiskType::SyncFlush,
        ..StoreConfig::with_root(&root)
    };
    if std::env::var_os("STORE_TORTURE_RECYCLE").is_some() {
        let every_hour = (0..24).map(|h| h.to_string()).collect::<Vec<_>>().join(";");
        cfg.file_reserved_time_hours = 0;
        cfg.delete_when = DeleteWhen::parse(&every_hour).expect("deleteWhen");
        cfg.retention_check_interval_ms = 20;
        cfg.delete_commit_log_files_interval_ms = 0;
        cfg.recycle_commit_log_segments = 2;
        cfg.recycle_quarantine_ms = 0;
    }
    let opened = open(&cfg).expect("open store");
    let (parts, cqs) = WriterParts::from_opened(opened);
    let dispatcher = CqDispatcher::new(root.clone(), cfg.mapped_file_size_consume_queue, cqs);
    let writer = spawn_writer(parts, &cfg, Box::new(dispatcher)).expect("spawn writer");
    // Seeds must not repeat across restarts: start from the wall clock in microseconds.
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_micros() as u64;
    if std::env::var_os("STORE_TORTURE_TRUNCATE").is_some() {
        truncate_rounds(&writer.clone_sender(), threads, base);
    }
    let mut handles = Vec::new();
    for t in 0..threads {
        let s = writer.clone_sender();
        handles.push(std::thread::spawn(move || {
            for i in 0u64.. {
                append_and_ack(&s, (base << 8) + i * threads + t, t);
            }
        }));
    }
    for h in handles {
        h.join().expect("appender thread");
    }
}

/// Appends the record of `seed` to queue `thread % 4`, prints its ACK line, returns its offset.
fn append_and_ack(s: &WriterSender, seed: u64, thread: u64) -> u64 {
    let body = seeded_body(seed);
    let qid = (thread % 4) as u32;
    let out = append_wait(s, vec![record("TORTURE", qid, &body, "")], true).expect("append");
    let mut so = std::io::stdout().lock();
    writeln!(
        so,
        "ACK {} {} {} {}",
        out.phy_offsets[0], out.queue_offsets[0], qid, seed
    )
    .expect("stdout");
    out.phy_offsets[0]
}

/// Rounds of appends from `threads` threads, each round followed by a truncation to a record
/// acknowledged earlier in this run (every ACK of a round is printed before its TRUNCATING).
fn truncate_rounds(s: &WriterSender, threads: u64, base: u64) -> ! {
    let mut acked: Vec<u64> = Vec::new();
    let mut rng = base | 1;
    for round in 0u64.. {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    (0..TRUNCATE_ROUND)
                        .map(|i| {
                            let n = (round * TRUNCATE_ROUND + i) * threads + t;
                            append_and_ack(&s, (base << 8) + n, t)
                        })
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        for h in handles {
            acked.extend(h.join().expect("appender thread"));
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Mostly into the last round, sometimes further back (across segments).
        let back = if rng.is_multiple_of(4) {
            acked.len()
        } else {
            (threads * TRUNCATE_ROUND) as usize
        };
        let from = acked.len().saturating_sub(back);
        let offset = acked[from + (rng >> 8) as usize % (acked.len() - from)];
        println!("TRUNCATING {offset}");
        let (tx, rx) = crossbeam_channel::bounded(1);
        let done = Box::new(move |r| {
            // The driver waits for it below.
            let _waiting = tx.send(r);
        });
        assert!(
            s.try_truncate_to(offset, done),
            "the writer took the truncation"
        );
        rx.recv().expect("truncation answered").expect("truncation");
        println!("TRUNC {offset}");
        acked.retain(|&p| p < offset);
    }
    unreachable!("the rounds end when the process is killed")
}
