//! Support for byte-level tests: start a `ringmq serve` child on ephemeral ports in a temporary
//! store, and talk to it with ringmq's own codec over plain blocking sockets.
#![allow(dead_code)]

pub mod admin;
pub mod controller;
pub mod pop;
pub mod proxy;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ringmq::protocol::frame::split_frame;
use ringmq::protocol::RemotingCommand;

pub struct RawBroker {
    pub child: Child,
    pub namesrv: SocketAddr,
    pub broker: SocketAddr,
    /// The HA port slaves connect to (a master's).
    pub ha: Option<SocketAddr>,
    /// The Prometheus endpoint, with `metricsExporterType=PROM` (port 0 lets the OS choose).
    pub metrics: Option<SocketAddr>,
    /// The gRPC endpoint, when the options name [`GRPC`].
    pub grpc: Option<SocketAddr>,
    pub dir: tempfile::TempDir,
}

/// Among a broker's options: serve the gRPC endpoint on a port the OS chooses (every other
/// broker a test starts runs without one, `--grpc-listen off`).
pub const GRPC: &str = "+grpc";

impl RawBroker {
    pub fn start(opts: &[&str]) -> RawBroker {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(dir, opts)
    }

    pub fn start_in(dir: tempfile::TempDir, opts: &[&str]) -> RawBroker {
        Self::spawn(dir, opts, Stdio::null())
    }

    /// As `start_in`, with the broker's log (stderr) appended to the file at `log`.
    pub fn start_logged(dir: tempfile::TempDir, opts: &[&str], log: &std::path::Path) -> RawBroker {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("open log file");
        Self::spawn(dir, opts, Stdio::from(file))
    }

    /// `ringmq broker` alone, registered with the name server at `namesrv` (a slave beside a
    /// `serve` master, say).
    pub fn start_broker(namesrv: SocketAddr, opts: &[&str]) -> RawBroker {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::spawn_with(Some(namesrv), dir, opts, Stdio::null())
    }

    /// As `start_in`, with the broker.conf at `conf` (`-c`) read before the `-o` options.
    pub fn start_with_conf(
        dir: tempfile::TempDir,
        conf: &std::path::Path,
        opts: &[&str],
    ) -> RawBroker {
        Self::spawn_conf(None, Some(conf), dir, opts, Stdio::null())
    }

    fn spawn(dir: tempfile::TempDir, opts: &[&str], stderr: Stdio) -> RawBroker {
        Self::spawn_with(None, dir, opts, stderr)
    }

    fn spawn_with(
        namesrv_of: Option<SocketAddr>,
        dir: tempfile::TempDir,
        opts: &[&str],
        stderr: Stdio,
    ) -> RawBroker {
        Self::spawn_conf(namesrv_of, None, dir, opts, stderr)
    }

    fn spawn_conf(
        namesrv_of: Option<SocketAddr>,
        conf: Option<&std::path::Path>,
        dir: tempfile::TempDir,
        opts: &[&str],
        stderr: Stdio,
    ) -> RawBroker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
        match namesrv_of {
            // Tests run in parallel: no broker takes the console's default port.
            None => cmd.args([
                "serve",
                "--namesrv-listen",
                "127.0.0.1:0",
                "--console-listen",
                "off",
            ]),
            Some(ns) => cmd.args(["broker", "--namesrv-addr", &ns.to_string()]),
        };
        if let Some(c) = conf {
            cmd.arg("-c").arg(c);
        }
        let grpc = opts.contains(&GRPC);
        cmd.args(["--grpc-listen", if grpc { "127.0.0.1:0" } else { "off" }]);
        cmd.args(["--broker-listen", "127.0.0.1:0", "--store-dir"])
            .arg(dir.path())
            // No brokerIP1: bound to loopback, routes and msg ids name loopback by themselves.
            .args(["-o", "mappedFileSizeCommitLog=16777216"]);
        // As the client harness (tests/common): the whole suite can run under SYNC_FLUSH.
        if let Ok(flush) = std::env::var("RINGMQ_TEST_FLUSH_DISK_TYPE") {
            if !flush.is_empty() {
                cmd.args(["-o", &format!("flushDiskType={flush}")]);
            }
        }
        for o in opts.iter().filter(|o| **o != GRPC) {
            cmd.args(["-o", o]);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn ringmq");
        let out = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(out).lines();
        let mut namesrv = namesrv_of;
        let mut broker = None;
        let mut ha = None;
        // A master prints its HA address right after its broker address; a slave has none.
        let slave = opts.contains(&"brokerRole=SLAVE");
        let prom = opts.contains(&"metricsExporterType=PROM");
        let mut metrics = None;
        let mut grpc_addr = None;
        while namesrv.is_none()
            || broker.is_none()
            || (ha.is_none() && !slave)
            || (metrics.is_none() && prom)
            || (grpc_addr.is_none() && grpc)
        {
            let line = lines
                .next()
                .expect("ringmq exited before printing its addresses")
                .expect("read stdout");
            if let Some(a) = line.strip_prefix("namesrv listening on ") {
                namesrv = Some(a.trim().parse().expect("namesrv addr"));
            } else if let Some(a) = line.strip_prefix("broker listening on ") {
                broker = Some(a.trim().parse().expect("broker addr"));
            } else if let Some(a) = line.strip_prefix("grpc listening on ") {
                grpc_addr = Some(a.trim().parse().expect("grpc addr"));
            } else if let Some(a) = line.strip_prefix("ha listening on ") {
                ha = Some(a.trim().parse().expect("ha addr"));
            } else if let Some(a) = line.strip_prefix("metrics listening on http://") {
                metrics = Some(
                    a.trim_end_matches("/metrics")
                        .parse()
                        .expect("metrics addr"),
                );
            }
        }
        // The lines after these (the metrics endpoint's, say) must find the pipe open: a print
        // to a closed stdout stops the broker. The reader ends with the child.
        std::thread::spawn(move || lines.for_each(drop));
        RawBroker {
            child,
            namesrv: namesrv.unwrap(),
            broker: broker.unwrap(),
            ha,
            metrics,
            grpc: grpc_addr,
            dir,
        }
    }

    /// SIGTERM and wait: a clean shutdown.
    pub fn stop(mut self) -> tempfile::TempDir {
        // SAFETY: plain kill(2) on our child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success(), "ringmq exited with {status}");
                break;
            }
            assert!(Instant::now() < deadline, "ringmq did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }

    /// SIGKILL and wait: a crash, the abort file left behind.
    pub fn kill9(mut self) -> tempfile::TempDir {
        self.child.kill().expect("SIGKILL ringmq");
        self.child.wait().expect("wait for ringmq");
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }
}

impl Drop for RawBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking connection speaking frames.
pub struct Conn {
    pub stream: TcpStream,
    buf: BytesMut,
    opaque: i32,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Conn {
            stream,
            buf: BytesMut::new(),
            opaque: 1000,
        }
    }

    pub fn send(&mut self, mut cmd: RemotingCommand) -> i32 {
        self.opaque += 1;
        cmd.opaque = self.opaque;
        let mut b = BytesMut::new();
        cmd.encode(&mut b).unwrap();
        self.stream.write_all(&b).unwrap();
        self.opaque
    }

    /// Writes `cmd` with its opaque as it is: a client's answer to a request from the broker.
    pub fn send_answer(&mut self, cmd: RemotingCommand) {
        let mut b = BytesMut::new();
        cmd.encode(&mut b).unwrap();
        self.stream.write_all(&b).unwrap();
    }

    pub fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads the next frame; None when the peer closed the connection.
    pub fn read(&mut self) -> Option<RemotingCommand> {
        let mut chunk = [0u8; 65536];
        loop {
            if let Some(f) = split_frame(&mut self.buf, 64 << 20).expect("frame") {
                return Some(RemotingCommand::decode(f).expect("decode"));
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    /// Reads and discards whatever arrives; false once the peer closed (or errored).
    pub fn read_lenient(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        matches!(self.stream.read(&mut chunk), Ok(n) if n > 0)
    }

    /// As `call`, but `None` instead of a panic when the connection breaks (the broker died).
    pub fn try_call(&mut self, mut cmd: RemotingCommand) -> Option<RemotingCommand> {
        self.opaque += 1;
        cmd.opaque = self.opaque;
        let mut b = BytesMut::new();
        cmd.encode(&mut b).ok()?;
        self.stream.write_all(&b).ok()?;
        let mut chunk = [0u8; 65536];
        loop {
            if let Some(f) = split_frame(&mut self.buf, 64 << 20).ok()? {
                let r = RemotingCommand::decode(f).ok()?;
                if r.is_response() && r.opaque == self.opaque {
                    return Some(r);
                }
                continue;
            }
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Sends and waits for the response with the same opaque (skipping server requests).
    pub fn call(&mut self, cmd: RemotingCommand) -> RemotingCommand {
        self.try_call(cmd)
            .expect("connection closed while waiting for a response")
    }
}

pub fn send_cmd(topic: &str, queue_id: i32, body: &[u8], props: &str) -> RemotingCommand {
    use ringmq::protocol::codes::request_code;
    RemotingCommand::new_request(request_code::SEND_MESSAGE_V2)
        .with_ext("a", "pg")
        .with_ext("b", topic)
        .with_ext("c", "TBW102")
        .with_ext("d", 4)
        .with_ext("e", queue_id)
        .with_ext("f", 0)
        .with_ext("g", 1_700_000_000_000i64)
        .with_ext("h", 0)
        .with_ext("i", props)
        .with_ext("j", 0)
        .with_ext("k", false)
        .with_ext("m", false)
        .with_body(body.to_vec())
}

/// UPDATE_AND_CREATE_TOPIC: `topic` with `queues` read and write queues, read-write, from the
/// TBW102 template.
pub fn create_topic_cmd(topic: &str, queues: i32) -> RemotingCommand {
    use ringmq::protocol::codes::request_code;
    RemotingCommand::new_request(request_code::UPDATE_AND_CREATE_TOPIC)
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("readQueueNums", queues)
        .with_ext("writeQueueNums", queues)
        .with_ext("perm", 6)
        .with_ext("topicFilterType", "SINGLE_TAG")
        .with_ext("topicSysFlag", 0)
        .with_ext("order", false)
}

pub fn pull_cmd(topic: &str, queue_id: i32, offset: i64, suspend_ms: i64) -> RemotingCommand {
    use ringmq::protocol::codes::request_code;
    // sysFlag: SUSPEND | SUBSCRIPTION
    RemotingCommand::new_request(request_code::PULL_MESSAGE)
        .with_ext("consumerGroup", "cg")
        .with_ext("topic", topic)
        .with_ext("queueId", queue_id)
        .with_ext("queueOffset", offset)
        .with_ext("maxMsgNums", 32)
        .with_ext("sysFlag", if suspend_ms > 0 { 2 | 4 } else { 4 })
        .with_ext("commitOffset", 0)
        .with_ext("suspendTimeoutMillis", suspend_ms)
        .with_ext("subscription", "*")
        .with_ext("subVersion", 0)
        .with_ext("expressionType", "TAG")
}

/// Splits a pull body into stored records.
pub fn records(body: &[u8]) -> Vec<ringmq::protocol::message::DecodedRecord<'_>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let r = ringmq::protocol::message::decode(&body[pos..], true).expect("stored record");
        pos += r.total_size as usize;
        out.push(r);
    }
    out
}
