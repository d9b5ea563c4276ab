//! Topic deletion at the writer: a dropped topic's queues start again at offset 0, other
//! topics keep theirs, and appends sent before the drop keep the old offsets.

use std::sync::mpsc;
use std::time::Duration;

use super::testkit::{append_wait, record, NullDispatcher};
use super::*;
use crate::store::open;

/// After DropTopic, the next append of the topic gets queue offset 0 while another topic goes
/// on from where it was; `done` runs once the drop is applied.
#[test]
fn dropped_topic_restarts_at_offset_zero() {
    let dir = tempfile::tempdir().unwrap();
    let c = StoreConfig {
        mapped_file_size_commit_log: 256 << 10,
        max_message_size: 16 << 10,
        ..StoreConfig::with_root(dir.path())
    };
    let (parts, _cqs) = WriterParts::from_opened(open(&c).unwrap());
    let w = spawn_writer(parts, &c, Box::new(NullDispatcher)).unwrap();
    let s = w.clone_sender();
    let recs = || vec![record("Gone", 0, b"a", ""), record("Kept", 0, b"b", "")];
    assert_eq!(append_wait(&s, recs(), true).unwrap().queue_offsets, [0, 0]);
    assert_eq!(append_wait(&s, recs(), true).unwrap().queue_offsets, [1, 1]);
    let (tx, rx) = mpsc::channel();
    assert!(s.try_drop_topic("Gone".into(), Box::new(move || tx.send(()).unwrap())));
    rx.recv_timeout(Duration::from_secs(5))
        .expect("drop applied");
    assert_eq!(append_wait(&s, recs(), true).unwrap().queue_offsets, [0, 2]);
    w.shutdown().unwrap();
}
