// The RocketMQ 5 gRPC endpoint through the official Python SDK (rocketmq-python-client 5.1.2,
// in the venv scripts/python5-env.sh makes; RINGMQ_PYTHON5 names its interpreter): producers
// (normal, FIFO with message groups, transactional with a checker the broker calls back),
// SimpleConsumer (receive, ack, change invisible duration, redelivery of what was not acked),
// PushConsumer (assignments, retries with the server's backoff), FIFO order kept across a failed
// attempt, and a message sent over gRPC read over Remoting. Each test runs one script of
// tests/grpc_client/ against its own broker and checks the one JSON object it prints.

use crate::raw_support::admin::{admin, admin_until_ok, create_topic};
use crate::raw_support::pop::{pop_cmd, popped};
use crate::raw_support::{create_topic_cmd, pull_cmd, records, send_cmd, Conn, RawBroker, GRPC};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ringmq::protocol::codes::response_code;
use ringmq::protocol::properties;
use serde_json::Value;

/// The scripts' own deadline (their watchdog exits 3 past it).
const SCRIPT_DEADLINE_S: u64 = 80;

/// The interpreter of the venv scripts/python5-env.sh makes. Missing is a failure, never a skip.
fn python5() -> PathBuf {
    match std::env::var_os("RINGMQ_PYTHON5") {
        Some(p) if Path::new(&p).is_file() => PathBuf::from(p),
        other => panic!(
            "RINGMQ_PYTHON5={other:?} is not an interpreter: run \
             `export RINGMQ_PYTHON5=\"$(scripts/python5-env.sh)\"` (it installs \
             rocketmq-python-client in a venv outside the clone); scripts/test.sh does it."
        ),
    }
}

/// Runs `script` against `broker`'s gRPC endpoint and returns its JSON result, which must say ok.
fn run(broker: &RawBroker, script: &str, args: &[&str]) -> Value {
    let (v, stderr) = run_script(broker, script, args);
    assert_eq!(v["ok"], true, "{script} failed: {v:#}\nstderr: {stderr}");
    v
}

/// Runs `script` and returns its JSON result and its stderr, whatever it says.
fn run_script(broker: &RawBroker, script: &str, args: &[&str]) -> (Value, String) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpc_client");
    let grpc = broker.grpc.expect("broker started with GRPC").to_string();
    let timeout = SCRIPT_DEADLINE_S.to_string();
    let out = Command::new(python5())
        .current_dir(&dir)
        .arg(dir.join(script))
        .args(["--endpoint", &grpc, "--timeout", &timeout])
        .args(args)
        .env("RINGMQ_SDK_LOG", "stderr")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run the python script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{script}: no JSON result ({e}); stdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn start() -> RawBroker {
    RawBroker::start(&[
        GRPC,
        "transactionTimeOut=1000",
        "transactionCheckInterval=500",
    ])
}

fn topic(b: &RawBroker, name: &str, attrs: Option<&str>) {
    match attrs {
        None => create_topic(b.namesrv, b.broker, name, 4),
        Some(a) => {
            let broker = b.broker.to_string();
            admin(
                b.namesrv,
                &[
                    "updateTopic",
                    "-b",
                    &broker,
                    "-t",
                    name,
                    "-r",
                    "4",
                    "-w",
                    "4",
                    "-a",
                    a,
                ],
            )
            .ok();
            create_topic(b.namesrv, b.broker, name, 4);
        }
    }
}

/// Ten messages with a tag, two keys and user properties go out and come back exactly once,
/// with what was sent; then a Remoting POP of another group reads the same ten with their
/// properties, keys and tags.
#[test]
fn python_producer_and_simple_consumer_then_remoting_reads_them() {
    let b = start();
    topic(&b, "GrpcT1", None);
    let v = run(
        &b,
        "produce_consume.py",
        &[
            "--topic",
            "GrpcT1",
            "--group",
            "GrpcG1",
            "--count",
            "10",
            "--property",
            "color=red",
        ],
    );
    assert_eq!(v["distinct"], 10, "{v:#}");
    assert_eq!(v["duplicates"], 0, "{v:#}");
    for m in v["received"].as_array().unwrap() {
        assert_eq!(m["tag"], "TagA", "{m}");
        assert_eq!(m["properties"]["color"], "red", "{m}");
        assert_eq!(m["delivery_attempt"], 1, "{m}");
        assert_eq!(m["corrupted"], false, "{m}");
    }
    let sent: Vec<String> = v["sent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message_id"].as_str().unwrap().to_string())
        .collect();
    let mut conn = Conn::connect(b.broker);
    let mut seen = Vec::new();
    for _ in 0..20 {
        let r = conn.call(pop_cmd("GrpcT1", -1, 32, 60_000, 1000));
        if r.code != response_code::SUCCESS {
            continue;
        }
        for m in popped(&r) {
            assert_eq!(properties::get(&m.properties, "TAGS"), Some("TagA"));
            assert_eq!(properties::get(&m.properties, "color"), Some("red"));
            assert_eq!(
                properties::get(&m.properties, "KEYS").map(|k| k.split(' ').count()),
                Some(2)
            );
            seen.push(
                properties::get(&m.properties, "UNIQ_KEY")
                    .unwrap()
                    .to_string(),
            );
        }
        if seen.len() >= sent.len() {
            break;
        }
    }
    seen.sort();
    let mut want = sent.clone();
    want.sort();
    assert_eq!(seen, want, "Remoting POP reads what gRPC sent");
}

/// A message not acked comes back after its invisible time with delivery attempt 2; one whose
/// invisible time was changed is acked with the new handle and never comes back.
#[test]
fn python_simple_consumer_redelivers_what_was_not_acked() {
    let b = start();
    topic(&b, "GrpcT2", None);
    let v = run(
        &b,
        "redeliver.py",
        &["--topic", "GrpcT2", "--group", "GrpcG2"],
    );
    assert_eq!(v["unacked"]["redelivered"], true, "{v:#}");
    assert_eq!(v["unacked"]["redelivery_attempt"], 2, "{v:#}");
    assert_eq!(v["changed"]["handle_changed"], true, "{v:#}");
    assert!(v["changed"]["ack_error"].is_null(), "{v:#}");
    assert_eq!(
        v["unexpected_redeliveries"].as_array().unwrap().len(),
        0,
        "{v:#}"
    );
}

/// A push consumer's failed message comes back with the server's backoff (1 s, then 5 s) and
/// delivery attempts 2 and 3; the others are delivered once.
#[test]
fn python_push_consumer_retries_with_the_server_backoff() {
    let b = start();
    topic(&b, "GrpcT3", None);
    let v = run(
        &b,
        "push_consumer.py",
        &[
            "--topic",
            "GrpcT3",
            "--group",
            "GrpcG3",
            "--count",
            "4",
            "--fail-indices",
            "0",
            "--fail-times",
            "2",
        ],
    );
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["attempts"], serde_json::json!([1, 2, 3]), "{v:#}");
    // The 1 s backoff of the first retry is not stretched by a parked receive.
    let first_gap = msgs[0]["gaps_s"][0].as_f64().unwrap();
    assert!(first_gap < 4.0, "first retry after {first_gap} s: {v:#}");
    for m in &msgs[1..] {
        assert_eq!(m["attempts"], serde_json::json!([1]), "{v:#}");
    }
    assert_eq!(v["deliveries_after_success"], 0, "{v:#}");
}

/// FIFO: three message groups on a FIFO topic, an orderly group; each group is consumed in
/// send order, also when one message fails once and is retried.
#[test]
fn python_fifo_keeps_order_per_message_group_across_a_failure() {
    let b = start();
    topic(&b, "GrpcFifo", Some("+message.type=FIFO"));
    admin(
        b.namesrv,
        &[
            "updateSubGroup",
            "-b",
            &b.broker.to_string(),
            "-g",
            "GrpcFifoG",
            "-o",
            "true",
        ],
    )
    .ok();
    let v = run(
        &b,
        "fifo.py",
        &[
            "--topic",
            "GrpcFifo",
            "--group",
            "GrpcFifoG",
            "--groups",
            "3",
            "--per-group",
            "5",
            "--consumer",
            "push",
            "--fail-seq",
            "2",
        ],
    );
    assert_eq!(v["fifo_mode"], true, "{v:#}");
    assert_eq!(v["violations"].as_array().unwrap().len(), 0, "{v:#}");
    assert!(
        v["missing"]
            .as_object()
            .unwrap()
            .values()
            .all(|m| m.as_array().unwrap().is_empty()),
        "{v:#}"
    );
}

/// Transactions: committed by the producer, rolled back, and left unknown until the broker's
/// check calls the checker back over Telemetry, which commits it; exactly the two committed
/// messages arrive, as TRANSACTION messages.
#[test]
fn python_transactional_producer_is_checked_back() {
    let b = start();
    topic(&b, "GrpcTx", Some("+message.type=TRANSACTION"));
    let v = run(
        &b,
        "transaction.py",
        &["--topic", "GrpcTx", "--group", "GrpcTxG"],
    );
    let calls = v["checker_calls"].as_array().unwrap();
    assert!(calls.iter().any(|c| c["role"] == "unknown"), "{v:#}");
    assert_eq!(v["missing"].as_array().unwrap().len(), 0, "{v:#}");
    assert_eq!(v["unexpected"].as_array().unwrap().len(), 0, "{v:#}");
}

/// With access control on, the SDK's signed calls (HMAC-SHA1 of `x-mq-date-time` in the
/// `authorization` header) pass as the user they name, and a wrong secret is refused
/// (UNAUTHORIZED) before anything is sent or registered.
#[test]
fn python_clients_pass_access_control_with_their_credentials_only() {
    const ROOT_PW: &str = "root-secret-1";
    let b = RawBroker::start(&[
        GRPC,
        "authenticationEnabled=true",
        r#"initAuthenticationUser={"username":"root","password":"root-secret-1"}"#,
    ]);
    let mut c = Conn::connect(b.broker);
    let mut create = create_topic_cmd("GrpcAcl", 4);
    ringmq::auth::signature::sign_request(&mut create, "root", ROOT_PW).expect("sign");
    assert_eq!(c.call(create).code, response_code::SUCCESS);
    admin_until_ok(b.namesrv, &["topicRoute", "-t", "GrpcAcl"]);
    let v = run(
        &b,
        "produce_consume.py",
        &[
            "--topic",
            "GrpcAcl",
            "--group",
            "GrpcAclG",
            "--count",
            "3",
            "--access-key",
            "root",
            "--secret-key",
            ROOT_PW,
        ],
    );
    assert_eq!(v["distinct"], 3, "{v:#}");
    let (bad, stderr) = run_script(
        &b,
        "produce_consume.py",
        &[
            "--topic",
            "GrpcAcl",
            "--group",
            "GrpcAclG",
            "--count",
            "1",
            "--access-key",
            "root",
            "--secret-key",
            "wrong",
            "--timeout",
            "30",
        ],
    );
    assert_eq!(bad["ok"], false, "{bad:#}");
    let said = format!("{bad}{stderr}");
    assert!(
        said.contains("40100")
            || said.contains("UNAUTHORIZED")
            || said.contains("check signature failed"),
        "{said}"
    );
}

/// Tag and SQL92 subscriptions of a SimpleConsumer: exactly the matching messages arrive.
#[test]
fn python_consumers_filter_by_tag_and_sql92() {
    let b = RawBroker::start(&[GRPC, "enablePropertyFilter=true"]);
    topic(&b, "GrpcTag", None);
    topic(&b, "GrpcSql", None);
    let v = run(
        &b,
        "produce_consume.py",
        &[
            "--topic",
            "GrpcTag",
            "--group",
            "GrpcTagG",
            "--count",
            "6",
            "--tags",
            "TagA,TagB",
            "--filter",
            "TagB",
        ],
    );
    let tags: Vec<&str> = v["received"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["tag"].as_str().unwrap())
        .collect();
    assert_eq!(tags, vec!["TagB"; 3], "{v:#}");
    let v = run(
        &b,
        "produce_consume.py",
        &[
            "--topic",
            "GrpcSql",
            "--group",
            "GrpcSqlG",
            "--count",
            "6",
            "--filter-type",
            "SQL",
            "--filter",
            "index < 3",
            "--expect",
            "3",
            "--linger",
            "2",
        ],
    );
    let mut idx: Vec<&str> = v["received"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["properties"]["index"].as_str().unwrap())
        .collect();
    idx.sort();
    assert_eq!(idx, vec!["0", "1", "2"], "{v:#}");
}

/// A push consumer that keeps failing a message: delivered `retryMaxTimes + 1` times (the
/// group's max attempts), then moved to the group's DLQ by the broker, where Remoting reads it.
#[test]
fn python_push_consumer_dead_letters_after_max_attempts() {
    let b = start();
    topic(&b, "GrpcDlq", None);
    admin(
        b.namesrv,
        &[
            "updateSubGroup",
            "-b",
            &b.broker.to_string(),
            "-g",
            "GrpcDlqG",
            "-r",
            "1",
        ],
    )
    .ok();
    let v = run(
        &b,
        "push_consumer.py",
        &[
            "--topic",
            "GrpcDlq",
            "--group",
            "GrpcDlqG",
            "--count",
            "2",
            "--fail-indices",
            "0",
            "--fail-times",
            "9",
            "--expect-deliveries",
            "2",
            "--linger",
            "12",
        ],
    );
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["attempts"], serde_json::json!([1, 2]), "{v:#}");
    assert_eq!(msgs[1]["attempts"], serde_json::json!([1]), "{v:#}");
    let failed = msgs[0]["message_id"].as_str().unwrap().to_string();
    let mut c = Conn::connect(b.broker);
    let r = c.call(pull_cmd("%DLQ%GrpcDlqG", 0, 0, 1000));
    assert_eq!(r.code, response_code::SUCCESS, "{r:?}");
    let ids: Vec<String> = records(&r.body)
        .iter()
        .filter_map(|m| properties::get(m.properties, "UNIQ_KEY").map(str::to_string))
        .collect();
    assert_eq!(ids, vec![failed], "the DLQ holds the failed message once");
}

/// Messages sent over Remoting (tag, keys, a user property) are received over gRPC with them.
#[test]
fn remoting_sends_reach_python_consumers() {
    let b = start();
    topic(&b, "GrpcFromRemoting", None);
    let mut c = Conn::connect(b.broker);
    for i in 0..3 {
        let props = properties::encode([
            ("TAGS", "TagR"),
            ("KEYS", "rk1 rk2"),
            ("UNIQ_KEY", &format!("REMOTING{i}")),
            ("origin", "remoting"),
        ]);
        let r = c.call(send_cmd(
            "GrpcFromRemoting",
            i % 4,
            format!("from remoting {i}").as_bytes(),
            &props,
        ));
        assert_eq!(r.code, response_code::SUCCESS, "{r:?}");
    }
    let v = run(
        &b,
        "produce_consume.py",
        &[
            "--topic",
            "GrpcFromRemoting",
            "--group",
            "GrpcFromRemotingG",
            "--count",
            "0",
            "--foreign-expect",
            "3",
        ],
    );
    let mut got: Vec<(String, String)> = Vec::new();
    for m in v["foreign_messages"].as_array().unwrap() {
        assert_eq!(m["tag"], "TagR", "{m}");
        assert_eq!(m["keys"], serde_json::json!(["rk1", "rk2"]), "{m}");
        assert_eq!(m["properties"]["origin"], "remoting", "{m}");
        got.push((
            m["message_id"].as_str().unwrap().into(),
            m["body"].as_str().unwrap().into(),
        ));
    }
    got.sort();
    let want: Vec<(String, String)> = (0..3)
        .map(|i| (format!("REMOTING{i}"), format!("from remoting {i}")))
        .collect();
    assert_eq!(got, want);
}

/// A push consumer's message hidden for 3 s at a time (`defaultInvisibleTimeMills`) while its
/// listener takes 8 s: the endpoint renews it, so it is delivered once, and the ack with the
/// handle the client was given (renewed twice meanwhile) holds.
#[test]
fn python_push_consumer_holds_a_message_past_its_invisible_time() {
    let b = RawBroker::start(&[
        GRPC,
        "defaultInvisibleTimeMills=3000",
        "renewAheadTimeMillis=1500",
        "renewSchedulePeriodMillis=300",
    ]);
    topic(&b, "GrpcRenew", None);
    let v = run(
        &b,
        "push_consumer.py",
        &[
            "--topic",
            "GrpcRenew",
            "--group",
            "GrpcRenewG",
            "--count",
            "1",
            "--fail-indices",
            "",
            "--fail-times",
            "0",
            "--consume-delay",
            "8",
            "--linger",
            "6",
        ],
    );
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["attempts"], serde_json::json!([1]), "{v:#}");
    assert_eq!(v["deliveries_after_success"], 0, "{v:#}");
}

/// With the broker's own certificate (`tls.server.*`, permissive), the SDK connects over TLS
/// verifying it against the test CA, and another client in plaintext on the same port; both
/// produce and consume.
#[test]
fn python_clients_over_tls_and_plaintext_on_one_port() {
    let certs = crate::tls_support::Certs::make();
    let mut opts = vec![GRPC.to_string()];
    opts.extend(certs.server_opts("permissive"));
    let b = RawBroker::start(&crate::tls_support::as_str(&opts));
    topic(&b, "GrpcTls", None);
    let ca = certs.ca.display().to_string();
    let v = run(
        &b,
        "produce_consume.py",
        &[
            "--topic", "GrpcTls", "--group", "GrpcTlsG", "--count", "3", "--tls", "--ca", &ca,
        ],
    );
    assert_eq!(v["distinct"], 3, "{v:#}");
    let v = run(
        &b,
        "produce_consume.py",
        &[
            "--topic",
            "GrpcTls",
            "--group",
            "GrpcPlainG",
            "--count",
            "3",
        ],
    );
    assert_eq!(v["distinct"], 3, "{v:#}");
}
