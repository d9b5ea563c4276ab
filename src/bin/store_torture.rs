//! Crash-test driver (child process of tests/store_crash.rs): opens the store at argv[1] with
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

use std::io::Write;
use std::path::PathBuf;

use ringmq::store::config::DeleteWhen;
use ringmq::store::{open, FlushDiskType, StoreConfig};
use ringmq::writer::testkit::{append_wait, record, seeded_body, CqDispatcher};
use ringmq::writer::{spawn_writer, WriterParts};

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
    let mut handles = Vec::new();
    for t in 0..threads {
        let s = writer.clone_sender();
        handles.push(std::thread::spawn(move || {
            for i in 0u64.. {
                let seed = (base << 8) + i * threads + t;
                let body = seeded_body(seed);
                let qid = (t % 4) as u32;
                let out =
                    append_wait(&s, vec![record("TORTURE", qid, &body, "")], true).expect("append");
                let mut so = std::io::stdout().lock();
                writeln!(
                    so,
                    "ACK {} {} {} {}",
                    out.phy_offsets[0], out.queue_offsets[0], qid, seed
                )
                .expect("stdout");
            }
        }));
    }
    for h in handles {
        h.join().expect("appender thread");
    }
}
