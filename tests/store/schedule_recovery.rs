//! Proves that recovery re-dispatches a record parked in the schedule topic (a delay level) or
//! the timer topic with the delivery time the live path put in its ConsumeQueue unit: at the
//! store layer the rebuilt unit equals the one the writer dispatched; over a real broker, after
//! a clean restart and after SIGKILL no re-dispatched unit differs from the stored one, and when
//! the parked queues are lost the rebuilt units still deliver at the messages' time, not at once.

use crate::raw_support;

use std::path::Path;
use std::time::{Duration, Instant};

use raw_support::{pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::store::tags_code::{SCHEDULE_TOPIC, TIMER_TOPIC};
use ringmq::store::{open, StoreConfig};
use ringmq::writer::testkit::{append_wait, record, CollectingDispatcher};
use ringmq::writer::{spawn_writer, WriterParts};

/// Level 2 is a 4 s delay.
const OPTS: &[&str] = &["messageDelayLevel=1s 4s"];
const DELAY: Duration = Duration::from_secs(4);
/// Wall-clock milliseconds against a monotonic `Instant`: one tick of rounding either way.
const SLACK: Duration = Duration::from_millis(50);
const WARNING: &str = "re-dispatched unit differs";
const DELAYED_TOPIC: &str = "SchedRecoverT";
const TIMED_TOPIC: &str = "TimerRecoverT";

/// Sends a level-2 delayed message and a 4 s timer message (both tagged, so that a tags code
/// recomputed from the tag instead of the delivery time is a small number in the past).
fn send_parked(c: &mut Conn) -> Instant {
    let sent = Instant::now();
    let r = c.call(send_cmd(
        DELAYED_TOPIC,
        0,
        b"delayed",
        "TAGS\u{1}TagA\u{2}DELAY\u{1}2\u{2}",
    ));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let r = c.call(send_cmd(
        TIMED_TOPIC,
        0,
        b"timed",
        "TAGS\u{1}TagB\u{2}TIMER_DELAY_SEC\u{1}4\u{2}",
    ));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    // The owner shards put the units in their queues right after the writer published them.
    std::thread::sleep(Duration::from_millis(300));
    sent
}

/// How long after `sent` the message on `topic` queue 0 became pullable.
fn arrival(c: &mut Conn, topic: &str, sent: Instant) -> Duration {
    let deadline = sent + DELAY + Duration::from_secs(15);
    while Instant::now() < deadline {
        let r = c.call(pull_cmd(topic, 0, 0, 0));
        if r.code == 0 {
            let at = sent.elapsed();
            assert_eq!(records(&r.body).len(), 1, "{topic}: one message");
            return at;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "{topic}: not delivered within {:?}",
        DELAY + Duration::from_secs(15)
    );
}

/// Both parked messages arrive at their delivery time after the restart, not before.
fn assert_delivered_on_time(b: &RawBroker, sent: Instant) {
    let mut c = Conn::connect(b.broker);
    for topic in [DELAYED_TOPIC, TIMED_TOPIC] {
        let at = arrival(&mut c, topic, sent);
        assert!(
            at + SLACK >= DELAY,
            "{topic}: delivered {at:?} after the send, before its time"
        );
    }
}

/// The broker's log holds no warning about a re-dispatched unit.
fn assert_no_differing_unit(log: &Path) {
    let text = std::fs::read_to_string(log).expect("broker log");
    assert!(
        !text.is_empty(),
        "the broker logged nothing: wrong log file?"
    );
    let bad: Vec<&str> = text.lines().filter(|l| l.contains(WARNING)).collect();
    assert!(
        bad.is_empty(),
        "recovery disagreed with the live path:\n{}",
        bad.join("\n")
    );
}

/// A clean stop and restart re-dispatches the parked units unchanged and delivers on time.
#[test]
fn clean_restart_redispatches_the_same_parked_units() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("broker.log");
    let b = RawBroker::start_logged(tempfile::tempdir().unwrap(), OPTS, &log);
    let sent = send_parked(&mut Conn::connect(b.broker));
    let dir = b.stop();
    let b = RawBroker::start_logged(dir, OPTS, &log);
    assert_no_differing_unit(&log);
    assert_delivered_on_time(&b, sent);
}

/// SIGKILL and recovery from the abort file re-dispatch the parked units unchanged.
#[test]
fn sigkill_restart_redispatches_the_same_parked_units() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("broker.log");
    let b = RawBroker::start_logged(tempfile::tempdir().unwrap(), OPTS, &log);
    let sent = send_parked(&mut Conn::connect(b.broker));
    let dir = b.kill9();
    let b = RawBroker::start_logged(dir, OPTS, &log);
    assert_no_differing_unit(&log);
    assert_delivered_on_time(&b, sent);
}

/// After SIGKILL with the parked queues gone, recovery rebuilds their units from the commit
/// log with the messages' delivery times, so nothing is delivered early.
#[test]
fn parked_queues_rebuilt_after_sigkill_keep_their_delivery_times() {
    let b = RawBroker::start(OPTS);
    let sent = send_parked(&mut Conn::connect(b.broker));
    let dir = b.kill9();
    for topic in ["SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer"] {
        let q = dir.path().join("consumequeue").join(topic);
        assert!(q.is_dir(), "{} missing", q.display());
        std::fs::remove_dir_all(&q).unwrap();
    }
    let b = RawBroker::start_in(dir, OPTS);
    assert_delivered_on_time(&b, sent);
}

/// At the store layer, for a delay-level, a timer and a plain tagged record: the unit the
/// writer dispatched (a delay resolved at the store timestamp it stamped) is the unit recovery
/// rebuilds from the commit log when no consume queue holds it.
#[test]
fn writer_and_recovery_build_the_same_units() {
    let dir = tempfile::tempdir().unwrap();
    let c = StoreConfig {
        mapped_file_size_commit_log: 1 << 20,
        max_message_size: 16 << 10,
        warm_mapped_file: Some(false),
        ..StoreConfig::with_root(dir.path())
    };
    let col = CollectingDispatcher::default();
    let (parts, _cqs) = WriterParts::from_opened(open(&c).unwrap());
    let w = spawn_writer(parts, &c, Box::new(col.clone())).unwrap();
    let parked = "TAGS\u{1}TagA\u{2}DELAY\u{1}2\u{2}REAL_TOPIC\u{1}T\u{2}REAL_QID\u{1}0\u{2}";
    let timed = "TAGS\u{1}TagB\u{2}TIMER_OUT_MS\u{1}1700000000123\u{2}";
    let recs = vec![
        record(SCHEDULE_TOPIC, 1, b"delayed", parked),
        record(TIMER_TOPIC, 0, b"timed", timed),
        record("T", 0, b"plain", "TAGS\u{1}TagA\u{2}"),
    ];
    let out = append_wait(&w.clone_sender(), recs, true).unwrap();
    w.shutdown().unwrap();
    let live = col.0.lock().unwrap().clone();
    assert_eq!(live.len(), 3);
    // Level 2 of the default levels is 5 s after the store timestamp.
    assert_eq!(live[0].unit.tags_code, out.store_timestamp + 5_000);
    assert_eq!(live[1].unit.tags_code, 1_700_000_000_123);
    assert_eq!(live[2].unit.tags_code, 2_598_919, "TagA's Java hash");
    // The collector wrote no queue files: recovery rebuilds every unit from the commit log.
    let opened = open(&c).unwrap();
    for u in &live {
        let cq = opened
            .consume_queues
            .iter()
            .find(|q| q.topic() == &*u.topic && q.queue_id() == u.queue_id)
            .expect("queue rebuilt");
        assert_eq!(cq.get(u.queue_offset), Some(u.unit), "{}", u.topic);
    }
}
