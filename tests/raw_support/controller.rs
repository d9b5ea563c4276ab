//! Support for controller tests: a group of `ringmq controller` children on their own loopback
//! ports and temp stores (killed on drop), and a raw-protocol fake broker in controller mode:
//! its requests (1012, 1013, 1003, 1002, 1001, 1004, 1006), a heartbeat thread that sends 904
//! to every controller, and a listener on its registered address that records what the
//! controllers push to it (NOTIFY_BROKER_ROLE_CHANGED).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ringmq::protocol::body::{from_json, to_json, SyncStateSet};
use ringmq::protocol::codes::request_code as rq;
use ringmq::protocol::frame::split_frame;
use ringmq::protocol::headers::*;
use ringmq::protocol::RemotingCommand;

use super::Conn;

/// The ringmq binary the controller-mode tests run: this build's, or `RINGMQ_TEST_BIN` (the
/// failover benchmark points it at a release build).
pub fn ringmq_bin() -> String {
    std::env::var("RINGMQ_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ringmq").to_string())
}

/// `n` loopback ports free right now (bound, read, released).
pub fn free_ports(n: usize) -> Vec<u16> {
    let ls: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    ls.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

/// Lines of each controller's log printed when a test fails (RINGMQ_TEST_CONTROLLER_LOG sets
/// the log filter, `info,openraft=warn` by default).
const LOG_TAIL_LINES: usize = 40;

pub struct ControllerGroup {
    /// The address every controller listens on (loopback, or a bridge the test made).
    pub host: std::net::Ipv4Addr,
    pub ports: Vec<u16>,
    pub dir: tempfile::TempDir,
    procs: Vec<Option<Child>>,
    extra: String,
}

impl ControllerGroup {
    /// Starts `n` controllers n0..n{n-1} with `extra` config lines.
    pub fn start(n: usize, extra: &str) -> ControllerGroup {
        Self::start_on(std::net::Ipv4Addr::LOCALHOST, n, extra)
    }

    /// As `start`, listening on `host`.
    pub fn start_on(host: std::net::Ipv4Addr, n: usize, extra: &str) -> ControllerGroup {
        let mut g = ControllerGroup {
            host,
            ports: free_ports(n),
            dir: tempfile::tempdir().expect("tempdir"),
            procs: (0..n).map(|_| None).collect(),
            extra: extra.to_owned(),
        };
        for i in 0..n {
            g.spawn(i);
        }
        g
    }

    pub fn addr(&self, i: usize) -> SocketAddr {
        SocketAddr::from((self.host, self.ports[i]))
    }

    pub fn addrs(&self) -> Vec<SocketAddr> {
        (0..self.ports.len()).map(|i| self.addr(i)).collect()
    }

    /// A connection that follows the leader (see `LeaderConn`).
    pub fn leader_conn(&self) -> LeaderConn {
        LeaderConn::new(self.addrs())
    }

    pub fn spawn(&mut self, i: usize) {
        let peers: Vec<String> = self
            .ports
            .iter()
            .enumerate()
            .map(|(j, p)| format!("n{j}-{}:{p}", self.host))
            .collect();
        let conf = self.dir.path().join(format!("c{i}.conf"));
        let store = self.dir.path().join(format!("store{i}"));
        std::fs::write(
            &conf,
            format!(
                "controllerDLegerGroup=test\ncontrollerDLegerPeers={}\ncontrollerDLegerSelfId=n{i}\ncontrollerStorePath={}\n{}\n",
                peers.join(";"),
                store.display(),
                self.extra
            ),
        )
        .unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("c{i}.log")))
            .unwrap();
        let mut child = Command::new(ringmq_bin())
            .args(["controller", "-c"])
            .arg(&conf)
            .env(
                "RINGMQ_LOG",
                std::env::var("RINGMQ_TEST_CONTROLLER_LOG")
                    .unwrap_or_else(|_| "info,openraft=warn".into()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn ringmq controller");
        let out = child.stdout.take().unwrap();
        let mut lines = BufReader::new(out).lines();
        loop {
            let line = lines
                .next()
                .expect("controller exited before listening")
                .unwrap();
            if line.starts_with("controller listening on ") {
                break;
            }
        }
        self.procs[i] = Some(child);
    }

    pub fn is_running(&self, i: usize) -> bool {
        self.procs[i].is_some()
    }

    pub fn kill9(&mut self, i: usize) {
        if let Some(mut c) = self.procs[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("c{i}.log"))).unwrap_or_default()
    }

    /// The leader's index once every running controller names it (1005) twice, 300 ms apart:
    /// right after start-up openraft may still hand leadership over once.
    pub fn leader(&self, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        let mut last = None;
        loop {
            let now = self.agreed_leader();
            if let Some(l) = now.filter(|_| now == last) {
                return l;
            }
            last = now;
            assert!(
                Instant::now() < deadline,
                "no stable controller leader within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// The leader every running controller names, if they agree and it says it leads.
    pub fn agreed_leader(&self) -> Option<usize> {
        let mut leader = None;
        for i in 0..self.ports.len() {
            if self.procs[i].is_none() {
                continue;
            }
            let m = metadata(self.addr(i))?;
            let id = m.controller_leader_id?;
            let idx: usize = id.strip_prefix('n')?.parse().ok()?;
            if leader.is_some_and(|l| l != idx) {
                return None;
            }
            leader = Some(idx);
        }
        let l = leader?;
        metadata(self.addr(l))?.is_leader.then_some(l)
    }
}

impl Drop for ControllerGroup {
    fn drop(&mut self) {
        for i in 0..self.procs.len() {
            self.kill9(i);
        }
        if std::thread::panicking() {
            for i in 0..self.procs.len() {
                let log = self.log(i);
                let tail: Vec<&str> = log.lines().rev().take(LOG_TAIL_LINES).collect();
                eprintln!("--- controller n{i} log tail ---");
                for l in tail.iter().rev() {
                    eprintln!("{l}");
                }
            }
        }
    }
}

/// Something that answers requests: a plain connection, or one that follows the leader.
pub trait Call {
    fn call(&mut self, cmd: RemotingCommand) -> RemotingCommand;
}

impl Call for Conn {
    fn call(&mut self, cmd: RemotingCommand) -> RemotingCommand {
        Conn::call(self, cmd)
    }
}

/// A connection that never panics: None if the peer cannot be reached or closes.
struct TryConn {
    stream: TcpStream,
    buf: BytesMut,
}

impl TryConn {
    fn connect(addr: SocketAddr) -> Option<TryConn> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(15)))
            .ok()?;
        stream.set_nodelay(true).ok()?;
        Some(TryConn {
            stream,
            buf: BytesMut::new(),
        })
    }

    fn call(&mut self, mut cmd: RemotingCommand) -> Option<RemotingCommand> {
        cmd.opaque = cmd.opaque.wrapping_add(1);
        let mut b = BytesMut::new();
        cmd.encode(&mut b).ok()?;
        self.stream.write_all(&b).ok()?;
        let mut chunk = [0u8; 65536];
        loop {
            while let Some(f) = split_frame(&mut self.buf, 64 << 20).ok()? {
                let r = RemotingCommand::decode(f).ok()?;
                if r.is_response() && r.opaque == cmd.opaque {
                    return Some(r);
                }
            }
            let n = std::io::Read::read(&mut self.stream, &mut chunk).ok()?;
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// CONTROLLER_GET_METADATA_INFO on one controller; None if it cannot be reached.
pub fn metadata(addr: SocketAddr) -> Option<GetMetaDataResponseHeader> {
    let r = TryConn::connect(addr)?.call(RemotingCommand::new_request(
        rq::CONTROLLER_GET_METADATA_INFO,
    ))?;
    GetMetaDataResponseHeader::from_command(&r).ok()
}

/// Sends each request to the current leader: when the answer is CONTROLLER_NOT_LEADER or the
/// connection breaks, finds the leader again (1005) and resends, as a Java broker does, for
/// up to 20 s. Only 2007 and a lost connection are retried: the request was not applied.
pub struct LeaderConn {
    addrs: Vec<SocketAddr>,
    conn: Option<TryConn>,
}

impl LeaderConn {
    pub fn new(addrs: Vec<SocketAddr>) -> LeaderConn {
        LeaderConn { addrs, conn: None }
    }

    fn find(&self) -> Option<TryConn> {
        let leader = self
            .addrs
            .iter()
            .find(|a| metadata(**a).is_some_and(|m| m.is_leader))?;
        TryConn::connect(*leader)
    }
}

impl Call for LeaderConn {
    fn call(&mut self, cmd: RemotingCommand) -> RemotingCommand {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if self.conn.is_none() {
                self.conn = self.find();
            }
            if let Some(c) = self.conn.as_mut() {
                match c.call(cmd.clone()) {
                    Some(r)
                        if r.code
                            != ringmq::protocol::codes::response_code::CONTROLLER_NOT_LEADER =>
                    {
                        return r
                    }
                    _ => self.conn = None,
                }
            }
            assert!(
                Instant::now() < deadline,
                "no leader answered code {}",
                cmd.code
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

pub fn next_id_cmd(broker_name: &str) -> RemotingCommand {
    let mut c = RemotingCommand::new_request(rq::CONTROLLER_GET_NEXT_BROKER_ID);
    GetNextBrokerIdRequestHeader {
        cluster_name: "c".into(),
        broker_name: broker_name.into(),
    }
    .write_to(&mut c);
    c
}

pub fn apply_id_cmd(broker_name: &str, id: i64, check_code: &str) -> RemotingCommand {
    let mut c = RemotingCommand::new_request(rq::CONTROLLER_APPLY_BROKER_ID);
    ApplyBrokerIdRequestHeader {
        cluster_name: "c".into(),
        broker_name: broker_name.into(),
        applied_broker_id: id,
        register_check_code: check_code.into(),
    }
    .write_to(&mut c);
    c
}

pub fn register_cmd(broker_name: &str, id: i64, addr: &str) -> RemotingCommand {
    let mut c = RemotingCommand::new_request(rq::CONTROLLER_REGISTER_BROKER);
    RegisterBrokerToControllerRequestHeader {
        cluster_name: "c".into(),
        broker_name: broker_name.into(),
        broker_id: id,
        broker_address: addr.into(),
        invoke_time: None,
    }
    .write_to(&mut c);
    c
}

pub fn elect_cmd(broker_name: &str, id: i64) -> RemotingCommand {
    let mut c = RemotingCommand::new_request(rq::CONTROLLER_ELECT_MASTER);
    ElectMasterRequestHeader {
        cluster_name: "c".into(),
        broker_name: broker_name.into(),
        broker_id: id,
        designate_elect: Some(false),
        invoke_time: None,
    }
    .write_to(&mut c);
    c
}

pub fn alter_cmd(
    broker_name: &str,
    master: i64,
    master_epoch: i32,
    set: &[i64],
    set_epoch: i32,
) -> RemotingCommand {
    let mut c = RemotingCommand::new_request(rq::CONTROLLER_ALTER_SYNC_STATE_SET);
    AlterSyncStateSetRequestHeader {
        broker_name: broker_name.into(),
        master_broker_id: master,
        master_epoch,
        invoke_time: None,
    }
    .write_to(&mut c);
    c.with_body(to_json(&SyncStateSet {
        sync_state_set: set.iter().copied().collect(),
        sync_state_set_epoch: set_epoch,
    }))
}

pub fn replica_info_cmd(broker_name: &str) -> RemotingCommand {
    let mut c = RemotingCommand::new_request(rq::CONTROLLER_GET_REPLICA_INFO);
    GetReplicaInfoRequestHeader {
        broker_name: broker_name.into(),
    }
    .write_to(&mut c);
    c
}

pub fn sync_state_data_cmd(names: &[&str]) -> RemotingCommand {
    RemotingCommand::new_request(rq::CONTROLLER_GET_SYNC_STATE_DATA).with_body(to_json(&names))
}

/// 1004's answer decoded: (masterBrokerId, masterEpoch, SyncStateSet).
pub fn replica_info(
    c: &mut impl Call,
    broker_name: &str,
) -> (Option<i64>, Option<i32>, SyncStateSet) {
    let r = c.call(replica_info_cmd(broker_name));
    assert_eq!(r.code, 0, "1004: {:?}", r.remark);
    let h = GetReplicaInfoResponseHeader::from_command(&r).unwrap();
    let s: SyncStateSet = from_json(&r.body).unwrap();
    (h.master_broker_id, h.master_epoch, s)
}

/// A fake broker: a listener on its registered address that records pushed commands, and a
/// heartbeat thread to every controller (epoch and maxOffset as given).
pub struct FakeBroker {
    pub name: String,
    pub id: i64,
    pub addr: SocketAddr,
    pub pushed: Receiver<RemotingCommand>,
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    beat: Option<std::thread::JoinHandle<()>>,
}

impl FakeBroker {
    pub fn new(name: &str) -> FakeBroker {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let Ok(mut s) = s else { continue };
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let mut buf = BytesMut::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        while let Ok(Some(f)) = split_frame(&mut buf, 1 << 20) {
                            if let Ok(c) = RemotingCommand::decode(f) {
                                let _ = tx.send(c);
                            }
                        }
                        match std::io::Read::read(&mut s, &mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                });
            }
        });
        FakeBroker {
            name: name.into(),
            id: -1,
            addr,
            pushed: rx,
            stop: Arc::new(AtomicBool::new(false)),
            paused: Arc::new(AtomicBool::new(false)),
            beat: None,
        }
    }

    pub fn addr_str(&self) -> String {
        self.addr.to_string()
    }

    /// Starts sending 904 every 300 ms to each of `controllers` on one connection each
    /// (reconnecting to a controller that went away), with a 2 s heartbeat timeout.
    pub fn start_heartbeats(&mut self, controllers: Vec<SocketAddr>, epoch: i32, max_offset: i64) {
        let (stop, paused) = (self.stop.clone(), self.paused.clone());
        let (name, id, addr) = (self.name.clone(), self.id, self.addr_str());
        self.beat = Some(std::thread::spawn(move || {
            let mut conns: Vec<Option<TcpStream>> = controllers.iter().map(|_| None).collect();
            while !stop.load(Ordering::SeqCst) {
                if paused.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                for (i, c) in controllers.iter().enumerate() {
                    if conns[i].is_none() {
                        conns[i] = TcpStream::connect_timeout(c, Duration::from_millis(200)).ok();
                    }
                    let Some(s) = conns[i].as_mut() else { continue };
                    let mut cmd = RemotingCommand::new_request(rq::BROKER_HEARTBEAT);
                    BrokerHeartbeatRequestHeader {
                        cluster_name: "c".into(),
                        broker_addr: addr.clone(),
                        broker_name: name.clone(),
                        broker_id: Some(id),
                        epoch: Some(epoch),
                        max_offset: Some(max_offset),
                        confirm_offset: Some(max_offset),
                        heartbeat_timeout_mills: Some(2000),
                        election_priority: None,
                    }
                    .write_to(&mut cmd);
                    cmd.set_oneway();
                    let mut b = BytesMut::new();
                    cmd.encode(&mut b).unwrap();
                    if s.write_all(&b).is_err() {
                        conns[i] = None;
                    }
                }
                std::thread::sleep(Duration::from_millis(300));
            }
            // Dropping the connections closes them: the controllers see the broker go.
        }));
    }

    /// Stops sending heartbeats but keeps the connections open (a hung broker).
    pub fn pause_heartbeats(&self) {
        self.paused.store(true, Ordering::SeqCst);
    }

    /// Stops heartbeating and closes the heartbeat connections.
    pub fn stop_heartbeats(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.beat.take() {
            t.join().unwrap();
        }
    }

    /// Java's start-up sequence against the leader: 1012, 1013, 1003. Returns the register
    /// answer's header.
    pub fn register(&mut self, leader: &mut impl Call) -> RegisterBrokerToControllerResponseHeader {
        let r = leader.call(next_id_cmd(&self.name));
        assert_eq!(r.code, 0, "1012: {:?}", r.remark);
        let id = GetNextBrokerIdResponseHeader::from_command(&r)
            .unwrap()
            .next_broker_id
            .unwrap();
        let code = format!("{};{}", self.addr_str(), 1_700_000_000_000i64 + id);
        let r = leader.call(apply_id_cmd(&self.name, id, &code));
        assert_eq!(r.code, 0, "1013: {:?}", r.remark);
        self.id = id;
        let r = leader.call(register_cmd(&self.name, id, &self.addr_str()));
        assert_eq!(r.code, 0, "1003: {:?}", r.remark);
        RegisterBrokerToControllerResponseHeader::from_command(&r).unwrap()
    }

    /// The first NOTIFY_BROKER_ROLE_CHANGED pushed to this broker within `within`.
    pub fn role_change(&self, within: Duration) -> Option<RemotingCommand> {
        let deadline = Instant::now() + within;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.pushed.recv_timeout(left) {
                Ok(c) if c.code == rq::NOTIFY_BROKER_ROLE_CHANGED => return Some(c),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
        None
    }
}

impl Drop for FakeBroker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}
