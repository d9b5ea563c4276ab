//! `ringmq serve --controller-config`: one process runs a controller beside the name server and
//! the broker (Java's `enableControllerInNamesrv`), and the broker, in controller mode with it,
//! gets broker id 1 from it, is elected master, takes sends, and is master again after a
//! restart on the same store, in the same epoch, its id and epochs kept in `brokerIdentity` and
//! the epoch file.

mod raw_support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use raw_support::controller::free_ports;
use raw_support::{create_topic_cmd, send_cmd, Conn};
use ringmq::protocol::codes::response_code;

/// Starts `serve` with its embedded controller; returns the child and the broker's address.
fn serve(dir: &std::path::Path, port: u16) -> (std::process::Child, std::net::SocketAddr) {
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
    let mut broker = None;
    for line in BufReader::new(out).lines() {
        let line = line.unwrap();
        if let Some(a) = line.strip_prefix("broker listening on ") {
            broker = Some(a.trim().parse().unwrap());
            break;
        }
    }
    (child, broker.expect("broker address"))
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
