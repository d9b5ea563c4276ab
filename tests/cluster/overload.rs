//! Proves that a producer sending faster than the broker can store is pushed back, never lied
//! to: 24 connections with 256 sends in flight each (a quarter oneway) get only SEND_OK or
//! SYSTEM_BUSY; afterwards every message that got SEND_OK is pulled back exactly once with its
//! body intact, none answered SYSTEM_BUSY is stored, every oneway is either stored or counted in
//! `onewayDropped`, and the broker's anonymous memory stayed bounded throughout. Run twice: with
//! the default limits, and with a small configured writer inbox (`writerInboxCapacity`), where
//! SYSTEM_BUSY must actually happen and carry RocketMQ's "[REJECTREQUEST]" remark.

use crate::hostile_support;
use crate::raw_support;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hostile_support::{broker_sample, drain_queue, still_serves};
use raw_support::{send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

const PRODUCERS: usize = 24;
/// Requests in flight per connection: 24 x 256 exceeds the writer inbox (4096).
const WINDOW: usize = 256;
const PRODUCE_FOR: Duration = Duration::from_secs(6);
const QUEUES: i32 = 4;
const TOPIC: &str = "OverloadT";
const BODY_LEN: usize = 512;
/// Anonymous memory the overload may add on top of the idle broker.
const RSS_MARGIN_KIB: u64 = 192 * 1024;

/// What one producer learned.
#[derive(Default)]
struct Tally {
    acked: Vec<String>,
    oneway: Vec<String>,
    busy: Vec<String>,
    /// Remarks of the SYSTEM_BUSY answers (one of each is enough).
    busy_remarks: HashSet<String>,
    other: Vec<(i32, Option<String>)>,
}

fn body_for(id: &str) -> Vec<u8> {
    let mut b = format!("{id}|").into_bytes();
    // Deterministic filler derived from the id, so a corrupted byte anywhere is detected.
    let h = id
        .bytes()
        .fold(7u8, |h, c| h.wrapping_mul(31).wrapping_add(c));
    while b.len() < BODY_LEN {
        b.push(b'a' + (h.wrapping_add(b.len() as u8) % 26));
    }
    b
}

fn produce(addr: std::net::SocketAddr, p: usize, end: Instant) -> Tally {
    let mut c = Conn::connect(addr);
    let mut t = Tally::default();
    let mut pending: HashMap<i32, String> = HashMap::new();
    let mut seq = 0u64;
    let handle = |r: RemotingCommand, pending: &mut HashMap<i32, String>, t: &mut Tally| {
        let id = pending
            .remove(&r.opaque)
            .expect("response to an unknown opaque");
        match r.code {
            response_code::SUCCESS => t.acked.push(id),
            response_code::SYSTEM_BUSY => {
                t.busy.push(id);
                t.busy_remarks.insert(r.remark.unwrap_or_default());
            }
            code => t.other.push((code, r.remark)),
        }
    };
    while Instant::now() < end {
        while pending.len() < WINDOW && Instant::now() < end {
            let id = format!("p{p}-{seq}");
            let mut cmd = send_cmd(TOPIC, (seq % QUEUES as u64) as i32, &body_for(&id), "");
            if seq % 4 == 3 {
                cmd.set_oneway();
                c.send(cmd);
                t.oneway.push(id);
            } else {
                let op = c.send(cmd);
                pending.insert(op, id);
            }
            seq += 1;
        }
        if !pending.is_empty() {
            let r = c.read().expect("broker closed a producer connection");
            handle(r, &mut pending, &mut t);
        }
    }
    while !pending.is_empty() {
        let r = c.read().expect("broker closed a producer connection");
        handle(r, &mut pending, &mut t);
    }
    t
}

fn oneway_dropped(c: &mut Conn) -> u64 {
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_BROKER_RUNTIME_INFO,
    ));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["table"]["onewayDropped"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// What one overload run observed, for the per-configuration assertions.
struct Outcome {
    acked: usize,
    busy: usize,
    busy_remarks: HashSet<String>,
}

#[test]
fn overload_pushes_back_and_loses_no_acknowledged_message() {
    let o = overload(&[]);
    assert!(o.acked > 0, "nothing was acknowledged");
}

/// With a writer inbox of 4 requests, 24 x 256 concurrent sends must overflow it: the overflow is
/// answered SYSTEM_BUSY at once (the sender is not made to wait), the rest is stored.
#[test]
fn a_full_writer_inbox_answers_system_busy() {
    let o = overload(&["writerInboxCapacity=4"]);
    assert!(o.busy > 0, "no SYSTEM_BUSY with a 4-request writer inbox");
    assert!(o.acked > 0, "nothing was acknowledged");
    for remark in &o.busy_remarks {
        assert!(
            remark.starts_with("[REJECTREQUEST]"),
            "SYSTEM_BUSY remark {remark:?} is not RocketMQ's [REJECTREQUEST] form"
        );
    }
}

/// The two runs take turns: each wants the machine's cores to itself to overload its broker.
static SERIAL: Mutex<()> = Mutex::new(());

fn overload(opts: &[&str]) -> Outcome {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let b = RawBroker::start(opts);
    still_serves(&b);
    let base = broker_sample(&b);
    let started = Instant::now();
    let end = started + PRODUCE_FOR;
    // Sample memory while the storm runs.
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(Mutex::new(base));
    let sampler = {
        let (stop, peak, pid) = (stop.clone(), peak.clone(), b.child.id());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let s = hostile_support::sample(pid);
                let mut p = peak.lock().unwrap();
                if s.rss_anon_kib > p.rss_anon_kib {
                    *p = s;
                }
                drop(p);
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let addr = b.broker;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| std::thread::spawn(move || produce(addr, p, end)))
        .collect();
    let tallies: Vec<Tally> = producers
        .into_iter()
        .map(|h| h.join().expect("producer thread"))
        .collect();
    let produce_secs = started.elapsed().as_secs_f64();
    // A final synchronous round trip on every queue: the oneways before it have been read.
    let mut c = Conn::connect(b.broker);
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let peak = *peak.lock().unwrap();

    let acked: HashSet<&str> = tallies
        .iter()
        .flat_map(|t| t.acked.iter().map(String::as_str))
        .collect();
    let oneway: HashSet<&str> = tallies
        .iter()
        .flat_map(|t| t.oneway.iter().map(String::as_str))
        .collect();
    let busy: HashSet<&str> = tallies
        .iter()
        .flat_map(|t| t.busy.iter().map(String::as_str))
        .collect();
    let other: Vec<_> = tallies.iter().flat_map(|t| t.other.iter()).collect();
    assert!(
        other.is_empty(),
        "sends failed with codes other than SYSTEM_BUSY: {:?}",
        &other[..other.len().min(5)]
    );

    // Pull everything back and check each stored body.
    let mut stored: HashSet<String> = HashSet::new();
    for q in 0..QUEUES {
        for body in drain_queue(&mut c, TOPIC, q, Duration::from_secs(60)) {
            let id = std::str::from_utf8(&body[..body.iter().position(|&b| b == b'|').unwrap()])
                .expect("utf8 id")
                .to_string();
            assert_eq!(body, body_for(&id), "stored body of {id} corrupted");
            assert!(stored.insert(id.clone()), "{id} stored twice");
        }
    }
    let missing: Vec<_> = acked.iter().filter(|id| !stored.contains(**id)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged messages lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    let stored_oneway = stored
        .iter()
        .filter(|id| oneway.contains(id.as_str()))
        .count();
    let stored_busy: Vec<_> = stored
        .iter()
        .filter(|id| busy.contains(id.as_str()))
        .collect();
    assert!(
        stored_busy.is_empty(),
        "{} messages answered SYSTEM_BUSY were stored anyway, e.g. {:?}",
        stored_busy.len(),
        &stored_busy[..stored_busy.len().min(5)]
    );
    let unknown = stored.len() - stored_oneway - acked.len();
    assert_eq!(
        unknown, 0,
        "stored messages nobody sent or that were answered BUSY"
    );
    let dropped = oneway_dropped(&mut c);
    assert_eq!(
        stored_oneway as u64 + dropped,
        oneway.len() as u64,
        "oneway sends neither stored nor counted as dropped"
    );
    eprintln!(
        "overload {opts:?}: {:.1}s, {} acked ({:.0}/s), {} busy, {} oneway sent, {} stored, {} counted dropped; \
         RssAnon {} -> peak {} KiB",
        produce_secs,
        acked.len(),
        acked.len() as f64 / produce_secs,
        busy.len(),
        oneway.len(),
        stored_oneway,
        dropped,
        base.rss_anon_kib,
        peak.rss_anon_kib
    );
    assert!(
        peak.rss_anon_kib < base.rss_anon_kib + RSS_MARGIN_KIB,
        "memory unbounded under overload: {base:?} -> {peak:?}"
    );
    drop(c);
    still_serves(&b);
    Outcome {
        acked: acked.len(),
        busy: busy.len(),
        busy_remarks: tallies
            .iter()
            .flat_map(|t| t.busy_remarks.iter().cloned())
            .collect(),
    }
}
