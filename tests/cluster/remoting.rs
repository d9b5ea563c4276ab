//! TLS on the remoting ports, against a real `serve` process: enforcing mode serves TLS clients
//! (sends, pulls, the embedded name server, the broker's own registration over TLS) and closes
//! plain ones unanswered; permissive mode serves both on one port, a large pull of scattered
//! records arriving byte for byte as over plain TCP; a client certificate from another CA is
//! refused with a log line naming the peer and the reason; bad TLS settings stop the start; a
//! slave copies its master with tls.enable (metadata) and tls.ha.enable (the commit log); access
//! control works over TLS as over plain TCP.

use crate::raw_support;
use crate::tls_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use raw_support::{pull_cmd, records, send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code as req, response_code as rc};
use ringmq::protocol::RemotingCommand;
use tls_support::{as_str, Certs, TlsConn};

fn runtime_counter(r: &RemotingCommand, key: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["table"][key].as_str().unwrap().parse().unwrap()
}

fn runtime_info() -> RemotingCommand {
    RemotingCommand::new_request(req::GET_BROKER_RUNTIME_INFO)
}

/// A plain client's request gets no byte back: the connection is closed unanswered.
fn plain_is_refused(addr: std::net::SocketAddr) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut frame = bytes::BytesMut::new();
    runtime_info().encode(&mut frame).unwrap();
    // The write may already fail if the broker closed first; either way nothing comes back.
    let _ = s.write_all(&frame);
    let mut got = Vec::new();
    let read = s.read_to_end(&mut got);
    assert!(
        got.is_empty(),
        "a plain client got {} bytes from an enforcing server",
        got.len()
    );
    if let Err(e) = read {
        assert_ne!(
            e.kind(),
            std::io::ErrorKind::WouldBlock,
            "the connection stayed open"
        );
    }
}

fn wait_for_log(log: &std::path::Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in the log:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `n` messages to `queue` of `topic` over `call` and pulls them back; returns the bodies
/// pulled and the pull bodies' byte count.
fn send_and_pull(
    call: &mut dyn FnMut(RemotingCommand) -> RemotingCommand,
    topic: &str,
    n: usize,
) -> (Vec<String>, u64) {
    let mut sent = Vec::new();
    for i in 0..n {
        let body = format!("tls-{i}-{}", "y".repeat(i * 7));
        let r = call(send_cmd(topic, 1, body.as_bytes(), ""));
        assert_eq!(r.code, rc::SUCCESS, "send: {:?}", r.remark);
        sent.push(body);
    }
    let (mut got, mut bytes, mut offset) = (Vec::new(), 0u64, 0i64);
    while got.len() < n {
        let r = call(pull_cmd(topic, 1, offset, 0));
        assert_eq!(r.code, rc::SUCCESS, "pull: {:?}", r.remark);
        bytes += r.body.len() as u64;
        for rec in records(&r.body) {
            got.push(String::from_utf8(rec.body.to_vec()).unwrap());
        }
        offset = r.ext("nextBeginOffset").unwrap().parse().unwrap();
    }
    assert_eq!(got, sent);
    (got, bytes)
}

/// Enforcing: TLS clients send and pull (bodies encrypted from the mapping, counted as
/// TLS-copied, none zero-copy); plain clients of broker and name server get nothing back and
/// are logged; the broker registered with the embedded name server over verified TLS.
#[test]
fn enforcing_serves_tls_and_refuses_plain() {
    let certs = Certs::make();
    let mut opts = certs.server_opts("enforcing");
    opts.push("tls.enable=true".into());
    opts.push("tls.client.authServer=true".into());
    opts.push(format!("tls.client.trustCertPath={}", certs.ca.display()));
    opts.push("brokerName=tls-broker".into());
    let log = certs.dir.path().join("broker.log");
    let b = RawBroker::start_logged(tempfile::tempdir().unwrap(), &as_str(&opts), &log);

    let mut c = TlsConn::connect(b.broker, certs.client(None)).expect("TLS handshake");
    let before = c.call(runtime_info());
    let (_, body_bytes) = send_and_pull(&mut |cmd| c.call(cmd), "TlsT", 30);
    let after = c.call(runtime_info());
    let delta = |k| runtime_counter(&after, k) - runtime_counter(&before, k);
    assert_eq!(delta("tlsCopiedBytes"), body_bytes, "pull bodies over TLS");
    assert_eq!(
        delta("sendfileBytes"),
        0,
        "nothing zero-copy to a TLS client"
    );

    plain_is_refused(b.broker);
    plain_is_refused(b.namesrv);
    wait_for_log(&log, "plain connection refused");

    // The name server speaks TLS, and the broker's registration reached it over TLS.
    let mut ns = TlsConn::connect(b.namesrv, certs.client(None)).expect("name server TLS");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = ns.call(RemotingCommand::new_request(req::GET_BROKER_CLUSTER_INFO));
        assert_eq!(r.code, rc::SUCCESS);
        if String::from_utf8_lossy(&r.body).contains("tls-broker") {
            break;
        }
        assert!(Instant::now() < deadline, "the broker never registered");
        std::thread::sleep(Duration::from_millis(100));
    }
    // ringmq admin: --tls reaches name server and broker (the server unverified, as Java's
    // default client); --tlsConfigFile verifies it; plain, they are unreachable (exit 3).
    let listed = raw_support::admin::admin(b.namesrv, &["clusterList", "--tls"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(listed.stdout.contains("tls-broker"), "{listed:?}");
    let props = certs.dir.path().join("tls.properties");
    std::fs::write(
        &props,
        format!(
            "tls.client.authServer=true\ntls.client.trustCertPath={}\n",
            certs.ca.display()
        ),
    )
    .unwrap();
    let props = props.display().to_string();
    let verified = raw_support::admin::admin(
        b.namesrv,
        &["topicStatus", "-t", "TlsT", "--tlsConfigFile", &props],
    );
    assert_eq!(verified.code, 0, "{verified:?}");
    let plain = raw_support::admin::admin(b.namesrv, &["clusterList"]);
    assert_eq!(plain.code, 3, "{plain:?}");
}

/// Permissive: plain and TLS clients on the same port. A pull of records scattered between
/// another queue's (several commit-log ranges, near the pull's byte limit) arrives over TLS
/// exactly as it does zero-copy over plain TCP.
#[test]
fn permissive_serves_both_and_large_pulls_match() {
    let certs = Certs::make();
    let b = RawBroker::start(&as_str(&certs.server_opts("permissive")));
    let mut plain = Conn::connect(b.broker);
    let mut tls = TlsConn::connect(b.broker, certs.client(None)).expect("TLS handshake");
    send_and_pull(&mut |cmd| plain.call(cmd), "PlainT", 5);
    send_and_pull(&mut |cmd| tls.call(cmd), "TlsT", 5);

    // Queue 0's records alternate with queue 1's in the commit log.
    for i in 0..64 {
        let body = vec![b'a' + (i % 26) as u8; 7000 + i];
        for q in [0, 1] {
            let r = tls.call(send_cmd("BigT", q, &body, ""));
            assert_eq!(r.code, rc::SUCCESS, "send: {:?}", r.remark);
        }
    }
    let (mut offset, mut pulled) = (0i64, 0usize);
    while pulled < 64 {
        let over_tls = tls.call(pull_cmd("BigT", 0, offset, 0));
        let over_plain = plain.call(pull_cmd("BigT", 0, offset, 0));
        assert_eq!(over_tls.code, rc::SUCCESS, "pull: {:?}", over_tls.remark);
        assert!(over_tls.body.len() > 100_000, "a multi-range pull");
        assert_eq!(over_tls.body, over_plain.body, "the same bytes over TLS");
        let recs = records(&over_tls.body);
        for (k, rec) in recs.iter().enumerate() {
            let i = pulled + k;
            assert_eq!(rec.queue_offset, i as i64);
            assert_eq!(rec.body, &vec![b'a' + (i % 26) as u8; 7000 + i][..]);
        }
        pulled += recs.len();
        offset = over_tls.ext("nextBeginOffset").unwrap().parse().unwrap();
    }
}

/// need.client.auth=require: a certificate from the trusted CA is served; one from another CA,
/// and no certificate at all, are refused, each with a log line naming the peer and why.
#[test]
fn foreign_client_certificate_is_refused() {
    let certs = Certs::make();
    let mut opts = certs.server_opts("enforcing");
    opts.push("tls.server.need.client.auth=require".into());
    opts.push(format!("tls.server.trustCertPath={}", certs.ca.display()));
    // The broker's own registration needs a certificate of its own.
    opts.push("tls.enable=true".into());
    opts.push(format!(
        "tls.client.certPath={}",
        certs.client_cert.display()
    ));
    opts.push(format!("tls.client.keyPath={}", certs.client_key.display()));
    let log = certs.dir.path().join("broker.log");
    let b = RawBroker::start_logged(tempfile::tempdir().unwrap(), &as_str(&opts), &log);

    let good = certs.client(Some((&certs.client_cert, &certs.client_key)));
    let mut ok = TlsConn::connect(b.broker, good).expect("trusted client certificate");
    assert!(ok.answers(runtime_info()));

    let foreign = certs.client(Some((&certs.foreign_cert, &certs.foreign_key)));
    let refused = match TlsConn::connect(b.broker, foreign) {
        Err(_) => true,
        Ok(mut c) => !c.answers(runtime_info()),
    };
    assert!(refused, "a client certificate from another CA was served");
    let text = wait_for_log(&log, "TLS handshake failed");
    let line = text
        .lines()
        .find(|l| l.contains("TLS handshake failed"))
        .unwrap();
    assert!(line.contains("peer=127.0.0.1:"), "{line}");
    assert!(line.contains("UnknownIssuer"), "{line}");

    let anonymous = match TlsConn::connect(b.broker, certs.client(None)) {
        Err(_) => true,
        Ok(mut c) => !c.answers(runtime_info()),
    };
    assert!(anonymous, "a client without a certificate was served");
}

/// Settings that cannot work stop `serve` before it listens, naming the key to fix.
#[test]
fn bad_tls_settings_fail_the_start() {
    let certs = Certs::make();
    let encrypted = certs.dir.path().join("encrypted.key");
    std::fs::write(
        &encrypted,
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
    )
    .unwrap();
    let cert = format!("tls.server.certPath={}", certs.server_cert.display());
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["tls.server.mode=enforcing".into()],
            "tls.server.certPath",
        ),
        (
            vec![
                "tls.server.certPath=/nonexistent/server.crt".into(),
                format!("tls.server.keyPath={}", certs.server_key.display()),
            ],
            "tls.server.certPath",
        ),
        (
            vec![
                cert.clone(),
                format!("tls.server.keyPath={}", encrypted.display()),
            ],
            "tls.server.keyPath",
        ),
        (vec!["tls.server.mode=sometimes".into()], "tls.server.mode"),
        (
            vec![
                cert,
                format!("tls.server.keyPath={}", certs.server_key.display()),
                "tls.server.need.client.auth=require".into(),
            ],
            "tls.server.trustCertPath",
        ),
    ];
    for (opts, key) in cases {
        let store = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
        cmd.args(["serve", "--console-listen", "off", "--store-dir"])
            .arg(store.path())
            .args([
                "--namesrv-listen",
                "127.0.0.1:0",
                "--broker-listen",
                "127.0.0.1:0",
            ]);
        for o in &opts {
            cmd.args(["-o", o]);
        }
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_exit(child);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{opts:?} started");
        assert!(
            stderr.contains(key),
            "{opts:?}: the error names {key}: {stderr}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("listening"),
            "{opts:?}: nothing claims to listen"
        );
    }
}

/// tls.enable on a slave: it registers with an enforcing name server and copies its enforcing
/// master's topics over TLS (the remoting port), while the commit log still arrives over the
/// plain HA port, as in Java; a message sent to the master is pulled from the slave.
#[test]
fn slave_copies_its_master_over_tls() {
    let certs = Certs::make();
    let mut opts = certs.server_opts("enforcing");
    opts.push("tls.enable=true".into());
    let master = RawBroker::start(&as_str(&opts));
    let slave_opts = [
        "brokerRole=SLAVE",
        "brokerId=1",
        "slaveReadEnable=true",
        "fastListenPort=0",
        "tls.enable=true",
    ];
    let slave = RawBroker::start_broker(master.namesrv, &slave_opts);

    let mut m = TlsConn::connect(master.broker, certs.client(None)).expect("master TLS");
    let r = m.call(raw_support::create_topic_cmd("SyncedT", 2));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    let r = m.call(send_cmd("SyncedT", 0, b"over-tls", ""));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);

    // The slave's own port is plain (its tls.server.mode is disabled).
    let mut s = Conn::connect(slave.broker);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = s.call(RemotingCommand::new_request(req::GET_ALL_TOPIC_CONFIG));
        let synced = r.code == rc::SUCCESS && String::from_utf8_lossy(&r.body).contains("SyncedT");
        let pulled = s.call(pull_cmd("SyncedT", 0, 0, 0));
        let got = pulled.code == rc::SUCCESS
            && records(&pulled.body)
                .iter()
                .any(|rec| rec.body == b"over-tls");
        if synced && got {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slave did not copy its master (topic {synced}, message {got})"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// tls.ha.enable (ringmq's own) on both sides: the commit log reaches the slave over a TLS HA
/// link, sent by the master as TLS copies (its sendfile path's fallback), none zero-copy.
#[test]
fn ha_link_over_tls() {
    let certs = Certs::make();
    let mut opts = certs.server_opts("enforcing");
    opts.push("tls.enable=true".into());
    opts.push("tls.ha.enable=true".into());
    let master = RawBroker::start(&as_str(&opts));
    let slave_opts = [
        "brokerRole=SLAVE",
        "brokerId=1",
        "slaveReadEnable=true",
        "fastListenPort=0",
        "tls.enable=true",
        "tls.ha.enable=true",
    ];
    let slave = RawBroker::start_broker(master.namesrv, &slave_opts);

    let mut m = TlsConn::connect(master.broker, certs.client(None)).expect("master TLS");
    let before = m.call(runtime_info());
    let body = vec![b'h'; 50_000];
    let r = m.call(send_cmd("HaTlsT", 0, &body, ""));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);

    let mut s = Conn::connect(slave.broker);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pulled = s.call(pull_cmd("HaTlsT", 0, 0, 0));
        if pulled.code == rc::SUCCESS && records(&pulled.body).iter().any(|r| r.body == body) {
            break;
        }
        assert!(Instant::now() < deadline, "the slave never got the record");
        std::thread::sleep(Duration::from_millis(200));
    }
    let after = m.call(runtime_info());
    let delta = |k| runtime_counter(&after, k) - runtime_counter(&before, k);
    assert!(
        delta("tlsCopiedBytes") >= body.len() as u64,
        "the HA run went through TLS"
    );
    assert_eq!(delta("sendfileBytes"), 0, "nothing went out in plain");
}

/// tls.ha.enable without the side's TLS config stops the start, naming the key.
#[test]
fn ha_tls_needs_its_side() {
    let store = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["serve", "--console-listen", "off", "--store-dir"])
        .arg(store.path())
        .args([
            "--namesrv-listen",
            "127.0.0.1:0",
            "--broker-listen",
            "127.0.0.1:0",
        ])
        .args(["-o", "tls.ha.enable=true"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_exit(out);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tls.ha.enable"), "{stderr}");
}

/// Waits up to 30 s for a child that must exit on its own.
fn wait_exit(mut child: std::process::Child) -> std::process::Output {
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("ringmq kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `ringmq namesrv -o tls.*`: the name server alone in enforcing mode answers a TLS client and
/// closes a plain one; a key that is not a TLS key is refused.
#[test]
fn standalone_name_server_takes_tls_options() {
    let certs = Certs::make();
    let kv = certs.dir.path().join("kv.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    cmd.args(["namesrv", "--listen", "127.0.0.1:0", "--kv-config"])
        .arg(&kv);
    for o in certs.server_opts("enforcing") {
        cmd.args(["-o", &o]);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // Killed however the test ends.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = Killed(child);
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let line = lines.next().expect("a line").expect("stdout");
    let addr: std::net::SocketAddr = line
        .strip_prefix("namesrv listening on ")
        .unwrap_or_else(|| panic!("{line}"))
        .parse()
        .unwrap();
    let answered = TlsConn::connect(addr, certs.client(None)).map(|mut c| {
        c.call(RemotingCommand::new_request(req::GET_BROKER_CLUSTER_INFO))
            .code
    });
    plain_is_refused(addr);
    drop(child);
    assert_eq!(answered.expect("TLS handshake"), rc::SUCCESS);

    let refused = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["namesrv", "--listen", "127.0.0.1:0", "-o", "listenPort=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_exit(refused);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("tls.* keys only"));
}

/// Access control over TLS: the signature is checked above the TLS layer, so a signed request
/// on an enforcing TLS port passes, an unsigned one on the same TLS connection is refused
/// NO_PERMISSION, and a plain client never reaches the check.
#[test]
fn signed_requests_over_tls() {
    let certs = Certs::make();
    let dir = tempfile::tempdir().expect("tempdir");
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(
        &acl,
        "accounts:\n  - accessKey: ops\n    secretKey: ops-secret-1\n    admin: true\n",
    )
    .expect("write plain_acl.yml");
    let mut opts = certs.server_opts("enforcing");
    opts.push("tls.enable=true".into());
    opts.push("aclEnable=true".into());
    opts.push(format!("rocketmq.acl.plain.file={}", acl.display()));
    let broker = RawBroker::start(&as_str(&opts));
    let mut c = TlsConn::connect(broker.broker, certs.client(None)).expect("TLS");
    let signed = |mut cmd: RemotingCommand| {
        ringmq::auth::signature::sign_request(&mut cmd, "ops", "ops-secret-1").expect("sign");
        cmd
    };
    let r = c.call(signed(raw_support::create_topic_cmd("AclTlsT", 2)));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    let r = c.call(signed(send_cmd("AclTlsT", 0, b"signed-over-tls", "")));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    let r = c.call(send_cmd("AclTlsT", 0, b"unsigned-over-tls", ""));
    assert_eq!(r.code, rc::NO_PERMISSION, "{:?}", r.remark);
    let r = c.call(signed(pull_cmd("AclTlsT", 0, 0, 0)));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    let got = records(&r.body);
    assert_eq!(got.len(), 1, "only the signed message is stored");
    assert_eq!(got[0].body, b"signed-over-tls");
    plain_is_refused(broker.broker);
}
