//! The web console in a real browser: `ringmq serve` with its console on its own port, a real
//! client's load on it (a few hundred messages sent and consumed), then Debian's Chromium
//! driven by playwright-core (tests/console/console.mjs) through every page: the cluster with
//! its live rate chart, a topic's queues, a topic created with the form, a consumer group's lag
//! per queue and its clients, a message looked up by key and by both ids, a missing page and a
//! missing topic; then the group's offset reset from its page, checked through the admin
//! protocol. Screenshots of every page land in `$CARGO_TARGET_TMPDIR/console-screenshots/`.
//!
//! Needs `/usr/bin/chromium` and playwright-core: `export RINGMQ_NODE_MODULES="$(scripts/
//! browser-env.sh)"` installs both (scripts/test.sh does it). Without them the test fails.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use ringmq::admin::AdminClient;
use rocketmq_model::common::message::message_single::Message;

const CHROMIUM: &str = "/usr/bin/chromium";
/// Messages the load sends (besides the warm-up that creates the topic).
const MESSAGES: usize = 300;
/// The one message the lookups look for.
const PICKED: usize = 150;
/// The longest one phase of the browser script may take.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// playwright-core's node_modules, from RINGMQ_NODE_MODULES; panics (the test fails) with the
/// way to install it when it or the browser is missing.
fn node_modules() -> PathBuf {
    let how = "run `export RINGMQ_NODE_MODULES=\"$(scripts/browser-env.sh)\"` first \
               (it installs Debian's chromium and playwright-core)";
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} is missing: the console's browser test needs it; {how}"
    );
    let dir = std::env::var_os("RINGMQ_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("RINGMQ_NODE_MODULES is not set; {how}"));
    assert!(
        dir.join("playwright-core").join("package.json").is_file(),
        "no playwright-core under RINGMQ_NODE_MODULES={}; {how}",
        dir.display()
    );
    dir
}

/// Runs one phase of tests/console/console.mjs with `cfg`; returns what it saw (its JSON line).
fn run_script(cfg: &serde_json::Value) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console/console.mjs");
    let mut child = Command::new("node")
        .arg(&script)
        .arg(cfg.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn node (is nodejs installed?)");
    let deadline = Instant::now() + SCRIPT_TIMEOUT;
    while child.try_wait().expect("wait for node").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("console.mjs ({}) ran past {SCRIPT_TIMEOUT:?}", cfg["phase"]);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("node output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "console.mjs ({}) failed: {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{}",
        cfg["phase"],
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("console.mjs printed {line:?}: {e}"))
}

/// The group's committed offsets on `topic`, summed over its queues, through GET_CONSUME_STATS.
fn committed_total(admin: &AdminClient, group: &str, topic: &str) -> i64 {
    admin
        .route_masters(topic)
        .expect("topic route")
        .iter()
        .map(|b| {
            let stats = admin
                .consume_stats(&b.addr, group, Some(topic))
                .expect("consume stats");
            stats
                .offset_table
                .iter()
                .map(|q| q.offset.consumer_offset)
                .sum::<i64>()
        })
        .sum()
}

/// Every page of the console works in Chromium against a loaded broker without a console error,
/// and its reset-offset form moves the group's committed offsets back to the time it is given.
#[test]
fn console_pages_work_in_a_browser() {
    let modules = node_modules();
    let broker = Broker::start_with_console(&[]);
    let ns = broker.namesrv_addr();
    let topic = unique_topic("Console");
    let group = unique_group("Console");
    let new_topic = unique_topic("ConsoleNew");
    let key = format!("console-key-{PICKED}");
    let body = format!("console body {PICKED}");
    // Before the first message: a reset to this time goes back to every queue's start.
    let reset_to = now_ms() - 1_000;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");

    // The load: MESSAGES sends by a real producer, all consumed by a push consumer.
    let (producer, consumer, picked) = rt.block_on(async {
        let mut producer = producer(&ns).await;
        create_topic_by_send(&mut producer, &topic).await;
        let mut picked = None;
        for i in 0..MESSAGES {
            let msg: Message = message(
                &topic,
                "TagC",
                &format!("console-key-{i}"),
                format!("console body {i}").as_bytes(),
            );
            let r = within(15, "send", producer.send_with_timeout(msg, 5_000))
                .await
                .expect("send")
                .expect("SendResult");
            if i == PICKED {
                picked = Some(r);
            }
        }
        let (consumer, mut inbox) = push_consumer(&ns, &group, &topic).await;
        let got = collect_distinct(&mut inbox, MESSAGES, Duration::from_secs(40)).await;
        assert!(
            got.len() >= MESSAGES,
            "consumed {} of {MESSAGES}",
            got.len()
        );
        (producer, consumer, picked.expect("picked message sent"))
    });
    let msg_id = picked.msg_id.clone().expect("msgId").to_string();
    let offset_msg_id = picked.offset_msg_id.clone().expect("offsetMsgId");
    let total = MESSAGES as i64 + 1;

    // The consumer commits its offsets every few seconds: the group's page has queues once it
    // has committed them all.
    let admin = AdminClient::new(&ns).expect("admin client");
    let deadline = Instant::now() + Duration::from_secs(15);
    while committed_total(&admin, &group, &topic) != total {
        assert!(
            Instant::now() < deadline,
            "the consumer's offsets never reached {total}: {}",
            committed_total(&admin, &group, &topic)
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let mut cfg = serde_json::json!({
        "phase": "browse",
        "base": format!("http://{}", broker.console_addr()),
        "nodeModules": modules,
        "screenshots": shots,
        "topic": topic,
        "group": group,
        "key": key,
        "body": body,
        "msgId": msg_id,
        "offsetMsgId": offset_msg_id,
        "total": total,
        "newTopic": new_topic,
        "resetTo": reset_to,
    });
    let seen = run_script(&cfg);
    assert_eq!(seen["brokerRows"], 1, "{seen}");
    assert!(
        seen["brokerText"]
            .as_str()
            .unwrap_or_default()
            .contains(&broker.broker_addr()),
        "{seen}"
    );
    let queue_count: i32 = admin
        .topic_route(&topic)
        .expect("route")
        .queue_datas
        .iter()
        .map(|q| q.read_queue_nums)
        .sum();
    assert_eq!(
        seen["topicQueues"], queue_count,
        "the topic's queues, {seen}"
    );
    assert!(seen["clients"].as_u64().unwrap_or(0) >= 1, "{seen}");
    assert_eq!(seen["byKey"], serde_json::json!([msg_id]), "{seen}");
    assert_eq!(seen["by_msgid"], body, "{seen}");
    assert_eq!(seen["by_offsetid"], body, "{seen}");
    assert_eq!(seen["missingStatus"], 404, "{seen}");
    assert!(
        seen["missingTopicError"]
            .as_str()
            .unwrap_or_default()
            .contains("NoSuchTopic"),
        "{seen}"
    );
    // The form's topic exists on the broker with the queues it asked for.
    let route = admin
        .topic_route(&new_topic)
        .expect("created topic's route");
    let queues: Vec<(i32, i32)> = route
        .queue_datas
        .iter()
        .map(|q| (q.read_queue_nums, q.write_queue_nums))
        .collect();
    assert_eq!(queues, vec![(3, 3)], "{seen}");
    assert_eq!(seen["newTopicQueues"], 3, "{seen}");

    // The reset: with the consumer gone (its last offsets committed), every message consumed...
    rt.block_on(shutdown_push(consumer));
    assert_eq!(committed_total(&admin, &group, &topic), total);
    cfg["phase"] = "reset".into();
    let seen = run_script(&cfg);
    assert_eq!(seen["resetQueues"], queue_count, "{seen}");
    // ...and after it none: the group is back at the start, its lag every message.
    assert_eq!(committed_total(&admin, &group, &topic), 0, "{seen}");
    assert_eq!(seen["groupLag"], total, "{seen}");
    rt.block_on(shutdown_producer(producer));
}
