// Classic master-slave replication seen by the real client (rocketmq-client-rust): a
// `brokerRole=SLAVE` ringmq beside a ringmq master holds the master's commit log byte for byte
// and the same consume queues after 200,000 batched sends; a consumer whose master is SIGKILLed
// goes on reading from the slave (the name server keeps the slave's address, the client falls
// back to it); a slave restarted mid-stream (SIGTERM, SIGKILL) catches up.

use crate::common;
use crate::raw_support;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use raw_support::{create_topic_cmd, Conn};
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;
use rocketmq_client_rust::{
    ClientConfig, ClientOptions, DefaultLitePullConsumer, DefaultMQProducer, SendStatus,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_queue::MessageQueue;

/// Slave options: a SLAVE with broker id 1 that serves pulls.
const SLAVE: &[(&str, &str)] = &[
    ("brokerRole", "SLAVE"),
    ("brokerId", "1"),
    ("slaveReadEnable", "true"),
];

fn sock(addr: &str) -> SocketAddr {
    addr.parse().expect("broker address")
}

/// Creates `topic` with `queues` queues on the broker at `addr`.
fn create_topic_on(addr: &str, topic: &str, queues: i32) {
    let r = Conn::connect(sock(addr)).call(create_topic_cmd(topic, queues));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

/// Waits until the broker at `addr` lists `topic` in GET_ALL_TOPIC_CONFIG.
fn wait_topic_on(addr: &str, topic: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = Conn::connect(sock(addr)).call(RemotingCommand::new_request(
            request_code::GET_ALL_TOPIC_CONFIG,
        ));
        if String::from_utf8_lossy(&r.body).contains(&format!("\"{topic}\"")) {
            return;
        }
        assert!(Instant::now() < deadline, "{addr} never listed {topic}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// GET_MIN_OFFSET and GET_MAX_OFFSET of every queue, `(min, max)`.
fn bounds(addr: &str, topic: &str, queues: i32) -> Vec<(i64, i64)> {
    let mut c = Conn::connect(sock(addr));
    let mut ask = |code: i32, q: i32| -> i64 {
        let r = c.call(
            RemotingCommand::new_request(code)
                .with_ext("topic", topic)
                .with_ext("queueId", q),
        );
        assert_eq!(r.code, response_code::SUCCESS, "{code} {:?}", r.remark);
        r.ext("offset")
            .and_then(|o| o.parse().ok())
            .expect("offset")
    };
    (0..queues)
        .map(|q| {
            (
                ask(request_code::GET_MIN_OFFSET, q),
                ask(request_code::GET_MAX_OFFSET, q),
            )
        })
        .collect()
}

/// Waits until the slave's queue bounds equal the master's (which must hold still).
async fn wait_caught_up(master: &str, slave: &str, topic: &str, queues: i32, secs: u64) {
    let started = Instant::now();
    let want = bounds(master, topic, queues);
    loop {
        let got = bounds(slave, topic, queues);
        if got == want {
            println!("slave caught up in {:?}: {want:?}", started.elapsed());
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(secs),
            "the slave's queues {got:?}, the master's {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The files under `dir` (relative names), sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).expect("under dir");
                out.push(rel.display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Asserts the files under `sub` of both stores are the same files with the same bytes.
fn same_files(master: &Path, slave: &Path, sub: &str) -> usize {
    let (m, s) = (master.join(sub), slave.join(sub));
    let names = files(&m);
    assert!(!names.is_empty(), "no files under {}", m.display());
    assert_eq!(names, files(&s), "the slave holds the master's {sub} files");
    let mut bytes = 0;
    for n in &names {
        let a = std::fs::read(m.join(n)).expect("read master file");
        let b = std::fs::read(s.join(n)).expect("read slave file");
        let first_diff = a.iter().zip(&b).position(|(x, y)| x != y);
        assert!(
            a.len() == b.len() && first_diff.is_none(),
            "{sub}/{n}: master {} bytes, slave {} bytes, first difference at {first_diff:?}",
            a.len(),
            b.len()
        );
        bytes += a.len();
    }
    bytes
}

/// Sends `per_queue` messages to each of `queues` in batches of `batch`, one task per queue.
async fn send_batches(
    producer: &DefaultMQProducer,
    queues: &[MessageQueue],
    per_queue: usize,
    batch: usize,
    tag: &str,
) {
    let mut tasks = tokio::task::JoinSet::new();
    for mq in queues {
        let (producer, mq, tag) = (producer.clone(), mq.clone(), tag.to_string());
        tasks.spawn(async move {
            for b in 0..per_queue / batch {
                let msgs: Vec<_> = (0..batch)
                    .map(|i| {
                        let body = format!("{tag}-{}-{}-{}", mq.queue_id(), b, i);
                        message(mq.topic_str(), &tag, "", body.as_bytes())
                    })
                    .collect();
                let r = within(
                    20,
                    "batch send",
                    producer.send_batch_to_queue_with_timeout(msgs, mq.clone(), 10_000),
                )
                .await
                .expect("batch send");
                assert_eq!(r.send_status, SendStatus::SendOk, "{r:?}");
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.expect("send task");
    }
}

/// The master's (or a single broker's) queues of `topic`.
async fn queues_of(producer: &mut DefaultMQProducer, topic: &str, n: usize) -> Vec<MessageQueue> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let qs = publish_queues(producer, topic).await;
        if qs.len() == n {
            return qs;
        }
        assert!(Instant::now() < deadline, "{topic}: {} queues", qs.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// a. 200,000 messages in batches over 8 queues: the slave's commit-log files and consume-queue
/// files equal the master's, byte for byte, and GET_MIN/MAX_OFFSET agree on every queue.
#[test]
fn the_slave_holds_the_masters_log_and_queues() {
    const QUEUES: i32 = 8;
    const TOTAL: usize = 200_000;
    let started = Instant::now();
    // 16 MiB segments: the log spans several of them.
    let master = Broker::start_with(&[("mappedFileSizeCommitLog", "16777216")]);
    let ns = master.namesrv_addr();
    let mut opts = SLAVE.to_vec();
    opts.push(("mappedFileSizeCommitLog", "16777216"));
    let slave = GroupBroker::start(&ns, &opts);
    let topic = unique_topic("repl");
    create_topic_on(&master.broker_addr(), &topic, QUEUES);
    let (m_addr, s_addr) = (master.broker_addr(), slave.broker_addr());
    let (m_dir, s_dir) = (
        master.store_dir().to_path_buf(),
        slave.store_dir().to_path_buf(),
    );
    run(async move {
        let mut producer = producer(&ns).await;
        let queues = queues_of(&mut producer, &topic, QUEUES as usize).await;
        // The slave follows from the start of the log: wait until it has the first batch.
        send_batches(&producer, &queues, 10, 10, "first").await;
        wait_caught_up(&m_addr, &s_addr, &topic, QUEUES, 20).await;

        let sending = Instant::now();
        // 24,990 more per queue in 119 batches of 210.
        send_batches(
            &producer,
            &queues,
            TOTAL / QUEUES as usize - 10,
            210,
            "bulk",
        )
        .await;
        println!("sent {TOTAL} messages in {:?}", sending.elapsed());
        let m = bounds(&m_addr, &topic, QUEUES);
        assert_eq!(m.iter().map(|b| b.1).sum::<i64>(), TOTAL as i64, "{m:?}");
        wait_caught_up(&m_addr, &s_addr, &topic, QUEUES, 40).await;
        shutdown_producer(producer).await;

        let log = same_files(&m_dir, &s_dir, "commitlog");
        let cq = same_files(&m_dir, &s_dir, &format!("consumequeue/{topic}"));
        println!("commit log {log} bytes and consume queues {cq} bytes identical");
        println!("test a took {:?}", started.elapsed());
    });
}

/// A lite pull consumer of `topic` that refreshes routes every 10 s (the client's minimum; the
/// default is 30 s) and gives up on an unanswered pull after 3 s: pulls in flight to the master
/// when it dies are only retried once they time out (with the push consumer, whose 30 s
/// timeout is fixed, the switch to the slave took 25 to 30 s).
async fn failover_consumer(ns: &str, group: &str, topic: &str) -> DefaultLitePullConsumer {
    let mut config = ClientConfig::new();
    config.set_poll_name_server_interval(10_000);
    config.set_instance_name(unique_name("inst").into());
    config.set_namesrv_addr(ns.into());
    let consumer = DefaultLitePullConsumer::builder(client_runtime("failover"))
        .client_options(ClientOptions::legacy(config))
        .name_server_addr(ns.to_string())
        .consumer_group(group.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .pull_batch_size(32)
        .broker_suspend_max_time_millis(1_000)
        .consumer_timeout_millis_when_suspend(3_000)
        .consumer_pull_timeout_millis(3_000)
        .poll_timeout_millis(500)
        .auto_commit(true)
        .build()
        .expect("build lite pull consumer");
    within(
        10,
        "subscribe",
        consumer.subscribe_with_expression(topic, "*"),
    )
    .await
    .expect("subscribe");
    within(20, "consumer start", consumer.start())
        .await
        .expect("consumer start");
    consumer
}

/// The bodies of the next poll (empty when nothing came within the poll timeout).
async fn poll_bodies(consumer: &DefaultLitePullConsumer) -> Vec<String> {
    within(10, "poll", consumer.poll_with_timeout(500))
        .await
        .iter()
        .map(|m| Received::from_ext(m, 0).body_str())
        .collect()
}

/// b. A consumer reads part of a topic from the master; the master is SIGKILLed; the consumer
/// reads the rest from the slave. The name server runs on its own so it outlives the master.
#[test]
fn a_consumer_moves_to_the_slave_when_the_master_dies() {
    const QUEUES: i32 = 4;
    const PER_QUEUE: usize = 2_500;
    let started = Instant::now();
    let ns_proc = NameServer::start();
    let ns = ns_proc.addr();
    let mut master = GroupBroker::start(&ns, &[]);
    let slave = GroupBroker::start(&ns, SLAVE);
    let topic = unique_topic("failover");
    create_topic_on(&master.broker_addr(), &topic, QUEUES);
    // The slave serves the topic once it mirrored the master's topic configs (every 3 s).
    wait_topic_on(&slave.broker_addr(), &topic);
    let (m_addr, s_addr) = (master.broker_addr(), slave.broker_addr());
    run(async move {
        let mut producer = producer(&ns).await;
        let queues = queues_of(&mut producer, &topic, QUEUES as usize).await;
        send_batches(&producer, &queues, PER_QUEUE, 100, "f").await;
        shutdown_producer(producer).await;
        let total = PER_QUEUE * QUEUES as usize;
        // Replication is asynchronous: what the master held when it died is what it had shipped.
        wait_caught_up(&m_addr, &s_addr, &topic, QUEUES, 20).await;

        let consumer = failover_consumer(&ns, &unique_group("failover"), &topic).await;
        let consuming = Instant::now();
        let mut seen = HashSet::new();
        while seen.len() < total / 5 {
            assert!(
                consuming.elapsed() < Duration::from_secs(20),
                "read {} from the master",
                seen.len()
            );
            seen.extend(poll_bodies(&consumer).await);
        }
        println!(
            "{} read from the master in {:?}",
            seen.len(),
            consuming.elapsed()
        );
        master.kill9();
        let killed = Instant::now();
        let before = seen.len();
        let mut first_after = None;
        while seen.len() < total {
            assert!(
                killed.elapsed() < Duration::from_secs(30),
                "{} of {total} read, {before} of them before the master died",
                seen.len()
            );
            let n = seen.len();
            seen.extend(poll_bodies(&consumer).await);
            if first_after.is_none() && seen.len() > n && n > before + 1_000 * QUEUES as usize {
                // Past what the consumer may have held when the master died (its default
                // pullThresholdForQueue is 1,000 messages): these came from the slave.
                first_after = Some(killed.elapsed());
            }
        }
        println!(
            "{before} of {total} read from the master; the rest from the slave: first new \
             message after {first_after:?}, all after {:?}",
            killed.elapsed()
        );
        let _ = tokio::time::timeout(Duration::from_secs(10), consumer.shutdown()).await;
        // The name server routes the group through its slave alone.
        let route = String::from_utf8_lossy(
            &Conn::connect(sock(&ns))
                .call(
                    RemotingCommand::new_request(request_code::GET_ROUTEINFO_BY_TOPIC)
                        .with_ext("topic", topic.as_str()),
                )
                .body,
        )
        .into_owned();
        assert!(
            route.contains(&format!("\"brokerAddrs\":{{\"1\":\"{s_addr}\"}}")),
            "{route}"
        );
        println!("test b took {:?}", started.elapsed());
    });
    drop(slave);
    drop(ns_proc);
}

/// c. A slave stopped (SIGTERM, or SIGKILL) and started again while a producer keeps sending
/// catches up: the same commit-log files and consume queues as its master.
fn a_restarted_slave_catches_up(kill: bool) {
    const QUEUES: i32 = 4;
    let started = Instant::now();
    let master = Broker::start();
    let ns = master.namesrv_addr();
    let mut slave = GroupBroker::start(&ns, SLAVE);
    let topic = unique_topic("restart");
    create_topic_on(&master.broker_addr(), &topic, QUEUES);
    let m_addr = master.broker_addr();
    let (m_dir, s_dir) = (
        master.store_dir().to_path_buf(),
        slave.store_dir().to_path_buf(),
    );
    run(async move {
        let mut producer = producer(&ns).await;
        let queues = queues_of(&mut producer, &topic, QUEUES as usize).await;
        send_batches(&producer, &queues, 10, 10, "first").await;
        wait_caught_up(&m_addr, &slave.broker_addr(), &topic, QUEUES, 20).await;

        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sender = {
            let (producer, queues, stop) = (producer.clone(), queues.clone(), stop.clone());
            tokio::spawn(async move {
                let mut rounds = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    send_batches(&producer, &queues, 100, 50, &format!("r{rounds}")).await;
                    rounds += 1;
                }
                rounds
            })
        };
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        if kill {
            slave.kill9();
        } else {
            slave.stop();
        }
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        slave.respawn();
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rounds = sender.await.expect("sender");
        assert!(rounds >= 3, "the producer kept sending ({rounds} rounds)");
        shutdown_producer(producer).await;
        wait_caught_up(&m_addr, &slave.broker_addr(), &topic, QUEUES, 30).await;
        let log = same_files(&m_dir, &s_dir, "commitlog");
        let cq = same_files(&m_dir, &s_dir, &format!("consumequeue/{topic}"));
        println!(
            "{} rounds of 400 sent; commit log {log} bytes, consume queues {cq} bytes identical",
            rounds
        );
        println!(
            "test c ({}) took {:?}",
            if kill { "SIGKILL" } else { "SIGTERM" },
            started.elapsed()
        );
    });
}

#[test]
fn a_slave_stopped_mid_stream_catches_up() {
    a_restarted_slave_catches_up(false);
}

#[test]
fn a_slave_killed_mid_stream_catches_up() {
    a_restarted_slave_catches_up(true);
}
