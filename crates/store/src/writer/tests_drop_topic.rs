//! Topic deletion at the writer: a dropped topic's queues start again at offset 0, other
//! topics keep theirs, and appends sent before the drop keep the old offsets and are
//! dispatched before the drop is reported done.

use std::sync::mpsc;
use std::time::Duration;

use super::testkit::{append_wait, record, CollectingDispatcher};
use super::*;
use crate::{open, FlushDiskType};

/// In both flush modes: after DropTopic the next append of the topic gets queue offset 0
/// while another topic goes on from where it was, and `done` runs only after every unit of
/// the appends before it was dispatched (none arrives after it).
#[test]
fn dropped_topic_restarts_at_offset_zero() {
    for flush in [FlushDiskType::AsyncFlush, FlushDiskType::SyncFlush] {
        let dir = tempfile::tempdir().unwrap();
        let c = StoreConfig {
            mapped_file_size_commit_log: 256 << 10,
            max_message_size: 16 << 10,
            flush_disk_type: flush,
            ..StoreConfig::with_root(dir.path())
        };
        let (parts, _cqs) = WriterParts::from_opened(open(&c).unwrap());
        let col = CollectingDispatcher::default();
        let w = spawn_writer(parts, &c, Box::new(col.clone())).unwrap();
        let s = w.clone_sender();
        let recs = || vec![record("Gone", 0, b"a", ""), record("Kept", 0, b"b", "")];
        assert_eq!(append_wait(&s, recs(), true).unwrap().queue_offsets, [0, 0]);
        // Not waited for: still in flight when the drop arrives.
        let (atx, arx) = mpsc::channel();
        let pending = AppendRequest {
            records: recs(),
            wait_flush: true,
            reply: ReplyTo::Call(Box::new(move |r| {
                atx.send(r.map(|o| o.queue_offsets)).unwrap()
            })),
        };
        assert!(s.try_append(pending).is_ok());
        let (tx, rx) = mpsc::channel();
        let seen = col.clone();
        let done = ReplyTo::Call(Box::new(move |_| {
            tx.send(seen.0.lock().unwrap().len()).unwrap()
        }));
        assert!(s.try_drop_topic("Gone".into(), done).is_ok());
        let dispatched = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("drop applied");
        assert_eq!(dispatched, 4, "{flush:?}: units dispatched before done");
        let offsets = arx.recv_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(offsets, [1, 1], "{flush:?}");
        let after = append_wait(&s, recs(), true).unwrap().queue_offsets;
        assert_eq!(after, [0, 2], "{flush:?}");
        w.shutdown().unwrap();
    }
}
