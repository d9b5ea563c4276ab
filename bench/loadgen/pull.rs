//! The consumer side: PULL_MESSAGE (11) with long polling over every queue of the topic, for
//! the `pull` drain and the consumer half of `e2e`.
//!
//! Each connection owns a subset of the queues (queue q goes to connection q % C) and keeps
//! exactly one pull outstanding per queue, re-issuing at `nextBeginOffset` as each response
//! arrives; one thread per connection does both writing (small requests) and reading. Bodies
//! are walked in the reader's buffer and never copied. Called by main. Invariants: a pull
//! waits at most suspend + timeout for its response, or the run ends with a message; the
//! subscription travels in the request (SUBSCRIPTION flag), so no heartbeat is needed.

use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::BytesMut;
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::headers::{pull_sys_flag, PullMessageRequestHeader};
use ringmq::protocol::RemotingCommand;

use crate::record::for_each_record;
use crate::stats::{record_ns, Shared};
use crate::wire::{body_start, connect, decode_header, scan_header, FrameReader};

/// Consecutive failed pulls on one queue before the run gives up.
const MAX_CONSECUTIVE_ERRORS: u32 = 50;

#[derive(Clone, Debug)]
pub struct PullPlan {
    pub broker: String,
    pub topic: String,
    pub group: String,
    pub connections: usize,
    pub max_msgs: i32,
    pub suspend_ms: i64,
    pub timeout: Duration,
    /// e2e: bodies carry (stamp, nonce); record stamp-to-receipt latency for this nonce.
    pub e2e_nonce: Option<u64>,
}

struct QueueState {
    queue_id: i32,
    offset: i64,
    opaque: i32,
    sent_ns: u64,
    errors: u32,
}

/// Starts the consumer threads; `start_offsets[q]` is where queue q is read from.
pub fn start(
    plan: &PullPlan,
    start_offsets: &[i64],
    sh: &Arc<Shared>,
) -> Result<Vec<JoinHandle<()>>, String> {
    let conns = plan.connections.clamp(1, start_offsets.len().max(1));
    let mut handles = Vec::new();
    for c in 0..conns {
        let queues: Vec<QueueState> = start_offsets
            .iter()
            .enumerate()
            .filter(|(q, _)| q % conns == c)
            .map(|(q, off)| QueueState {
                queue_id: q as i32,
                offset: *off,
                opaque: 0,
                sent_ns: 0,
                errors: 0,
            })
            .collect();
        let stream = connect(&plan.broker, plan.timeout)?;
        stream
            .set_write_timeout(Some(plan.timeout))
            .map_err(|e| e.to_string())?;
        let writer = stream
            .try_clone()
            .map_err(|e| format!("clone socket: {e}"))?;
        let reader =
            FrameReader::new(stream, Duration::from_millis(50)).map_err(|e| e.to_string())?;
        let mut consumer = Consumer {
            plan: plan.clone(),
            sh: sh.clone(),
            writer,
            queues,
            out: BytesMut::with_capacity(1024),
        };
        let h = std::thread::Builder::new()
            .name(format!("pull-{c}"))
            .spawn(move || consumer.run(reader))
            .map_err(|e| format!("spawn: {e}"))?;
        handles.push(h);
    }
    Ok(handles)
}

struct Consumer {
    plan: PullPlan,
    sh: Arc<Shared>,
    writer: crate::link::Link,
    queues: Vec<QueueState>,
    out: BytesMut,
}

impl Consumer {
    fn send_pull(&mut self, qi: usize) -> Result<(), String> {
        let q = &mut self.queues[qi];
        let mut req = RemotingCommand::new_request(request_code::PULL_MESSAGE);
        PullMessageRequestHeader {
            consumer_group: self.plan.group.clone(),
            topic: self.plan.topic.clone(),
            queue_id: q.queue_id,
            queue_offset: q.offset,
            max_msg_nums: self.plan.max_msgs,
            sys_flag: pull_sys_flag::SUSPEND | pull_sys_flag::SUBSCRIPTION,
            commit_offset: 0,
            suspend_timeout_millis: self.plan.suspend_ms,
            subscription: Some("*".to_owned()),
            sub_version: 0,
            expression_type: Some("TAG".to_owned()),
            max_msg_bytes: None,
        }
        .write_to(&mut req);
        q.opaque = req.opaque;
        q.sent_ns = self.sh.now_ns();
        self.out.clear();
        req.encode(&mut self.out)
            .map_err(|e| format!("encode pull: {e}"))?;
        self.writer
            .write_all(&self.out)
            .map_err(|e| format!("write to {} failed: {e}", self.plan.broker))
    }

    fn run(&mut self, mut rd: FrameReader) {
        if let Err(e) = self.run_inner(&mut rd) {
            if !self.sh.stopped() {
                self.sh.fail(e);
            }
        }
    }

    fn run_inner(&mut self, rd: &mut FrameReader) -> Result<(), String> {
        let lat = self.sh.latency.part();
        let deadline_ns =
            (self.plan.suspend_ms.max(0) as u64) * 1_000_000 + self.plan.timeout.as_nanos() as u64;
        for qi in 0..self.queues.len() {
            self.send_pull(qi)?;
        }
        while !self.sh.stopped() {
            let Some(frame) = rd.next_frame()? else {
                let now = self.sh.now_ns();
                if let Some(q) = self
                    .queues
                    .iter()
                    .find(|q| now.saturating_sub(q.sent_ns) > deadline_ns)
                {
                    return Err(format!(
                        "pull of queue {} got no response from {} within suspend + {:?}",
                        q.queue_id, self.plan.broker, self.plan.timeout
                    ));
                }
                continue;
            };
            let h = scan_header(frame)?;
            if h.flag & 1 == 0 {
                continue;
            }
            let Some(qi) = self.queues.iter().position(|q| q.opaque == h.opaque) else {
                continue;
            };
            let done = self.sh.now_ns();
            let recording = self.sh.recording();
            let cmd = decode_header(frame)?;
            let next = cmd
                .ext("nextBeginOffset")
                .and_then(|v| v.parse::<i64>().ok());
            match h.code {
                response_code::SUCCESS => {
                    let body = &frame[body_start(frame)?..];
                    let nonce = self.plan.e2e_nonce;
                    let (mut foreign, sh) = (0u64, &self.sh);
                    let (mut n, mut bytes) = (0u64, 0u64);
                    for_each_record(body, |r| {
                        let Some(nonce) = nonce else {
                            n += 1;
                            bytes += r.body.len() as u64;
                            return;
                        };
                        // e2e: count only our messages stamped inside the measured window.
                        match r.body.get(..16) {
                            Some(b) if b[8..16] == nonce.to_be_bytes() => {
                                let mut stamp = [0u8; 8];
                                stamp.copy_from_slice(&b[..8]);
                                let stamp = u64::from_be_bytes(stamp);
                                if sh.measures(stamp) {
                                    record_ns(&lat, done.saturating_sub(stamp));
                                    n += 1;
                                    bytes += r.body.len() as u64;
                                }
                            }
                            _ => foreign += 1,
                        }
                    })
                    .map_err(|e| format!("pull body of queue {}: {e}", self.queues[qi].queue_id))?;
                    if recording {
                        sh.record_ok(n, bytes, done);
                        sh.foreign_msgs.fetch_add(foreign, Relaxed);
                        if nonce.is_none() {
                            record_ns(&lat, done.saturating_sub(self.queues[qi].sent_ns));
                        }
                    }
                    let q = &mut self.queues[qi];
                    q.errors = 0;
                    q.offset = next.ok_or("pull response without nextBeginOffset")?;
                }
                response_code::PULL_NOT_FOUND
                | response_code::PULL_RETRY_IMMEDIATELY
                | response_code::PULL_OFFSET_MOVED => {
                    let q = &mut self.queues[qi];
                    q.errors = 0;
                    if let Some(n) = next {
                        q.offset = n;
                    }
                }
                code => {
                    if recording {
                        self.sh.record_err(code, done, || cmd.remark.clone());
                    }
                    let q = &mut self.queues[qi];
                    q.errors += 1;
                    if q.errors >= MAX_CONSECUTIVE_ERRORS {
                        return Err(format!(
                            "pull of {}/{} failed {} times, last code {code} {}",
                            self.plan.topic,
                            q.queue_id,
                            q.errors,
                            cmd.remark.unwrap_or_default()
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            self.send_pull(qi)?;
        }
        Ok(())
    }
}
