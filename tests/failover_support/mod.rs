//! Support for the controller-mode tests: a group of `ringmq controller` processes and brokers
//! in controller mode (`ringmq broker` with `enableControllerMode=true`) beside a stand-alone
//! `ringmq namesrv`, each its own process on fixed loopback ports (chosen free at start, kept
//! across restarts so the controllers and name server see the same addresses) and its own
//! temporary store; and the raw controller calls the tests make (ringmq's own codec over
//! blocking sockets). Every process is killed on drop.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ringmq::protocol::body::{from_json, SyncStateSet};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::headers::GetReplicaInfoResponseHeader;
use ringmq::protocol::RemotingCommand;

use crate::raw_support::controller::{free_ports, metadata, ringmq_bin, ControllerGroup};
use crate::raw_support::proxy::Proxy;
use crate::raw_support::Conn;

/// Where the nodes live: all on loopback, or each broker in its own network namespace joined
/// to a bridge in the test's namespace, where the controllers and the name server listen, so
/// a test can cut one broker off from everything (`Cluster::cut`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Net {
    Loopback,
    Namespaces,
}

/// A bridge and one namespace per broker (`ip netns`, veth pairs); removed on drop.
pub struct Namespaces {
    tag: String,
    /// The bridge's address: controllers and name server listen here.
    pub host: std::net::Ipv4Addr,
    subnet: u8,
    count: usize,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Namespaces {
    fn create(count: usize) -> Namespaces {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let subnet = ((std::process::id() + n * 7) % 200 + 20) as u8;
        let tag = format!("rq{subnet}");
        let ns = Namespaces {
            tag: tag.clone(),
            host: std::net::Ipv4Addr::new(10, 78, subnet, 1),
            subnet,
            count,
        };
        // Leftovers of a crashed run with the same tag go first.
        ns.remove();
        let br = format!("{tag}br");
        ip(&["link", "add", &br, "type", "bridge"]);
        ip(&["addr", "add", &format!("10.78.{subnet}.1/24"), "dev", &br]);
        ip(&["link", "set", &br, "up"]);
        for i in 0..count {
            let name = ns.name(i);
            let (outer, inner) = (format!("{tag}v{i}"), format!("{tag}p{i}"));
            ip(&["netns", "add", &name]);
            ip(&[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ]);
            ip(&["link", "set", &inner, "netns", &name]);
            ip(&["link", "set", &outer, "master", &br]);
            ip(&["link", "set", &outer, "up"]);
            let addr = format!("{}/24", ns.broker_ip(i));
            ip(&["-n", &name, "addr", "add", &addr, "dev", &inner]);
            ip(&["-n", &name, "link", "set", &inner, "up"]);
            ip(&["-n", &name, "link", "set", "lo", "up"]);
        }
        ns
    }

    pub fn name(&self, i: usize) -> String {
        format!("{}n{i}", self.tag)
    }

    pub fn broker_ip(&self, i: usize) -> std::net::Ipv4Addr {
        std::net::Ipv4Addr::new(10, 78, self.subnet, 10 + i as u8)
    }

    /// Cuts broker `i`'s link to the bridge (`up = false`) or restores it.
    pub fn link(&self, i: usize, up: bool) {
        let outer = format!("{}v{i}", self.tag);
        ip(&["link", "set", &outer, if up { "up" } else { "down" }]);
    }

    fn remove(&self) {
        for i in 0..self.count.max(3) {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.name(i)])
                .output();
            let _ = Command::new("ip")
                .args(["link", "del", &format!("{}v{i}", self.tag)])
                .output();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &format!("{}br", self.tag)])
            .output();
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Runs `f` on a thread that has entered network namespace `ns` (sockets it opens live there).
pub fn in_namespace<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("open the namespace");
        // SAFETY: setns(2) on a valid namespace fd; it changes only this thread's namespace.
        let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("namespace thread")
}

fn free_port() -> u16 {
    free_ports(1)[0]
}

fn log_file(dir: &Path, name: &str) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(name))
        .expect("open log file")
}

/// Waits for a stdout line starting with `prefix`; panics when the process exits first.
fn wait_line(child: &mut Child, prefix: &str) {
    let out = child.stdout.take().expect("stdout piped");
    let mut lines = BufReader::new(out).lines();
    loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("ringmq exited before printing '{prefix}'"))
            .expect("read stdout");
        if line.starts_with(prefix) {
            break;
        }
    }
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
}

/// One process that can be killed and started again with the same arguments.
pub struct Node {
    pub name: String,
    /// The network namespace to run in, if not the test's.
    netns: Option<String>,
    args: Vec<String>,
    ready_line: &'static str,
    logs: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn spawn(&mut self) {
        assert!(self.child.is_none(), "{} is already running", self.name);
        let ringmq = ringmq_bin();
        let mut cmd = match &self.netns {
            // `ip netns exec` execs ringmq in place: the child's pid is ringmq's.
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, &ringmq]);
                c
            }
            None => Command::new(ringmq),
        };
        let mut child = cmd
            .args(&self.args)
            .env(
                "RINGMQ_LOG",
                std::env::var("RINGMQ_LOG").unwrap_or("info".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file(
                &self.logs,
                &format!("{}.log", self.name),
            )))
            .spawn()
            .expect("spawn ringmq");
        wait_line(&mut child, self.ready_line);
        self.child = Some(child);
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// SIGKILL: a machine that dies.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// The last lines of this node's log, for a failure report.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.logs.join(format!("{}.log", self.name)))
            .unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A broker in controller mode.
pub struct GroupMember {
    pub node: Node,
    pub addr: SocketAddr,
    pub store: PathBuf,
}

/// Three controllers, a name server and `brokers` brokers of one group.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub controllers: ControllerGroup,
    /// On loopback: the slow link (2 ms a chunk) every slave's HA connection goes through.
    pub ha_proxies: Vec<Proxy>,
    pub namesrv: (Node, SocketAddr),
    pub brokers: Vec<GroupMember>,
    /// Declared last, so dropped last: the processes die before their namespaces go.
    pub net: Option<Namespaces>,
}

pub const CLUSTER: &str = "FailoverCluster";
pub const BROKER_NAME: &str = "fo-broker";

impl Cluster {
    /// Starts the controllers, the name server and the brokers (`extra` broker.conf keys).
    pub fn start(brokers: usize, extra: &[(&str, &str)], net: Net) -> Cluster {
        let ns = (net == Net::Namespaces).then(|| Namespaces::create(brokers));
        let host = ns
            .as_ref()
            .map_or(std::net::Ipv4Addr::LOCALHOST, |n| n.host);
        let dir = tempfile::Builder::new()
            .prefix("ringmq-failover-")
            .tempdir()
            .expect("temp dir");
        let controllers = ControllerGroup::start_on(host, 3, "scanNotActiveBrokerInterval=500");
        let ns_port = free_port();
        let ns_addr = SocketAddr::from((host, ns_port));
        let mut namesrv = Node {
            name: "namesrv".into(),
            netns: None,
            args: vec![
                "namesrv".into(),
                "--listen".into(),
                ns_addr.to_string(),
                "--kv-config".into(),
                dir.path().join("kvConfig.json").display().to_string(),
            ],
            ready_line: "namesrv listening on",
            logs: dir.path().to_path_buf(),
            child: None,
        };
        namesrv.spawn();
        let controller_addr = controllers
            .addrs()
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(";");
        let mut members = Vec::new();
        let mut ha_proxies = Vec::new();
        for i in 0..brokers {
            let port = free_port();
            let ha_port = free_port();
            let ip = ns
                .as_ref()
                .map_or(std::net::Ipv4Addr::LOCALHOST, |n| n.broker_ip(i));
            let addr = SocketAddr::from((ip, port));
            let ip1 = ip.to_string();
            let store = dir.path().join(format!("broker-{i}"));
            let mut opts: Vec<(String, String)> = [
                ("brokerClusterName", CLUSTER),
                ("brokerName", BROKER_NAME),
                ("brokerIP1", ip1.as_str()),
                ("mappedFileSizeCommitLog", "16777216"),
                ("enableControllerMode", "true"),
                ("controllerAddr", controller_addr.as_str()),
                ("brokerRole", "SLAVE"),
                ("brokerId", "-1"),
                ("allAckInSyncStateSet", "true"),
                ("slaveReadEnable", "true"),
                ("controllerHeartBeatTimeoutMills", "3000"),
                ("brokerHeartbeatInterval", "500"),
                ("syncBrokerMetadataPeriod", "1000"),
                ("checkSyncStateSetPeriod", "1000"),
                ("haMaxTimeSlaveNotCatchup", "4000"),
                ("haSendHeartbeatInterval", "500"),
                ("haHousekeepingInterval", "4000"),
                ("slaveTimeout", "3000"),
                ("registerNameServerPeriod", "2000"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            opts.push(("haListenPort".into(), ha_port.to_string()));
            if ns.is_none() {
                // Slaves reach this broker's HA port through a slow link on 127.0.0.2 (the
                // address the broker announces for it), so what a dying master acknowledged
                // has time to be missing from its slaves if it acknowledged too early.
                opts.push(("brokerIP2".into(), "127.0.0.2".into()));
                ha_proxies.push(Proxy::start_on(
                    SocketAddr::from(([127, 0, 0, 2], ha_port)),
                    SocketAddr::from(([127, 0, 0, 1], ha_port)),
                    Duration::from_millis(2),
                ));
            }
            for (k, v) in extra {
                opts.push((k.to_string(), v.to_string()));
            }
            let mut args: Vec<String> = vec![
                "broker".into(),
                "--namesrv-addr".into(),
                ns_addr.to_string(),
                "--broker-listen".into(),
                addr.to_string(),
                "--store-dir".into(),
                store.display().to_string(),
            ];
            for (k, v) in &opts {
                args.push("-o".into());
                args.push(format!("{k}={v}"));
            }
            let mut node = Node {
                name: format!("broker-{i}"),
                netns: ns.as_ref().map(|n| n.name(i)),
                args,
                ready_line: "broker listening on",
                logs: dir.path().to_path_buf(),
                child: None,
            };
            node.spawn();
            members.push(GroupMember { node, addr, store });
        }
        Cluster {
            net: ns,
            dir,
            controllers,
            ha_proxies,
            namesrv: (namesrv, ns_addr),
            brokers: members,
        }
    }

    /// The controller that says it leads, if one answers.
    pub fn controller_leader(&self) -> Option<usize> {
        (0..self.controllers.ports.len()).find(|&i| {
            self.controllers.is_running(i)
                && metadata(self.controllers.addr(i)).is_some_and(|h| h.is_leader)
        })
    }

    /// The group's master and SyncStateSet as the controller leader answers them.
    pub fn replica_info(&self) -> Option<(i64, String, i32, SyncStateSet)> {
        let leader = self.controller_leader()?;
        let r = try_call(
            self.controllers.addr(leader),
            RemotingCommand::new_request(request_code::CONTROLLER_GET_REPLICA_INFO)
                .with_ext("brokerName", BROKER_NAME),
        )?;
        if r.code != response_code::SUCCESS {
            return None;
        }
        let h = GetReplicaInfoResponseHeader::from_command(&r).ok()?;
        let set: SyncStateSet = from_json(&r.body).ok()?;
        Some((h.master_broker_id?, h.master_address?, h.master_epoch?, set))
    }

    /// Waits until the controller names a master that takes sends and a SyncStateSet of
    /// `members`; returns the master's index among the brokers.
    pub fn wait_for_master(&self, members: usize, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            if let Some((_, addr, _, set)) = self.replica_info() {
                if set.sync_state_set.len() >= members {
                    if let Some(i) = self.brokers.iter().position(|b| b.addr.to_string() == addr) {
                        return i;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no master with a SyncStateSet of {members} within {within:?}; info: {:?}\n{}",
                self.replica_info(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every node's last log lines.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for i in 0..self.controllers.ports.len() {
            let log = self.controllers.log(i);
            let lines: Vec<&str> = log.lines().collect();
            out += &format!(
                "--- controller n{i}\n{}\n",
                lines[lines.len().saturating_sub(40)..].join("\n")
            );
        }
        for b in &self.brokers {
            out += &format!("--- {}\n{}\n", b.node.name, b.node.log_tail());
        }
        out
    }
}

/// One request on a fresh connection; `None` when the peer is unreachable or silent.
pub fn try_call(addr: SocketAddr, mut cmd: RemotingCommand) -> Option<RemotingCommand> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    cmd.opaque = 7;
    let mut buf = bytes::BytesMut::new();
    cmd.encode(&mut buf).ok()?;
    s.write_all(&buf).ok()?;
    let mut rbuf = bytes::BytesMut::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Ok(Some(frame)) = ringmq::protocol::frame::split_frame(&mut rbuf, 16 << 20) {
            let r = RemotingCommand::decode(frame).ok()?;
            if r.opaque == 7 {
                return Some(r);
            }
            continue;
        }
        let n = std::io::Read::read(&mut s, &mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        rbuf.extend_from_slice(&chunk[..n]);
    }
}

/// A connection to a broker, reconnected on failure.
pub fn conn(addr: SocketAddr) -> Conn {
    Conn::connect(addr)
}
