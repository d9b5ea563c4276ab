//! `ringmq serve --controller-config`: one process runs a controller beside the name server and
//! the broker (Java's `enableControllerInNamesrv`), and the broker, in controller mode with it,
//! gets broker id 1 from it, is elected master, takes sends, and is master again after a
//! restart on the same store, in the same epoch, its id and epochs kept in `brokerIdentity` and
//! the epoch file.

use crate::raw_support;

use std::io::{BufRead, BufReader};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use raw_support::controller::free_ports;
use raw_support::{create_topic_cmd, send_cmd, Conn};
use ringmq::protocol::body::{from_json, EpochEntryCache};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::ha_autoswitch::{
    decode_master_message, encode_ack, MasterMessage, SlaveHandshake,
};
use ringmq::protocol::headers::NotifyBrokerRoleChangedRequestHeader;
use ringmq::protocol::RemotingCommand;

/// A `serve` process, killed when dropped (a failing test leaves nothing running).
struct Served(std::process::Child);

impl Served {
    fn kill(&mut self) -> std::io::Result<()> {
        self.0.kill()
    }
    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.0.wait()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _killed = self.0.kill();
        let _reaped = self.0.wait();
    }
}

/// Starts `serve` with its embedded controller; returns the child, the broker's address and its
/// HA address.
fn serve_ha(dir: &std::path::Path, port: u16) -> (Served, SocketAddr, SocketAddr) {
    let conf = dir.join("controller.conf");
    std::fs::write(
        &conf,
        format!(
            "controllerDLegerGroup=solo\ncontrollerDLegerPeers=n0-127.0.0.1:{port}\n\
             controllerDLegerSelfId=n0\ncontrollerStorePath={}\n",
            dir.join("controller").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args([
            "serve",
            "--console-listen",
            "off",
            "--grpc-listen",
            "off",
            "--namesrv-listen",
            "127.0.0.1:0",
            "--broker-listen",
            "127.0.0.1:0",
        ])
        .arg("--store-dir")
        .arg(dir.join("store"))
        .arg("--controller-config")
        .arg(&conf)
        .args([
            "-o",
            "brokerIP1=127.0.0.1",
            "-o",
            "syncBrokerMetadataPeriod=500",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ringmq serve");
    let out = child.stdout.take().unwrap();
    let child = Served(child);
    let (mut broker, mut ha) = (None, None);
    for line in BufReader::new(out).lines() {
        let line = line.unwrap();
        if let Some(a) = line.strip_prefix("broker listening on ") {
            broker = Some(a.trim().parse().unwrap());
        } else if let Some(a) = line.strip_prefix("ha listening on ") {
            ha = Some(a.trim().parse().unwrap());
            break;
        }
    }
    (
        child,
        broker.expect("broker address"),
        ha.expect("ha address"),
    )
}

fn serve(dir: &std::path::Path, port: u16) -> (Served, SocketAddr) {
    let (child, broker, _) = serve_ha(dir, port);
    (child, broker)
}

/// Sends until one is answered SUCCESS (the election takes a moment), within 15 s.
fn send_until_ok(addr: std::net::SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let mut c = Conn::connect(addr);
        c.call(create_topic_cmd("EmbeddedTopic", 2));
        if c.call(send_cmd("EmbeddedTopic", 0, b"x", "")).code == response_code::SUCCESS {
            return;
        }
        assert!(Instant::now() < deadline, "the broker never became master");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One process is a whole controller-mode group of one, and stays so across a restart.
#[test]
fn serve_runs_its_own_controller() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_ports(1)[0];
    let (mut child, addr) = serve(dir.path(), port);
    send_until_ok(addr);
    let identity = std::fs::read_to_string(dir.path().join("store").join("brokerIdentity"))
        .expect("brokerIdentity written");
    assert!(identity.ends_with("#1"), "{identity}");
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut child, addr) = serve(dir.path(), port);
    send_until_ok(addr);
    let epochs = std::fs::read_to_string(dir.path().join("store").join("epochFileCheckpoint"))
        .expect("epoch file");
    // Still the master of epoch 1, which still starts at the log's first byte.
    assert_eq!(epochs.lines().nth(2), Some("1-0"), "{epochs}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Whether the master closes a connection that sent `bytes` (within 3 s).
fn closed_after(ha: SocketAddr, bytes: &[u8]) -> bool {
    let mut s = TcpStream::connect(ha).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(bytes).unwrap();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return true,
            Ok(_) => {}
        }
    }
    false
}

/// The AutoSwitch HA port as a Java slave sees it (the handshake answer names epoch 1 from 0,
/// transfers carry it), and what a bad peer gets: garbage, an acknowledgement before the
/// handshake, half a handshake, or an acknowledgement past the master's end close that
/// connection only, while the broker goes on taking sends. A role-change notification with a
/// stale epoch, or none, changes nothing.
#[test]
fn bad_peers_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_ports(1)[0];
    let (mut child, addr, ha) = serve_ha(dir.path(), port);
    send_until_ok(addr);
    // A good slave: handshake, acknowledge 0, read the answer and the first transfer.
    let mut s = TcpStream::connect(ha).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let hs = SlaveHandshake {
        sync_from_last_file: false,
        async_learner: true,
        broker_id: 9,
    };
    s.write_all(&hs.encode()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    let (max, epochs) = loop {
        let n = s.read(&mut buf).expect("handshake answer");
        assert!(n > 0, "closed before answering the handshake");
        got.extend_from_slice(&buf[..n]);
        if let Some((MasterMessage::Handshake { max_offset, epochs }, used)) =
            decode_master_message(&got, 1 << 22).unwrap()
        {
            got.drain(..used);
            break (max_offset, epochs);
        }
    };
    assert!(max > 0);
    assert_eq!(
        (epochs.len(), epochs[0].epoch, epochs[0].start_offset),
        (1, 1, 0)
    );
    s.write_all(&encode_ack(0)).unwrap();
    let header = loop {
        if let Some((MasterMessage::Transfer(h), _)) = decode_master_message(&got, 1 << 22).unwrap()
        {
            break h;
        }
        let n = s.read(&mut buf).expect("a transfer");
        assert!(n > 0, "closed before the first transfer");
        got.extend_from_slice(&buf[..n]);
    };
    assert_eq!(
        (header.offset, header.epoch, header.epoch_start_offset),
        (0, 1, 0)
    );
    assert!(header.body_size > 0);
    drop(s);
    // Bad peers.
    assert!(
        closed_after(ha, &[0, 0, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8]),
        "garbage kept open"
    );
    assert!(
        closed_after(ha, &encode_ack(0)),
        "an ack before the handshake kept open"
    );
    assert!(
        closed_after(ha, &hs.encode()[..10]),
        "half a handshake kept open"
    );
    let mut past = hs.encode().to_vec();
    past.extend_from_slice(&encode_ack(i64::MAX as u64 / 2));
    assert!(closed_after(ha, &past), "an ack past the end kept open");
    // Stale and empty role changes.
    let mut c = Conn::connect(addr);
    let mut stale = RemotingCommand::new_request(request_code::NOTIFY_BROKER_ROLE_CHANGED);
    NotifyBrokerRoleChangedRequestHeader {
        master_address: Some("127.0.0.1:1".into()),
        master_epoch: Some(0),
        sync_state_set_epoch: Some(9),
        master_broker_id: Some(5),
    }
    .write_to(&mut stale);
    c.call(stale);
    c.call(
        RemotingCommand::new_request(request_code::NOTIFY_BROKER_ROLE_CHANGED)
            .with_body(&b"{garbage"[..]),
    );
    assert_eq!(
        c.call(send_cmd("EmbeddedTopic", 0, b"still master", ""))
            .code,
        response_code::SUCCESS
    );
    let r = c.call(RemotingCommand::new_request(
        request_code::GET_BROKER_EPOCH_CACHE,
    ));
    let cache: EpochEntryCache = from_json(&r.body).unwrap();
    assert_eq!((cache.broker_id, cache.epoch_list.len()), (1, 1));
    child.kill().unwrap();
    child.wait().unwrap();
}
