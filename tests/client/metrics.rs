// Proves the Prometheus endpoint (metricsExporterType=PROM): a real client's sends, pulls and
// commits show in RocketMQ 5's metrics with Java's names and labels, the endpoint answers bad
// requests with 404/405/400 and keeps serving, and a broker with the default DISABLE opens no
// metrics port.

use crate::common;
use crate::raw_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use rocketmq_client_rust::SendStatus;

const QUEUES: u32 = 2;
const FIRST: usize = 20;
const SECOND: usize = 7;
const BODY: &[u8] = b"metrics-body-0123456789";

/// One plain HTTP/1.1 exchange with the endpoint: status line and body.
fn http(port: u16, request: &[u8]) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read the response");
    let text = String::from_utf8(out).expect("utf-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("headers end");
    let status = head.lines().next().unwrap_or_default().to_string();
    (status, body.to_string())
}

fn scrape(port: u16) -> String {
    let (status, body) = http(port, b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    body
}

/// The value of the one sample of `name` whose labels contain every one of `labels`.
fn value(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    let mut found = text.lines().filter(|l| {
        l.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('{'))
            && labels.iter().all(|p| l.contains(p))
    });
    let line = found.next()?;
    assert!(
        found.next().is_none(),
        "{name} {labels:?} matches twice:\n{text}"
    );
    line.rsplit(' ').next()?.parse().ok()
}

/// Scrapes until `f` holds (the consumer commits offsets every few seconds), or fails with the
/// last scrape.
fn scrape_until(port: u16, what: &str, f: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = scrape(port);
        if f(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never held; last scrape:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// N messages sent by rocketmq-client-rust show as `rocketmq_messages_in_total{topic}` = N with
/// the body bytes in `rocketmq_throughput_in_total`; once a push consumer has them,
/// `rocketmq_messages_out_total` is N and the group's lag 0; with the consumer gone, M more
/// sends make the lag M. Every point carries the common labels and `metricsLabel`'s, and the
/// writer's batch figures count the sends.
#[test]
fn metrics_follow_sends_pulls_and_lag() {
    let port = raw_support::controller::free_ports(1)[0];
    let port_s = port.to_string();
    let broker = Broker::start_with(&[
        ("metricsExporterType", "PROM"),
        ("metricsPromExporterPort", &port_s),
        ("metricsLabel", "env:test"),
        ("brokerClusterName", "MetricsCluster"),
        ("brokerName", "metrics-b"),
    ]);
    let ns = broker.namesrv_addr();
    let broker_addr = broker.broker_addr();
    let topic = unique_topic("metrics");
    let group = unique_group("metrics");
    let topic_l = format!("topic=\"{topic}\"");
    let group_l = format!("consumer_group=\"{group}\"");
    run(async move {
        let admin = admin(&ns).await;
        create_topic(&admin, &broker_addr, &topic, QUEUES).await;
        let mut producer = producer(&ns).await;
        wait_route(&mut producer, &topic).await;
        let queues = publish_queues(&mut producer, &topic).await;
        for i in 0..FIRST {
            let msg = message(&topic, "M", "", BODY);
            let r = send_to_queue(&producer, msg, &queues[i % queues.len()], "send").await;
            assert_eq!(r.send_status, SendStatus::SendOk);
        }

        let text = scrape(port);
        let msgs_in = value(
            &text,
            "rocketmq_messages_in_total",
            &[&topic_l, "message_type=\"normal\"", "is_system=\"false\""],
        );
        assert_eq!(msgs_in, Some(FIRST as f64), "{text}");
        let bytes_in = value(&text, "rocketmq_throughput_in_total", &[&topic_l]);
        assert_eq!(bytes_in, Some((FIRST * BODY.len()) as f64), "{text}");
        for common in [
            "cluster=\"MetricsCluster\"",
            "node_type=\"broker\"",
            "node_id=\"metrics-b\"",
            "env=\"test\"",
        ] {
            assert!(
                text.lines()
                    .filter(|l| l.starts_with("rocketmq_messages_in_total{"))
                    .all(|l| l.contains(common)),
                "{common} missing:\n{text}"
            );
        }
        let sends = value(
            &text,
            "rocketmq_rpc_latency_milliseconds_count",
            &[
                "request_code=\"send_message_v2\"",
                "response_code=\"success\"",
                "result=\"success\"",
            ],
        )
        .or_else(|| {
            value(
                &text,
                "rocketmq_rpc_latency_milliseconds_count",
                &["request_code=\"send_message\"", "response_code=\"success\""],
            )
        });
        assert_eq!(sends, Some(FIRST as f64), "{text}");
        assert!(
            value(&text, "rocketmq_topic_number", &[]).unwrap_or(0.0) >= 1.0,
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        // The writer's own figures: every send is a record of some batch (the broker may have
        // written a few records of its own), and the histogram counts every batch once.
        let records = value(&text, "ringmq_writer_records_total", &[]).unwrap_or(0.0);
        let batches = value(&text, "ringmq_writer_batches_total", &[]).unwrap_or(0.0);
        assert!(records >= FIRST as f64, "{text}");
        assert!(batches >= 1.0 && batches <= records, "{text}");
        assert_eq!(
            value(&text, "ringmq_writer_batch_records_count", &[]),
            Some(batches),
            "{text}"
        );
        assert_eq!(
            value(&text, "ringmq_writer_batch_records_sum", &[]),
            Some(records),
            "{text}"
        );

        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let got = collect_distinct(&mut inbox, FIRST, Duration::from_secs(30)).await;
        assert_eq!(got.len(), FIRST, "all consumed");
        let text = scrape_until(port, "messages out and lag 0", |t| {
            value(t, "rocketmq_consumer_lag_messages", &[&group_l, &topic_l]) == Some(0.0)
                && value(t, "rocketmq_messages_out_total", &[&group_l, &topic_l])
                    >= Some(FIRST as f64)
        });
        let out_bytes = value(
            &text,
            "rocketmq_throughput_out_total",
            &[&group_l, &topic_l],
        );
        assert!(
            out_bytes.unwrap_or(0.0) > (FIRST * BODY.len()) as f64,
            "{text}"
        );
        assert_eq!(
            value(
                &text,
                "rocketmq_consumer_connections",
                &[&group_l, "consume_mode=\"push\""]
            ),
            Some(1.0),
            "{text}"
        );
        shutdown_push(consumer).await;

        for i in 0..SECOND {
            let msg = message(&topic, "M", "", BODY);
            let r = send_to_queue(&producer, msg, &queues[i % queues.len()], "send").await;
            assert_eq!(r.send_status, SendStatus::SendOk);
        }
        let text = scrape(port);
        assert_eq!(
            value(
                &text,
                "rocketmq_consumer_lag_messages",
                &[&group_l, &topic_l]
            ),
            Some(SECOND as f64),
            "{text}"
        );
        let latency = value(
            &text,
            "rocketmq_consumer_lag_latency_milliseconds",
            &[&group_l],
        );
        assert!(latency.is_some_and(|ms| ms >= 0.0), "{text}");
        assert_eq!(
            value(&text, "rocketmq_messages_in_total", &[&topic_l]),
            Some((FIRST + SECOND) as f64),
            "{text}"
        );
        shutdown_producer(producer).await;
    });
}

/// Another path is 404 with a short text body, another method 405, garbage and an oversized
/// request 400; the endpoint still scrapes afterwards.
#[test]
fn bad_requests_get_http_errors() {
    let port = raw_support::controller::free_ports(1)[0];
    let port_s = port.to_string();
    let _broker = Broker::start_with(&[
        ("metricsExporterType", "2"),
        ("metricsPromExporterPort", &port_s),
    ]);
    let (status, body) = http(port, b"GET /other HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert!(body.contains("/metrics"), "{body}");
    let (status, _) = http(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    let (status, _) = http(port, b"\x16\x03\x01 not http\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    let mut huge = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
    huge.resize(20_000, b'a');
    let (status, _) = http(port, &huge);
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    let text = scrape(port);
    assert!(
        text.contains("# TYPE rocketmq_broker_permission gauge"),
        "{text}"
    );
}

/// With the default metricsExporterType (DISABLE) the broker opens no metrics port. The test
/// holds the port itself for the whole run (no other test can take it): a broker that tried to
/// serve metrics there could not bind it and would not start (a taken metrics port stops
/// start-up, as `prom_port_taken_stops_start_up` shows), and nothing connects to the holder.
#[test]
fn disabled_exporter_opens_no_port() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    held.set_nonblocking(true).unwrap();
    let port_s = held.local_addr().unwrap().port().to_string();
    let broker = Broker::start_with(&[("metricsPromExporterPort", &port_s)]);
    // The broker is up and serving its own port.
    assert!(TcpStream::connect(broker.broker_addr()).is_ok());
    assert!(
        held.accept().is_err(),
        "something connected to the held port"
    );
}

/// `serve` on a fresh store with `options` (`-o`), which must refuse to start: it exits not
/// zero without having announced a broker. Its stderr.
fn serve_refused(options: &[String]) -> String {
    let store = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"));
    cmd.args(["serve", "--console-listen", "off", "--store-dir"])
        .arg(store.path())
        .args([
            "--namesrv-listen",
            "127.0.0.1:0",
            "--broker-listen",
            "127.0.0.1:0",
        ])
        .args(["-o", "mappedFileSizeCommitLog=16777216"]);
    for o in options {
        cmd.args(["-o", o]);
    }
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run ringmq");
    assert!(!out.status.success(), "exit status {}", out.status);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("broker listening"));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The control of the test above: with metricsExporterType=PROM, the same held port stops the
/// start with an error naming it.
#[test]
fn prom_port_taken_stops_start_up() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let stderr = serve_refused(&[
        "metricsExporterType=PROM".into(),
        format!("metricsPromExporterPort={port}"),
    ]);
    assert!(stderr.contains(&port.to_string()), "{stderr}");
    drop(held);
}

/// metricsExporterType=OTLP_GRPC (which ringmq does not implement) stops `serve` at start with
/// an error naming the key, rather than running without the metrics the operator asked for.
#[test]
fn unsupported_exporter_refuses_to_start() {
    let stderr = serve_refused(&["metricsExporterType=OTLP_GRPC".into()]);
    assert!(
        stderr.contains("metricsExporterType") && stderr.contains("OTLP_GRPC"),
        "{stderr}"
    );
}

/// A raw consumer's progress on one queue, scraped: (lag, inflight, ready) of `group` on `topic`,
/// None where the scrape has no such point.
fn progress(port: u16, group: &str, topic: &str) -> [Option<f64>; 3] {
    let text = scrape(port);
    let labels = [
        format!("consumer_group=\"{group}\""),
        format!("topic=\"{topic}\""),
    ];
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    [
        "rocketmq_consumer_lag_messages",
        "rocketmq_consumer_inflight_messages",
        "rocketmq_consumer_ready_messages",
    ]
    .map(|name| value(&text, name, &labels))
}

/// Java's pull-offset figures over raw pulls that commit nothing: with 0 committed, a pull of 5
/// of 8 messages makes 5 inflight and 3 ready (the queueing latency counts from the first
/// unpulled message); committing 5 leaves 0 inflight; pulling the rest makes 3 inflight and 0
/// ready; a forced reset to the beginning (222) forgets the pull offset, so all 8 are ready again
/// rather than inflight; deleting the group with its offsets (207) removes its points and its
/// pull offsets.
#[test]
fn inflight_and_ready_follow_pulls_commits_and_resets() {
    use raw_support::admin::{commit_offset, commit_on};
    use raw_support::{create_topic_cmd, pull_cmd, records, send_cmd, Conn, RawBroker};
    use ringmq::protocol::codes::{request_code as req, response_code as rc};
    use ringmq::protocol::RemotingCommand;

    const T: &str = "InflightT";
    const G: &str = "InflightG";
    let port = raw_support::controller::free_ports(1)[0];
    let port_opt = format!("metricsPromExporterPort={port}");
    let b = RawBroker::start(&["metricsExporterType=PROM", &port_opt]);
    let mut c = Conn::connect(b.broker);
    assert_eq!(c.call(create_topic_cmd(T, 1)).code, rc::SUCCESS);
    for i in 0..8 {
        let r = c.call(send_cmd(T, 0, format!("m{i}").as_bytes(), ""));
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    }
    // A consumer of the group online, for the reset.
    let mut client = Conn::connect(b.broker);
    let hb = format!(
        r#"{{"clientID":"inflight-c","consumerDataSet":[{{"groupName":"{G}",
        "consumeType":"CONSUME_ACTIVELY","messageModel":"CLUSTERING",
        "consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{{"topic":"{T}",
        "subString":"*","tagsSet":[],"codeSet":[],"subVersion":1}}]}}],"producerDataSet":[]}}"#
    );
    let r = client.call(RemotingCommand::new_request(req::HEART_BEAT).with_body(hb));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    let mut pull = |offset: i64, max: i32| {
        let r = c.call(
            pull_cmd(T, 0, offset, 0)
                .with_ext("consumerGroup", G)
                .with_ext("maxMsgNums", max),
        );
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        records(&r.body).len()
    };

    commit_offset(b.broker, G, T, 0, 0);
    assert_eq!(pull(0, 5), 5);
    assert_eq!(progress(port, G, T), [Some(8.0), Some(5.0), Some(3.0)]);
    let text = scrape(port);
    let g = format!("consumer_group=\"{G}\"");
    let queueing = value(
        &text,
        "rocketmq_consumer_queueing_latency_milliseconds",
        &[&g],
    );
    assert!(queueing.is_some_and(|ms| ms >= 0.0), "{text}");

    commit_offset(b.broker, G, T, 0, 5);
    assert_eq!(progress(port, G, T), [Some(3.0), Some(0.0), Some(3.0)]);
    assert_eq!(pull(5, 32), 3);
    assert_eq!(progress(port, G, T), [Some(3.0), Some(3.0), Some(0.0)]);
    let text = scrape(port);
    assert_eq!(
        value(
            &text,
            "rocketmq_consumer_queueing_latency_milliseconds",
            &[&g]
        ),
        Some(0.0),
        "nothing waits to be pulled:\n{text}"
    );

    let mut admin = Conn::connect(b.broker);
    let r = admin.call(
        RemotingCommand::new_request(req::INVOKE_BROKER_TO_RESET_OFFSET)
            .with_ext("group", G)
            .with_ext("topic", T)
            .with_ext("timestamp", 0)
            .with_ext("isForce", true),
    );
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    assert_eq!(progress(port, G, T), [Some(8.0), Some(0.0), Some(8.0)]);
    assert_eq!(pull(0, 2), 2);
    assert_eq!(progress(port, G, T), [Some(8.0), Some(2.0), Some(6.0)]);

    let r = admin.call(
        RemotingCommand::new_request(req::DELETE_SUBSCRIPTIONGROUP)
            .with_ext("groupName", G)
            .with_ext("cleanOffset", true),
    );
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    assert_eq!(progress(port, G, T), [None, None, None]);
    // Committed again from 0: the pull offset went with the group, nothing is inflight.
    commit_on(&mut admin, G, T, 0, 0);
    assert_eq!(progress(port, G, T), [Some(8.0), Some(0.0), Some(8.0)]);
    drop(client);
}

/// `rocketmq_storage_flush_behind_bytes` under ASYNC_FLUSH: a few small sends stay below
/// flushCommitLogLeastPages, so they wait for the thorough flush (every 10 s) and the figure is
/// above 0; after it, with nothing more sent, it is 0.
#[test]
fn flush_behind_moves_and_settles_at_zero() {
    use raw_support::{create_topic_cmd, send_cmd, Conn, RawBroker};
    use ringmq::protocol::codes::response_code as rc;

    let port = raw_support::controller::free_ports(1)[0];
    let port_opt = format!("metricsPromExporterPort={port}");
    let b = RawBroker::start(&[
        "metricsExporterType=PROM",
        &port_opt,
        "flushDiskType=ASYNC_FLUSH",
    ]);
    let mut c = Conn::connect(b.broker);
    assert_eq!(c.call(create_topic_cmd("FlushT", 1)).code, rc::SUCCESS);
    let behind = |text: &str| value(text, "rocketmq_storage_flush_behind_bytes", &[]);
    let mut seen = Vec::new();
    for i in 0..10 {
        let r = c.call(send_cmd("FlushT", 0, format!("m{i}").as_bytes(), ""));
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        let text = scrape(port);
        let v = behind(&text).unwrap_or_else(|| panic!("no flush_behind:\n{text}"));
        assert!(v >= 0.0, "{text}");
        seen.push(v);
        if v > 0.0 {
            break;
        }
    }
    assert!(seen.iter().any(|v| *v > 0.0), "never behind: {seen:?}");
    scrape_until(port, "flush behind back to 0", |t| behind(t) == Some(0.0));
}

/// Topic and group creations are timed in Java's histograms: one topic created and one refused
/// (an illegal name) count under `invocation_status` success and failure, a group created under
/// success, each with Java's buckets.
#[test]
fn creations_are_timed() {
    use raw_support::{create_topic_cmd, Conn, RawBroker};
    use ringmq::protocol::codes::{request_code as req, response_code as rc};
    use ringmq::protocol::RemotingCommand;

    let port = raw_support::controller::free_ports(1)[0];
    let port_opt = format!("metricsPromExporterPort={port}");
    let b = RawBroker::start(&["metricsExporterType=PROM", &port_opt]);
    let mut c = Conn::connect(b.broker);
    assert_eq!(c.call(create_topic_cmd("CreateT", 1)).code, rc::SUCCESS);
    assert_ne!(c.call(create_topic_cmd("bad topic!", 1)).code, rc::SUCCESS);
    let r = c.call(
        RemotingCommand::new_request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(r#"{"groupName":"CreateG"}"#),
    );
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    let text = scrape(port);
    let topic = "rocketmq_topic_create_execution_time_milliseconds_count";
    let ok = ["invocation_status=\"success\"", "is_system=\"false\""];
    assert_eq!(value(&text, topic, &ok), Some(1.0), "{text}");
    let failed = ["invocation_status=\"failure\""];
    assert_eq!(value(&text, topic, &failed), Some(1.0), "{text}");
    let group = "rocketmq_consumer_group_create_execution_time_milliseconds_count";
    let ok = ["invocation_status=\"success\""];
    assert_eq!(value(&text, group, &ok), Some(1.0), "{text}");
    assert!(
        text.contains("rocketmq_topic_create_execution_time_milliseconds_bucket{")
            && text.contains("le=\"5000.0\""),
        "{text}"
    );
}

/// `rocketmq_half_messages{topic}` counts the transactional messages not yet decided: 3 prepared
/// sends make 3, a commit and a rollback leave 1; after a restart the open one is still counted
/// (found in the half queue), and its commit makes 0.
#[test]
fn half_messages_follow_decisions_and_restarts() {
    use raw_support::{create_topic_cmd, send_cmd, Conn, RawBroker};
    use ringmq::protocol::codes::{request_code as req, response_code as rc};
    use ringmq::protocol::RemotingCommand;

    const T: &str = "HalfT";
    let port = raw_support::controller::free_ports(1)[0];
    let port_opt = format!("metricsPromExporterPort={port}");
    let opts = ["metricsExporterType=PROM", port_opt.as_str()];
    let b = RawBroker::start(&opts);
    let mut c = Conn::connect(b.broker);
    assert_eq!(c.call(create_topic_cmd(T, 1)).code, rc::SUCCESS);
    // (queue offset, commit-log offset) of each half message.
    let mut halves = Vec::new();
    for i in 0..3 {
        let props = format!("TRAN_MSG\u{1}true\u{2}PGROUP\u{1}pg\u{2}UNIQ_KEY\u{1}HalfU{i}\u{2}");
        let r = c.call(send_cmd(T, 0, format!("tx-{i}").as_bytes(), &props));
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        let queue_offset: i64 = r.ext("queueOffset").unwrap().parse().unwrap();
        let id = r.ext("msgId").unwrap();
        let phy = i64::from_str_radix(&id[id.len() - 16..], 16).unwrap();
        halves.push((queue_offset, phy));
    }
    let end = |c: &mut Conn, (queue_offset, phy): (i64, i64), state: i32| {
        let r = c.call(
            RemotingCommand::new_request(req::END_TRANSACTION)
                .with_ext("producerGroup", "pg")
                .with_ext("tranStateTableOffset", queue_offset)
                .with_ext("commitLogOffset", phy)
                .with_ext("commitOrRollback", state)
                .with_ext("fromTransactionCheck", false)
                .with_ext("msgId", "U"),
        );
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    };
    let topic_l = format!("topic=\"{T}\"");
    let half = |port: u16| value(&scrape(port), "rocketmq_half_messages", &[&topic_l]);
    assert_eq!(half(port), Some(3.0));
    end(&mut c, halves[0], 8);
    end(&mut c, halves[1], 12);
    assert_eq!(half(port), Some(1.0));
    let text = scrape(port);
    assert_eq!(
        value(&text, "rocketmq_commit_messages_total", &[&topic_l]),
        Some(1.0),
        "{text}"
    );

    drop(c);
    let b = RawBroker::start_in(b.stop(), &opts);
    assert_eq!(half(port), Some(1.0), "the open one, found at start");
    let mut c = Conn::connect(b.broker);
    end(&mut c, halves[2], 8);
    assert_eq!(half(port), Some(0.0));
}
