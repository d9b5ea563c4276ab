//! POP's two latency probes, each sequential over plain request/response connections:
//! `pop-wake`: how soon a parked pop (queue -1) is answered after a send to the topic, from
//! the send's start to the pop's answer; `pop-revive`: how late an un-acked message comes back
//! past its invisible time (`popTime + invisibleTime` from the pop's answer, to the receipt of
//! its redelivery). Called by main; results are hdrhistograms in microseconds.

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

use crate::record::for_each_record;
use crate::wire::RpcConn;

fn pop_cmd(topic: &str, group: &str, max: i32, invisible_ms: i64, poll_ms: i64) -> RemotingCommand {
    RemotingCommand::new_request(request_code::POP_MESSAGE)
        .with_ext("consumerGroup", group)
        .with_ext("topic", topic)
        .with_ext("queueId", -1)
        .with_ext("maxMsgNums", max)
        .with_ext("invisibleTime", invisible_ms)
        .with_ext("pollTime", poll_ms)
        .with_ext("bornTime", ringmq::common::now_ms())
        .with_ext("initMode", 1)
        .with_ext("expType", "TAG")
        .with_ext("exp", "*")
}

fn send_cmd(topic: &str, body: &[u8]) -> RemotingCommand {
    RemotingCommand::new_request(request_code::SEND_MESSAGE_V2)
        .with_ext("a", "pop_probe")
        .with_ext("b", topic)
        .with_ext("c", "TBW102")
        .with_ext("d", 4)
        .with_ext("e", 0)
        .with_ext("f", 0)
        .with_ext("g", ringmq::common::now_ms())
        .with_ext("h", 0)
        .with_ext("i", "")
        .with_ext("j", 0)
        .with_ext("k", false)
        .with_ext("m", false)
        .with_body(body.to_vec())
}

/// The bodies of a pop answer's records.
fn bodies(r: &RemotingCommand) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    for_each_record(&r.body, |rec| out.push(rec.body.to_vec())).map_err(|e| e.to_string())?;
    Ok(out)
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("histogram bounds")
}

/// `count` rounds of: a pop parks, a message is sent, the pop's answer arrives.
pub fn wake(
    broker: &str,
    topic: &str,
    group: &str,
    count: u64,
    timeout: Duration,
) -> Result<Histogram<u64>, String> {
    let mut producer = RpcConn::open(broker, timeout)?;
    let (parked_tx, parked_rx) = mpsc::channel::<()>();
    let (got_tx, got_rx) = mpsc::channel::<Result<Instant, String>>();
    let (b, t, g) = (broker.to_string(), topic.to_string(), group.to_string());
    let consumer = std::thread::spawn(move || -> Result<(), String> {
        let mut c = RpcConn::open(&b, timeout + Duration::from_secs(10))?;
        // Drain what the topic holds, so each round's pop parks.
        while c.call(&pop_cmd(&t, &g, 32, 60_000, 0))?.code == response_code::SUCCESS {}
        for _ in 0..count {
            parked_tx.send(()).map_err(|e| e.to_string())?;
            let r = c.call(&pop_cmd(&t, &g, 1, 60_000, 10_000))?;
            let at = Instant::now();
            let outcome = match r.code {
                response_code::SUCCESS => Ok(at),
                code => Err(format!("parked pop answered {code}: {:?}", r.remark)),
            };
            got_tx.send(outcome).map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    let mut h = hist();
    for i in 0..count {
        parked_rx
            .recv_timeout(timeout)
            .map_err(|e| format!("consumer: {e}"))?;
        // Let the pop reach the broker and park.
        std::thread::sleep(Duration::from_millis(30));
        let t0 = Instant::now();
        let r = producer.call(&send_cmd(topic, format!("wake-{i}").as_bytes()))?;
        if r.code != response_code::SUCCESS {
            return Err(format!("send answered {}", r.code));
        }
        let at = got_rx
            .recv_timeout(timeout + Duration::from_secs(10))
            .map_err(|e| format!("consumer: {e}"))??;
        h.record(at.duration_since(t0).as_micros().max(1) as u64)
            .map_err(|e| e.to_string())?;
    }
    consumer
        .join()
        .map_err(|_| "consumer panicked".to_string())??;
    Ok(h)
}

/// Sends `count` messages, pops them all with `invisible_ms` and acks none, then pops until
/// each came back once, recording how long after its deadline it arrived (0 when on time).
pub fn revive(
    broker: &str,
    topic: &str,
    group: &str,
    count: u64,
    invisible_ms: i64,
    timeout: Duration,
) -> Result<Histogram<u64>, String> {
    let mut c = RpcConn::open(broker, timeout + Duration::from_secs(2))?;
    while c.call(&pop_cmd(topic, group, 32, 600_000, 0))?.code == response_code::SUCCESS {}
    for i in 0..count {
        let r = c.call(&send_cmd(topic, format!("revive-{i}").as_bytes()))?;
        if r.code != response_code::SUCCESS {
            return Err(format!("send answered {}", r.code));
        }
    }
    let mut deadline_of: HashMap<Vec<u8>, i64> = HashMap::new();
    let give_up = Instant::now() + timeout;
    while (deadline_of.len() as u64) < count && Instant::now() < give_up {
        let r = c.call(&pop_cmd(topic, group, 32, invisible_ms, 1_000))?;
        if r.code != response_code::SUCCESS {
            continue;
        }
        let pop_time: i64 = r
            .ext("popTime")
            .and_then(|v| v.parse().ok())
            .ok_or("no popTime")?;
        for b in bodies(&r)? {
            deadline_of.insert(b, pop_time + invisible_ms);
        }
    }
    let mut h = hist();
    let mut back = 0u64;
    let give_up = Instant::now() + timeout + Duration::from_millis(invisible_ms as u64);
    while back < count && Instant::now() < give_up {
        let r = c.call(&pop_cmd(topic, group, 32, 600_000, 1_000))?;
        if r.code != response_code::SUCCESS {
            continue;
        }
        let now = ringmq::common::now_ms();
        for b in bodies(&r)? {
            if let Some(deadline) = deadline_of.remove(&b) {
                back += 1;
                let late_us = (now - deadline).max(0) as u64 * 1_000;
                h.record(late_us.max(1)).map_err(|e| e.to_string())?;
            }
        }
    }
    if back < count {
        return Err(format!(
            "only {back} of {count} un-acked messages came back"
        ));
    }
    Ok(h)
}
