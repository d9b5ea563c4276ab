//! Proves the configurable connection limits hold on a real broker process with short configured
//! values: an idle connection closes after `serverChannelMaxIdleTimeSeconds` while an active one
//! stays; a client that sends but never reads is cut after `writeStallTimeoutMills` while a slow
//! but steady reader is not, and others keep being served; `maxConnections` and
//! `maxConnectionsPerShard` refuse the next connection cleanly and admit again once one closes;
//! a bad limit is a clear start-up error.

use crate::hostile_support;
use crate::raw_support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use hostile_support::{broker_sample, fill_backlog, still_serves};
use raw_support::{pull_cmd, send_cmd, Conn, RawBroker};
use ringmq::protocol::RemotingCommand;

fn frame(mut cmd: RemotingCommand, opaque: i32) -> Vec<u8> {
    cmd.opaque = opaque;
    let mut b = BytesMut::new();
    cmd.encode(&mut b).unwrap();
    b.to_vec()
}

/// How a connection ended when read: the broker closed it (FIN or RST), or it is still open.
#[derive(Debug, PartialEq)]
enum Ended {
    Closed,
    Open,
}

/// Reads and discards until the peer closes or `within` passes without one.
fn read_until_closed(s: &mut TcpStream, within: Duration) -> (Ended, usize) {
    let deadline = Instant::now() + within;
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (Ended::Open, total);
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return (Ended::Closed, total),
            Ok(n) => total += n,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (Ended::Closed, total),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return (Ended::Open, total)
            }
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// True while the broker has neither closed nor reset the connection (nothing is consumed: the
/// test connections that use this have no response pending).
fn still_open(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let open = matches!(s.peek(&mut b), Err(e) if e.kind() == ErrorKind::WouldBlock);
    s.set_nonblocking(false).unwrap();
    open
}

/// One send on a fresh connection: Some(code) if the broker served it, None if it closed.
fn try_send_on(s: &mut TcpStream) -> Option<i32> {
    let _ = s.write_all(&frame(send_cmd("LimitT", 0, b"x", ""), 1));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = BytesMut::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(f) = ringmq::protocol::frame::split_frame(&mut buf, 1 << 20).unwrap() {
            return Some(RemotingCommand::decode(f).unwrap().code);
        }
        match s.read(&mut chunk) {
            Ok(0) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return None,
            Err(e) => panic!("no answer and no close from the broker: {e}"),
        }
    }
}

#[test]
fn an_idle_connection_closes_after_the_configured_timeout_an_active_one_stays() {
    let b = RawBroker::start(&["serverChannelMaxIdleTimeSeconds=2"]);
    // One connection that served a request and then went quiet, one that never said anything.
    let mut quiet = TcpStream::connect(b.broker).unwrap();
    assert_eq!(try_send_on(&mut quiet), Some(0));
    let mut mute = TcpStream::connect(b.broker).unwrap();
    let idle_since = Instant::now();
    // An active client keeps talking every 400 ms for 5 s, longer than twice the timeout.
    let addr = b.broker;
    let active = std::thread::spawn(move || {
        let mut c = Conn::connect(addr);
        let end = Instant::now() + Duration::from_secs(5);
        let mut n = 0;
        while Instant::now() < end {
            let r = c.call(send_cmd("ActiveT", 0, b"tick", ""));
            assert_eq!(r.code, 0, "active client: {:?}", r.remark);
            n += 1;
            std::thread::sleep(Duration::from_millis(400));
        }
        let r = c.call(send_cmd("ActiveT", 0, b"last", ""));
        assert_eq!(
            r.code, 0,
            "the active connection was closed: {:?}",
            r.remark
        );
        n
    });
    std::thread::sleep(Duration::from_millis(1200));
    assert!(still_open(&quiet), "closed before the 2 s idle timeout");
    assert!(still_open(&mute), "closed before the 2 s idle timeout");
    for (name, s) in [("quiet", &mut quiet), ("mute", &mut mute)] {
        let (ended, _) = read_until_closed(s, Duration::from_secs(6));
        let after = idle_since.elapsed();
        assert_eq!(
            ended,
            Ended::Closed,
            "{name} connection still open after {after:?}"
        );
        // The broker checks once a second: closed between 2 and 3 s, plus scheduling slack.
        assert!(
            after < Duration::from_secs(5),
            "{name} closed only after {after:?}"
        );
    }
    let ticks = active.join().expect("active client");
    assert!(ticks >= 8, "active client managed only {ticks} round trips");
    still_serves(&b);
}

#[test]
fn a_client_that_never_reads_is_cut_after_the_write_stall_timeout() {
    let b = RawBroker::start(&["writeStallTimeoutMills=1500"]);
    fill_backlog(&b, "StallT", 0, 600, 4096);
    still_serves(&b);
    // Let the broker see the helpers' connections close before taking the baseline.
    std::thread::sleep(Duration::from_millis(500));
    let base = broker_sample(&b);
    // 80 pulls of 32 x 4 KiB: ~10 MiB of answers, more than both socket buffers hold.
    let pulls: Vec<u8> = (0..80)
        .flat_map(|k| frame(pull_cmd("StallT", 0, (k * 7) % 560, 0), k as i32))
        .collect();
    let mut hog = TcpStream::connect(b.broker).unwrap();
    hog.write_all(&pulls).unwrap();
    let hog_sent = Instant::now();
    // A slow but steady reader of the same load: its drain takes far longer than 1.5 s, yet
    // every answer makes progress, so it must not be cut.
    let addr = b.broker;
    let steady = std::thread::spawn(move || {
        let mut c = Conn::connect(addr);
        c.write_raw(&pulls).unwrap();
        let started = Instant::now();
        for _ in 0..80 {
            let r = c.read().expect("the steady reader was disconnected");
            assert_eq!(r.code, 0, "pull: {:?}", r.remark);
            std::thread::sleep(Duration::from_millis(60));
        }
        // The connection stays open until joined, so the fd count below sees only the hog go.
        (started.elapsed(), c)
    });
    // Others are served while the hog is stuck.
    let mut c = Conn::connect(b.broker);
    for i in 0..20 {
        let r = c.call(send_cmd("StallOtherT", 0, format!("o{i}").as_bytes(), ""));
        assert_eq!(r.code, 0, "send next to a stalled client: {:?}", r.remark);
    }
    // The hog's connection is freed on the broker side while the hog still holds it unread.
    let deadline = hog_sent + Duration::from_secs(10);
    while broker_sample(&b).fds > base.fds + 2 {
        assert!(
            Instant::now() < deadline,
            "the non-reading client was not cut: {:?} vs {base:?}",
            broker_sample(&b)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let cut_after = hog_sent.elapsed();
    // And the hog sees its connection end before it got every answer.
    let (ended, bytes) = read_until_closed(&mut hog, Duration::from_secs(10));
    assert_eq!(ended, Ended::Closed, "hog connection still open");
    assert!(
        bytes < 80 * 32 * 4096,
        "the hog got all {bytes} bytes: it was not cut"
    );
    let (steady_took, _steady_conn) = steady.join().expect("steady reader");
    eprintln!("write stall: hog cut after {cut_after:?} ({bytes} bytes delivered); steady reader took {steady_took:?}");
    assert!(
        steady_took > Duration::from_millis(3000),
        "the steady reader's drain ({steady_took:?}) did not outlast the stall timeout"
    );
    still_serves(&b);
}

#[test]
fn max_connections_refuses_the_next_one_and_admits_again_after_a_close() {
    let b = RawBroker::start(&["maxConnections=6", "shardCount=2"]);
    let mut held: Vec<TcpStream> = (0..6)
        .map(|i| {
            let mut s = TcpStream::connect(b.broker).unwrap();
            assert_eq!(try_send_on(&mut s), Some(0), "connection {i} not served");
            s
        })
        .collect();
    for _ in 0..3 {
        let mut extra = TcpStream::connect(b.broker).unwrap();
        assert_eq!(try_send_on(&mut extra), None, "a 7th connection was served");
    }
    for (i, s) in held.iter_mut().enumerate() {
        assert_eq!(try_send_on(s), Some(0), "held connection {i} lost");
    }
    drop(held.pop());
    // The broker frees the slot when it sees the close; a new connection is then admitted.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut s = TcpStream::connect(b.broker).unwrap();
        if try_send_on(&mut s) == Some(0) {
            break;
        }
        assert!(Instant::now() < deadline, "no slot freed after a close");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn max_connections_per_shard_bounds_each_shard() {
    let b = RawBroker::start(&["shardCount=2", "maxConnectionsPerShard=3"]);
    let mut served = Vec::new();
    let mut refused = 0;
    for _ in 0..12 {
        let mut s = TcpStream::connect(b.broker).unwrap();
        match try_send_on(&mut s) {
            Some(0) => served.push(s),
            Some(code) => panic!("send answered {code}"),
            None => refused += 1,
        }
    }
    // The kernel spreads connections over the two shards' listeners: each admits at most 3.
    assert!(
        (3..=6).contains(&served.len()),
        "{} of 12 served with 2 shards x 3",
        served.len()
    );
    assert_eq!(served.len() + refused, 12);
}

fn ringmq_serve(dir: &std::path::Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args([
            "serve",
            "--console-listen",
            "off",
            "--namesrv-listen",
            "127.0.0.1:0",
        ])
        .args([
            "--broker-listen",
            "127.0.0.1:0",
            "-o",
            "brokerIP1=127.0.0.1",
        ])
        .arg("--store-dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run ringmq")
}

#[test]
fn a_bad_limit_is_a_clear_startup_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = ringmq_serve(dir.path(), &["-o", "serverChannelMaxIdleTimeSeconds=0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started with an idle timeout of 0");
    assert!(
        err.contains("serverChannelMaxIdleTimeSeconds") && err.contains("1..="),
        "{err}"
    );
    // From a broker.conf: a relation between two keys.
    let conf = dir.path().join("broker.conf");
    std::fs::write(
        &conf,
        "maxInflightPerConnection=64\nconnectionOutboxCapacity=32\n",
    )
    .unwrap();
    let out = ringmq_serve(dir.path(), &["-c", conf.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started with outbox < in-flight");
    assert!(
        err.contains("connectionOutboxCapacity") && err.contains("maxInflightPerConnection"),
        "{err}"
    );
    // Nothing was created: the config is refused before the store opens.
    assert!(!dir.path().join("commitlog").exists());
}
