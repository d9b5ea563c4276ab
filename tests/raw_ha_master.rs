//! A ringmq master speaks the classic HA protocol on its HA port, byte for byte as a Java
//! slave expects it: after the slave's first 8-byte report it streams the commit log in frames
//! of a 12-byte header (offset, size) and raw commit-log bytes, contiguous, never crossing a
//! segment, no larger than `haTransferBatchSize`, with empty frames as heartbeats; an empty
//! slave (report 0) starts at the master's last segment; a report past the master's end closes
//! the connection. The bytes received equal the master's segment files.

mod raw_support;

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
