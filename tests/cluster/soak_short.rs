//! Proves that under steady mixed load the broker neither loses nor corrupts acknowledged
//! messages and does not leak: producers send at a fixed rate, consumers long-poll every queue
//! and check each record against what its producer was told (queue, queue offset, body), and a
//! sampler records RssAnon, VmRSS, open fds and throughput. After warm-up (the first quarter)
//! the fd count beyond the store's own files may not grow and RssAnon stays within 10% (or 16 MiB) of its warm value.
//!
//! Duration: `SOAK_SECS` (default 20 s; 120 s when `RINGMQ_SOAK=1`). `SOAK_RATE` sets the
//! produce rate in messages per second (default 2000). scripts/soak.sh runs it for 30 minutes.

use crate::hostile_support;
use crate::raw_support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hostile_support::{sample, ProcSample};
use raw_support::{pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::response_code;

const TOPIC: &str = "SoakT";
const QUEUES: i32 = 4;
const PRODUCERS: usize = 4;
const WINDOW: usize = 32;
const BODY_LEN: usize = 300;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn body_for(id: u64) -> Vec<u8> {
    let mut b = format!("{id}|").into_bytes();
    let mut x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while b.len() < BODY_LEN + (id % 64) as usize {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b.push(b'!' + (x % 90) as u8);
    }
    b
}

/// Per queue: queue_offset -> message id, as the producers' SEND_OK responses reported.
type Acked = Arc<Mutex<Vec<HashMap<i64, u64>>>>;

struct Counters {
    acked: AtomicU64,
    consumed: AtomicU64,
    producing: AtomicBool,
}

fn producer(
    addr: std::net::SocketAddr,
    p: u64,
    end: Instant,
    rate: u64,
    acked: Acked,
    n: Arc<Counters>,
) {
    let mut c = Conn::connect(addr);
    let per_producer = (rate / PRODUCERS as u64).max(1);
    let started = Instant::now();
    let mut seq = 0u64;
    let mut pending: HashMap<i32, (u64, i32)> = HashMap::new();
    while Instant::now() < end || !pending.is_empty() {
        let due = (started.elapsed().as_secs_f64() * per_producer as f64) as u64;
        while Instant::now() < end && pending.len() < WINDOW && seq < due {
            let id = seq * PRODUCERS as u64 + p;
            let q = (id % QUEUES as u64) as i32;
            let op = c.send(send_cmd(TOPIC, q, &body_for(id), ""));
            pending.insert(op, (id, q));
            seq += 1;
        }
        if pending.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let r = c.read().expect("broker closed a producer connection");
        let (id, q) = pending.remove(&r.opaque).expect("unknown opaque");
        match r.code {
            0 => {
                let off: i64 = r.ext("queueOffset").unwrap().parse().unwrap();
                assert_eq!(r.ext("queueId"), Some(q.to_string().as_str()));
                let prev = acked.lock().unwrap()[q as usize].insert(off, id);
                assert!(prev.is_none(), "queue {q} offset {off} acknowledged twice");
                n.acked.fetch_add(1, Ordering::Relaxed);
            }
            response_code::SYSTEM_BUSY => {}
            code => panic!("send {id} failed: {code} {:?}", r.remark),
        }
    }
}

/// Long-polls `queue` from offset 0 and checks every record against the acknowledgements;
/// returns once producers stopped and the queue is drained.
fn consumer(addr: std::net::SocketAddr, queue: i32, acked: Acked, n: Arc<Counters>) -> i64 {
    let mut c = Conn::connect(addr);
    let mut offset = 0i64;
    let mut idle_after_stop = 0;
    loop {
        let producing = n.producing.load(Ordering::Relaxed);
        let r = c.call(pull_cmd(
            TOPIC,
            queue,
            offset,
            if producing { 1000 } else { 0 },
        ));
        match r.code {
            0 => {
                for rec in records(&r.body) {
                    assert_eq!(rec.queue_offset, offset, "queue {queue}: offset gap");
                    let sep = rec.body.iter().position(|&b| b == b'|').expect("id");
                    let id: u64 = std::str::from_utf8(&rec.body[..sep])
                        .unwrap()
                        .parse()
                        .unwrap();
                    assert_eq!(rec.body, &body_for(id)[..], "message {id} corrupted");
                    // The producer may not have processed its SEND_OK yet: wait for it.
                    let deadline = Instant::now() + Duration::from_secs(10);
                    let want = loop {
                        if let Some(w) = acked.lock().unwrap()[queue as usize].get(&offset) {
                            break *w;
                        }
                        assert!(
                            Instant::now() < deadline,
                            "{id} stored but never acknowledged"
                        );
                        std::thread::sleep(Duration::from_millis(1));
                    };
                    assert_eq!(
                        id, want,
                        "queue {queue} offset {offset} holds the wrong message"
                    );
                    offset += 1;
                    n.consumed.fetch_add(1, Ordering::Relaxed);
                }
                idle_after_stop = 0;
            }
            response_code::PULL_NOT_FOUND | response_code::PULL_RETRY_IMMEDIATELY => {
                if !producing {
                    idle_after_stop += 1;
                    if idle_after_stop >= 3 {
                        return offset;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            // The topic does not exist until the first send lands.
            response_code::TOPIC_NOT_EXIST => std::thread::sleep(Duration::from_millis(50)),
            code => panic!("pull {queue}@{offset}: {code} {:?}", r.remark),
        }
    }
}

/// Regular files under the store directory (segments, ConsumeQueue files, config, checkpoint).
fn store_files(dir: &std::path::Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => n += 1,
                _ => {}
            }
        }
    }
    n
}

#[test]
fn soak_mixed_load_loses_nothing_and_does_not_leak() {
    let long = std::env::var_os("RINGMQ_SOAK").is_some();
    let secs = env_u64("SOAK_SECS").unwrap_or(if long { 120 } else { 20 });
    let rate = env_u64("SOAK_RATE").unwrap_or(2000);
    let sample_every = Duration::from_secs(if secs >= 300 { 10 } else { 2 });
    let b = RawBroker::start(&[]);
    let pid = b.child.id();
    let acked: Acked = Arc::new(Mutex::new(vec![HashMap::new(); QUEUES as usize]));
    let n = Arc::new(Counters {
        acked: AtomicU64::new(0),
        consumed: AtomicU64::new(0),
        producing: AtomicBool::new(true),
    });
    let started = Instant::now();
    let end = started + Duration::from_secs(secs);
    let addr = b.broker;
    let producers: Vec<_> = (0..PRODUCERS as u64)
        .map(|p| {
            let (a, n) = (acked.clone(), n.clone());
            std::thread::spawn(move || producer(addr, p, end, rate, a, n))
        })
        .collect();
    let consumers: Vec<_> = (0..QUEUES)
        .map(|q| {
            let (a, n) = (acked.clone(), n.clone());
            std::thread::spawn(move || consumer(addr, q, a, n))
        })
        .collect();
    // Sample until the producers finish.
    let mut samples: Vec<(f64, ProcSample, u64, u64, usize)> = Vec::new();
    println!(
        "soak: {secs}s at {rate} msg/s; t_s rss_anon_kib vm_rss_kib fds store_files acked consumed acked_per_s"
    );
    let mut last_acked = 0;
    while Instant::now() < end {
        std::thread::sleep(sample_every.min(end.saturating_duration_since(Instant::now())));
        let s = sample(pid);
        let files = store_files(b.dir.path());
        let (a, c) = (
            n.acked.load(Ordering::Relaxed),
            n.consumed.load(Ordering::Relaxed),
        );
        let t = started.elapsed().as_secs_f64();
        println!(
            "soak-sample {t:7.1} {} {} {} {files} {a} {c} {:.0}",
            s.rss_anon_kib,
            s.vm_rss_kib,
            s.fds,
            (a - last_acked) as f64 / sample_every.as_secs_f64()
        );
        last_acked = a;
        samples.push((t, s, a, c, files));
    }
    for p in producers {
        p.join().expect("producer");
    }
    n.producing.store(false, Ordering::Relaxed);
    let mut consumed_to = Vec::new();
    for c in consumers {
        consumed_to.push(c.join().expect("consumer"));
    }
    // Every acknowledged message was consumed exactly once, at the offset it was acked at.
    let acked = acked.lock().unwrap();
    for q in 0..QUEUES as usize {
        let max_acked = acked[q].keys().max().map_or(0, |m| m + 1);
        assert_eq!(
            consumed_to[q], max_acked,
            "queue {q}: consumed up to {} of {max_acked}",
            consumed_to[q]
        );
        assert_eq!(
            acked[q].len() as i64,
            max_acked,
            "queue {q}: holes in acknowledged offsets"
        );
    }
    let total = n.acked.load(Ordering::Relaxed);
    assert_eq!(n.consumed.load(Ordering::Relaxed), total);
    assert!(
        total as f64 >= rate as f64 * secs as f64 * 0.5,
        "only {total} messages acknowledged"
    );
    // Leak checks after warm-up.
    let warm_at = samples.len() / 4;
    let warm = samples[warm_at].1;
    let last = samples.last().unwrap().1;
    // The store keeps one fd per commit-log segment and ConsumeQueue file (as Java's
    // MappedFile does), so the leak check is on fds beyond the store's files.
    let other_fds = |s: &(f64, ProcSample, u64, u64, usize)| s.1.fds.saturating_sub(s.4);
    let warm_other = other_fds(&samples[warm_at]);
    let max_other = samples[warm_at..].iter().map(other_fds).max().unwrap();
    println!(
        "soak: {total} messages acked and consumed; warm {warm:?}, last {last:?}, \
         non-store fds {warm_other} at warm-up, max {max_other} after"
    );
    // Readers also keep up to READER_CACHE_SEGMENTS segments open, filled as segments appear.
    let fd_slack = ringmq::constants::READER_CACHE_SEGMENTS + 4;
    assert!(
        max_other <= warm_other + fd_slack,
        "non-store fd count grew after warm-up: {warm_other} -> {max_other}"
    );
    let allowed = warm.rss_anon_kib + (warm.rss_anon_kib / 10).max(16 * 1024);
    assert!(
        last.rss_anon_kib <= allowed,
        "RssAnon grew after warm-up: {} -> {} KiB (allowed {allowed})",
        warm.rss_anon_kib,
        last.rss_anon_kib
    );
}
