//! A ringmq master speaks the classic HA protocol on its HA port, byte for byte as a Java
//! slave expects it: after the slave's first 8-byte report it streams the commit log in frames
//! of a 12-byte header (offset, size) and raw commit-log bytes, contiguous, never crossing a
//! segment, no larger than `haTransferBatchSize`, with empty frames as heartbeats; an empty
//! slave (report 0) starts at the master's last segment; a report past the master's end closes
//! the connection. The bytes received equal the master's segment files. Bad slaves (garbage,
//! a lie about their offset, half a report, one that stops reading) are dropped while a good
//! slave and the clients are served.

use crate::raw_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use raw_support::{send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::response_code;

const SEGMENT: u64 = 262_144;
const BATCH: u32 = 4096;

fn start_master() -> RawBroker {
    RawBroker::start(&[
        &format!("mappedFileSizeCommitLog={SEGMENT}"),
        "maxMessageSize=8192",
        &format!("haTransferBatchSize={BATCH}"),
        "haSendHeartbeatInterval=200",
    ])
}

/// Sends `n` messages of 1 KiB.
fn send(master: &RawBroker, n: usize) {
    let mut c = Conn::connect(master.broker);
    let body = vec![b'x'; 1024];
    for i in 0..n {
        let r = c.call(send_cmd("HaTopic", (i % 4) as i32, &body, ""));
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
}

/// A slave's end of the HA connection, written as Java's `DefaultHAClient` behaves.
struct Slave {
    s: TcpStream,
}

impl Slave {
    fn connect(ha: SocketAddr) -> Slave {
        let s = TcpStream::connect(ha).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Slave { s }
    }

    fn report(&mut self, offset: u64) {
        self.s.write_all(&(offset as i64).to_be_bytes()).unwrap();
    }

    /// The next frame: (offset, body); `None` when the master closed the connection.
    fn frame(&mut self) -> Option<(u64, Vec<u8>)> {
        let mut h = [0u8; 12];
        self.s.read_exact(&mut h).ok()?;
        let phy = i64::from_be_bytes(h[..8].try_into().unwrap());
        let size = i32::from_be_bytes(h[8..].try_into().unwrap());
        assert!(
            phy >= 0 && (0..=BATCH as i32).contains(&size),
            "{phy} {size}"
        );
        let mut body = vec![0u8; size as usize];
        self.s.read_exact(&mut body).unwrap();
        Some((phy as u64, body))
    }

    /// Frames from `from` until the first heartbeat (the master has nothing more): the bytes,
    /// checked to be contiguous and inside one segment each.
    fn until_idle(&mut self, from: u64) -> Vec<u8> {
        let mut at = from;
        let mut got = Vec::new();
        loop {
            let (phy, body) = self.frame().expect("the master keeps the connection");
            assert_eq!(phy, at, "frames are contiguous");
            if body.is_empty() {
                return got;
            }
            let end = phy + body.len() as u64;
            assert_eq!(
                phy / SEGMENT,
                (end - 1) / SEGMENT,
                "a frame never crosses a segment ({phy}..{end})"
            );
            at = end;
            got.extend_from_slice(&body);
            // As Java's slave: report after every frame it appended.
            self.report(at);
        }
    }
}

/// The master's commit-log bytes [from, from + len), read from its segment files.
fn commit_log(store: &Path, from: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut at = from;
    while out.len() < len {
        let seg = at - at % SEGMENT;
        let bytes = std::fs::read(store.join("commitlog").join(format!("{seg:020}"))).unwrap();
        let start = (at - seg) as usize;
        let take = (len - out.len()).min(bytes.len() - start);
        out.extend_from_slice(&bytes[start..start + take]);
        at += take as u64;
    }
    out
}

/// An empty slave starts at the master's last segment; a slave that reports an offset gets
/// the log from there, in order, equal to the files, and keeps receiving what comes later.
#[test]
fn slaves_receive_the_commit_log_byte_for_byte() {
    let master = start_master();
    let ha = master.ha.expect("the master prints its HA address");
    send(&master, 700);

    let mut empty = Slave::connect(ha);
    empty.report(0);
    let (first, body) = empty.frame().unwrap();
    assert_eq!(
        first % SEGMENT,
        0,
        "an empty slave starts at a segment start"
    );
    assert!(
        first >= SEGMENT,
        "700 KiB of messages fill more than one 256 KiB segment"
    );
    let mut got = body.clone();
    empty.report(first + body.len() as u64);
    got.extend(empty.until_idle(first + body.len() as u64));
    assert!(!got.is_empty());
    assert_eq!(got, commit_log(master.dir.path(), first, got.len()));

    let mut full = Slave::connect(ha);
    full.report(1);
    let all = full.until_idle(1);
    assert_eq!(
        1 + all.len() as u64,
        first + got.len() as u64,
        "both reach the same end"
    );
    assert_eq!(all, commit_log(master.dir.path(), 1, all.len()));

    // Later sends follow on the open connection.
    let end = 1 + all.len() as u64;
    send(&master, 20);
    let more = full.until_idle(end);
    assert!(more.len() > 20 * 1024, "{}", more.len());
    assert_eq!(more, commit_log(master.dir.path(), end, more.len()));
}

/// A report past the master's end is refused: the master closes the connection.
#[test]
fn a_report_past_the_end_closes_the_connection() {
    let master = start_master();
    let ha = master.ha.unwrap();
    send(&master, 5);
    let mut s = Slave::connect(ha);
    s.report(1 << 40);
    assert!(s.frame().is_none(), "the master sends nothing and closes");
}

/// Reads until the master closes the connection; false if it is still open after `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 65536];
    while std::time::Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return true,
        }
    }
    false
}

/// Bad slaves are dropped one by one while a good slave and the clients are served: garbage,
/// a later report past the end, a half-sent report, and a slave that stops reading.
#[test]
fn bad_slaves_are_dropped_and_the_rest_served() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let master = RawBroker::start(&[
        &format!("mappedFileSizeCommitLog={SEGMENT}"),
        "maxMessageSize=8192",
        &format!("haTransferBatchSize={BATCH}"),
        "haSendHeartbeatInterval=200",
        "haHousekeepingInterval=1000",
    ]);
    let ha = master.ha.unwrap();
    send(&master, 300);
    // A good slave, as Java's: it reads all the time and reports after every frame, the
    // heartbeats included.
    let stop = Arc::new(AtomicBool::new(false));
    let good_end = Arc::new(AtomicU64::new(1));
    let good = {
        let (stop, good_end) = (stop.clone(), good_end.clone());
        std::thread::spawn(move || {
            let mut s = Slave::connect(ha);
            s.report(1);
            let mut got = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let (phy, body) = s.frame().expect("the good slave stays connected");
                assert_eq!(phy, 1 + got.len() as u64, "frames are contiguous");
                got.extend_from_slice(&body);
                good_end.store(1 + got.len() as u64, Ordering::SeqCst);
                s.report(1 + got.len() as u64);
            }
            got
        })
    };

    // Garbage: text read as offsets far past the end.
    let mut garbage = TcpStream::connect(ha).unwrap();
    garbage
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert!(
        closed_within(&mut garbage, Duration::from_secs(5)),
        "garbage"
    );

    // A valid start, then a report of bytes the master never sent.
    let mut liar = Slave::connect(ha);
    liar.report(1);
    liar.report(1 << 40);
    assert!(
        closed_within(&mut liar.s, Duration::from_secs(5)),
        "a report past the end"
    );

    // Half a report, then silence: housekeeping drops it.
    let mut half = TcpStream::connect(ha).unwrap();
    half.write_all(&[0, 0, 0, 0]).unwrap();
    assert!(
        closed_within(&mut half, Duration::from_secs(5)),
        "half a report"
    );

    // A slave that asks for everything and keeps reporting but never reads: more than the
    // sockets can buffer stalls the master's writes, and it is dropped after housekeeping
    // (then reading finds the end of the stream).
    let mut stuck = Slave::connect(ha);
    stuck.report(1);
    let stuck_beat = {
        let (mut s, stop) = (stuck.s.try_clone().unwrap(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if s.write_all(&1i64.to_be_bytes()).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    send(&master, 12_000);
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        closed_within(&mut stuck.s, Duration::from_secs(5)),
        "a slave that stopped reading"
    );

    // The good slave got everything meanwhile, and clients were served throughout.
    send(&master, 5);
    let want = commit_log_end(master.dir.path());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while good_end.load(Ordering::SeqCst) < want {
        assert!(
            std::time::Instant::now() < deadline,
            "the good slave fell behind"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    let got = good.join().expect("the good slave");
    stuck_beat.join().unwrap();
    assert!(got.len() > 12_000 * 1024, "{}", got.len());
    assert_eq!(got, commit_log(master.dir.path(), 1, got.len()));
}

/// Where the master's commit log ends: the last segment's last record.
fn commit_log_end(store: &Path) -> u64 {
    let dir = store.join("commitlog");
    let mut segs: Vec<u64> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    segs.sort();
    for seg in segs.into_iter().rev() {
        let bytes = std::fs::read(dir.join(format!("{seg:020}"))).unwrap();
        let mut at = 0usize;
        while at + 8 <= bytes.len() {
            let total = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            let magic = u32::from_be_bytes(bytes[at + 4..at + 8].try_into().unwrap());
            // A blank end marker's magic ends a full segment; total 0 ends the written part.
            if total == 0 || magic == ringmq::protocol::message::BLANK_MAGIC {
                break;
            }
            at += total;
        }
        if at > 0 {
            return seg + at as u64;
        }
    }
    0
}
