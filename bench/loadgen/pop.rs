//! The POP consumer: POP_MESSAGE (200050) over every queue of the topic (queue id -1), each
//! answer acked with one BATCH_ACK_MESSAGE (200151) built from its info strings, as the gRPC
//! proxy acks; for the `pop` drain.
//!
//! Each connection keeps `inflight` pops outstanding and writes the ack of an answer before
//! re-issuing the pop; ack answers are read and counted as errors when not SUCCESS. Bodies are
//! walked in the reader's buffer and never copied. Called by main. Invariant: a pop waits at
//! most its poll time + timeout for its answer, or the run ends with a message.

use std::io::Write;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::BytesMut;
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::pop::{
    parse_msg_offset_info, parse_start_offset_info, BatchAck, BatchAckMessageRequestBody,
};
use ringmq::protocol::RemotingCommand;

use crate::record::for_each_record;
use crate::stats::{record_ns, Shared};
use crate::wire::{body_start, connect, decode_header, scan_header, FrameReader};

#[derive(Clone, Debug)]
pub struct PopPlan {
    pub broker: String,
    pub topic: String,
    pub group: String,
    pub connections: usize,
    pub inflight: usize,
    pub max_msgs: i32,
    pub poll_ms: i64,
    pub invisible_ms: i64,
    pub timeout: Duration,
}

/// Starts the consumer threads.
pub fn start(plan: &PopPlan, sh: &Arc<Shared>) -> Result<Vec<JoinHandle<()>>, String> {
    let mut handles = Vec::new();
    for c in 0..plan.connections.max(1) {
        let stream = connect(&plan.broker, plan.timeout)?;
        let writer = stream
            .try_clone()
            .map_err(|e| format!("clone socket: {e}"))?;
        let reader =
            FrameReader::new(stream, Duration::from_millis(50)).map_err(|e| e.to_string())?;
        let mut p = Popper {
            plan: plan.clone(),
            sh: sh.clone(),
            writer,
            pops: Vec::new(),
            out: BytesMut::with_capacity(1024),
        };
        let h = std::thread::Builder::new()
            .name(format!("pop-{c}"))
            .spawn(move || {
                if let Err(e) = p.run(reader) {
                    if !p.sh.stopped() {
                        p.sh.fail(e);
                    }
                }
            })
            .map_err(|e| format!("spawn: {e}"))?;
        handles.push(h);
    }
    Ok(handles)
}

struct Popper {
    plan: PopPlan,
    sh: Arc<Shared>,
    writer: crate::link::Link,
    /// (opaque, sent ns) of the pops outstanding.
    pops: Vec<(i32, u64)>,
    out: BytesMut,
}

impl Popper {
    fn write(&mut self, cmd: &RemotingCommand) -> Result<(), String> {
        self.out.clear();
        cmd.encode(&mut self.out)
            .map_err(|e| format!("encode: {e}"))?;
        self.writer
            .write_all(&self.out)
            .map_err(|e| format!("write to {} failed: {e}", self.plan.broker))
    }

    fn send_pop(&mut self) -> Result<(), String> {
        let now = ringmq::common::now_ms();
        let cmd = RemotingCommand::new_request(request_code::POP_MESSAGE)
            .with_ext("consumerGroup", &self.plan.group)
            .with_ext("topic", &self.plan.topic)
            .with_ext("queueId", -1)
            .with_ext("maxMsgNums", self.plan.max_msgs)
            .with_ext("invisibleTime", self.plan.invisible_ms)
            .with_ext("pollTime", self.plan.poll_ms)
            .with_ext("bornTime", now)
            .with_ext("initMode", 0)
            .with_ext("expType", "TAG")
            .with_ext("exp", "*");
        self.pops.push((cmd.opaque, self.sh.now_ns()));
        self.write(&cmd)
    }

    /// The batch ack of one pop answer.
    fn ack_of(&self, cmd: &RemotingCommand) -> Result<RemotingCommand, String> {
        let num = |k: &str| -> Result<i64, String> {
            cmd.ext(k)
                .and_then(|v| v.parse().ok())
                .ok_or(format!("pop answer without {k}"))
        };
        let (pop_time, invisible, revive) =
            (num("popTime")?, num("invisibleTime")?, num("reviveQid")?);
        let starts = parse_start_offset_info(cmd.ext("startOffsetInfo").unwrap_or(""))
            .map_err(|e| e.to_string())?;
        let offsets = parse_msg_offset_info(cmd.ext("msgOffsetInfo").unwrap_or(""))
            .map_err(|e| e.to_string())?;
        let acks = starts
            .iter()
            .zip(&offsets)
            .map(|(s, o)| BatchAck {
                consumer_group: self.plan.group.clone(),
                topic: self.plan.topic.clone(),
                retry: s.retry.as_str().to_string(),
                start_offset: s.value,
                queue_id: s.queue_id,
                revive_queue_id: revive as i32,
                pop_time,
                invisible_time: invisible,
                bit_set: BatchAck::bits_of(s.value, &o.value),
            })
            .collect();
        let body = BatchAckMessageRequestBody {
            broker_name: None,
            acks,
        };
        let json = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
        Ok(RemotingCommand::new_request(request_code::BATCH_ACK_MESSAGE).with_body(json))
    }

    fn run(&mut self, mut rd: FrameReader) -> Result<(), String> {
        let lat = self.sh.latency.part();
        let deadline_ns =
            (self.plan.poll_ms.max(0) as u64) * 1_000_000 + self.plan.timeout.as_nanos() as u64;
        for _ in 0..self.plan.inflight.max(1) {
            self.send_pop()?;
        }
        while !self.sh.stopped() {
            let Some(frame) = rd.next_frame()? else {
                let now = self.sh.now_ns();
                if self
                    .pops
                    .iter()
                    .any(|(_, at)| now.saturating_sub(*at) > deadline_ns)
                {
                    return Err(format!(
                        "a pop got no answer from {} in time",
                        self.plan.broker
                    ));
                }
                continue;
            };
            let h = scan_header(frame)?;
            if h.flag & 1 == 0 {
                continue;
            }
            let done = self.sh.now_ns();
            let Some(i) = self.pops.iter().position(|(o, _)| *o == h.opaque) else {
                // An ack's answer.
                if h.code != response_code::SUCCESS && self.sh.recording() {
                    self.sh
                        .record_err(h.code, done, || Some("batch ack refused".into()));
                }
                continue;
            };
            let (_, sent) = self.pops.swap_remove(i);
            match h.code {
                response_code::SUCCESS => {
                    let body = &frame[body_start(frame)?..];
                    let (mut n, mut bytes) = (0u64, 0u64);
                    for_each_record(body, |r| {
                        n += 1;
                        bytes += r.body.len() as u64;
                    })
                    .map_err(|e| format!("pop body: {e}"))?;
                    let cmd = decode_header(frame)?;
                    let ack = self.ack_of(&cmd)?;
                    self.write(&ack)?;
                    if self.sh.recording() {
                        self.sh.record_ok(n, bytes, done);
                        record_ns(&lat, done.saturating_sub(sent));
                    }
                }
                response_code::POLLING_TIMEOUT | response_code::NO_MESSAGE => {}
                code => {
                    let cmd = decode_header(frame)?;
                    if self.sh.recording() {
                        self.sh.record_err(code, done, || cmd.remark.clone());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            self.send_pop()?;
        }
        Ok(())
    }
}
