//! The producer side: `send` (SEND_MESSAGE_V2), `batch` (SEND_BATCH_MESSAGE) and `oneway`,
//! closed-loop with K requests in flight per connection or paced at a fixed rate.
//!
//! Per connection one writer thread and one reader thread share a table of K slots: the writer
//! takes a free slot from a channel (that channel is the in-flight window), stamps the slot with
//! the send time (the intended time when paced) and writes a pre-built request whose opaque
//! encodes the slot; the reader matches each response by opaque, records the latency and hands
//! the slot back. Writers coalesce requests that are ready together into one write.
//! Called by main (also for the pull prefill and the e2e producer). Invariants: at most K
//! requests are outstanding per connection; a slot is reused only after its response (or the
//! end of the run); every blocking call is bounded (channel and socket timeouts), and a broker
//! that stops answering for `timeout` ends the run with a message.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};

use crate::pacer::{corrected_latency, Pacer};
use crate::stats::{record_ns, Shared};
use crate::template::{uniq_prefix, SendKind, Template, TemplateSpec, OPAQUE_BASE, OPAQUE_SPAN};
use crate::wire::{connect, decode_header, scan_header, FrameReader};

/// Requests ready at the same time are written together up to this many bytes.
const COALESCE_BYTES: usize = 64 * 1024;
/// How often blocked threads look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

#[derive(Clone, Debug)]
pub struct SendPlan {
    pub broker: String,
    pub spec: TemplateSpec,
    pub queues: u32,
    pub connections: usize,
    pub inflight: usize,
    /// Total messages per second over all connections (fixed-rate mode).
    pub rate: Option<f64>,
    /// e2e: stamp bodies with the intended send time and this run nonce.
    pub stamp_nonce: Option<u64>,
    pub timeout: Duration,
}

struct Slot {
    opaque: AtomicI32,
    /// Latency origin: the intended send time when paced, else the send time.
    origin_ns: AtomicU64,
    sent_ns: AtomicU64,
}

struct ConnState {
    slots: Vec<Slot>,
    mask: u32,
    bits: u32,
    outstanding: AtomicU64,
    writer_done: AtomicBool,
    last_progress_ns: AtomicU64,
}

/// Connects every connection and starts its threads; returns their handles.
pub fn start(plan: &SendPlan, sh: &Arc<Shared>) -> Result<Vec<JoinHandle<()>>, String> {
    let born_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let salt = (sh.base.elapsed().as_nanos() as u32) ^ (born_ms as u32);
    let mut handles = Vec::new();
    for c in 0..plan.connections {
        let stream = connect(&plan.broker, plan.timeout)?;
        stream
            .set_write_timeout(Some(plan.timeout))
            .map_err(|e| format!("set write timeout: {e}"))?;
        let mut spec = plan.spec.clone();
        spec.uniq_prefix = uniq_prefix(c, salt);
        let templates = (0..plan.queues)
            .map(|q| Template::build(&spec, q as i32, born_ms))
            .collect::<Result<Vec<_>, _>>()?;
        // Each connection carries rate/C, offset so the merged schedule is evenly spaced.
        let pace = plan
            .rate
            .map(|r| (r / plan.connections as f64, (1e9 / r * c as f64) as u64));
        let pacer = pace.map(|(rate, offset)| Pacer::new(rate, sh.now_ns() + offset));
        let w = Writer {
            stream: stream
                .try_clone()
                .map_err(|e| format!("clone socket: {e}"))?,
            templates,
            next_template: c % plan.queues.max(1) as usize,
            pacer,
            pace,
            rebased: false,
            sh: sh.clone(),
            plan: plan.clone(),
            out: Vec::with_capacity(COALESCE_BYTES * 2),
            uniq: 0,
        };
        if plan.spec.kind == SendKind::Oneway {
            handles.push(spawn(format!("oneway-{c}"), move || w.run_oneway())?);
            // Oneway gets no responses; the read half only notices a closed connection.
            drop(stream);
            continue;
        }
        let nslots = plan.inflight.max(1).next_power_of_two();
        let st = Arc::new(ConnState {
            slots: (0..nslots)
                .map(|_| Slot {
                    opaque: AtomicI32::new(0),
                    origin_ns: AtomicU64::new(0),
                    sent_ns: AtomicU64::new(0),
                })
                .collect(),
            mask: nslots as u32 - 1,
            bits: nslots.trailing_zeros(),
            outstanding: AtomicU64::new(0),
            writer_done: AtomicBool::new(false),
            last_progress_ns: AtomicU64::new(sh.now_ns()),
        });
        let (free_tx, free_rx) = bounded(nslots);
        for s in 0..plan.inflight.max(1) {
            free_tx.send(s as u32).expect("channel has room");
        }
        let reader = FrameReader::new(stream, POLL).map_err(|e| e.to_string())?;
        if plan.inflight == 1 && plan.rate.is_none() {
            // One request at a time: the same thread writes and reads, as a blocking sync
            // client would, so no cross-thread wake-up is added to every round trip.
            handles.push(spawn(format!("send-{c}"), move || w.run_sync(reader))?);
            continue;
        }
        let (st2, sh2, plan2) = (st.clone(), sh.clone(), plan.clone());
        handles.push(spawn(format!("send-w{c}"), move || w.run(st, free_rx))?);
        handles.push(spawn(format!("send-r{c}"), move || {
            read_loop(reader, st2, free_tx, sh2, plan2)
        })?);
    }
    Ok(handles)
}

fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, String> {
    std::thread::Builder::new()
        .name(name)
        .spawn(f)
        .map_err(|e| format!("spawn thread: {e}"))
}

/// Lets sleeps end within a few µs of their deadline instead of the default 50 µs slack.
fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack; no pointers involved.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0);
    }
}

struct Writer {
    stream: crate::link::Link,
    templates: Vec<Template>,
    next_template: usize,
    pacer: Option<Pacer>,
    /// (msg/s of this connection, offset of its schedule in ns).
    pace: Option<(f64, u64)>,
    /// The schedule was restarted at the start of recording.
    rebased: bool,
    sh: Arc<Shared>,
    plan: SendPlan,
    out: Vec<u8>,
    uniq: u64,
}

impl Writer {
    /// Paced: sleeps until the next intended time. Returns false if the caller should re-check
    /// the stop flag before sending.
    fn wait_turn(&mut self) -> bool {
        if !self.rebased && self.sh.recording() {
            // Restart the schedule when measuring starts: messages an overloaded broker
            // could not take during the warm-up are dropped, not charged to the measured run.
            self.rebased = true;
            if let Some((rate, offset)) = self.pace {
                let start = self.sh.record_start_ns.load(Relaxed);
                self.pacer = Some(Pacer::new(rate, start + offset));
            }
        }
        let Some(p) = &self.pacer else { return true };
        let now = self.sh.now_ns();
        let t = p.peek();
        if t <= now {
            return true;
        }
        std::thread::sleep(Duration::from_nanos(t - now).min(POLL));
        false
    }

    /// Patches the next template and appends it to the output buffer; returns the latency
    /// origin (intended or actual send time) and the send time.
    fn stage(&mut self, opaque: i32) -> (u64, u64) {
        let intended = self.pacer.as_mut().map(|p| p.take());
        let now = self.sh.now_ns();
        let origin = intended.unwrap_or(now);
        let n = self.templates.len();
        let t = &mut self.templates[self.next_template];
        self.next_template = (self.next_template + 1) % n;
        t.set_opaque(opaque);
        t.set_uniq(self.uniq);
        self.uniq += self.plan.spec.kind.msgs_per_request() as u64;
        if let Some(nonce) = self.plan.stamp_nonce {
            t.set_stamp(origin, nonce);
        }
        self.out.extend_from_slice(&t.bytes);
        (origin, now)
    }

    /// True when the pacer says the next message is not due yet.
    fn not_due(&self) -> bool {
        self.pacer
            .as_ref()
            .is_some_and(|p| p.peek() > self.sh.now_ns())
    }

    fn write_out(&mut self) -> bool {
        if self.out.is_empty() {
            return true;
        }
        if let Err(e) = self.stream.write_all(&self.out) {
            if !self.sh.stopped() {
                self.sh
                    .fail(format!("write to {} failed: {e}", self.plan.broker));
            }
            return false;
        }
        self.out.clear();
        true
    }

    fn run(mut self, st: Arc<ConnState>, free: Receiver<u32>) {
        if self.pacer.is_some() {
            tighten_timer_slack();
        }
        let msgs = self.plan.spec.kind.msgs_per_request() as u64;
        let lag = self.pacer.is_some().then(|| self.sh.lag.part());
        let mut gens = vec![0u32; st.slots.len()];
        let mut budget_left = true;
        while budget_left && !self.sh.stopped() {
            if !self.wait_turn() {
                continue;
            }
            let mut next = match free.recv_timeout(POLL) {
                Ok(s) => Some(s),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            while let Some(slot) = next.take() {
                if !self.sh.take_budget(msgs) {
                    budget_left = false;
                    break;
                }
                let s = slot as usize;
                gens[s] = gens[s].wrapping_add(1);
                let seq = ((gens[s] << st.bits) | slot) & (OPAQUE_SPAN - 1);
                let opaque = OPAQUE_BASE + seq as i32;
                let (origin, sent) = self.stage(opaque);
                if let Some(l) = lag.as_ref().filter(|_| self.sh.measures(origin)) {
                    record_ns(l, sent.saturating_sub(origin));
                }
                let sl = &st.slots[s];
                sl.origin_ns.store(origin, Relaxed);
                sl.sent_ns.store(sent, Relaxed);
                sl.opaque.store(opaque, Relaxed);
                if st.outstanding.fetch_add(1, Relaxed) == 0 {
                    st.last_progress_ns.store(sent, Relaxed);
                }
                if self.out.len() >= COALESCE_BYTES || self.not_due() {
                    break;
                }
                next = free.try_recv().ok();
            }
            if !self.write_out() {
                break;
            }
        }
        st.writer_done.store(true, Relaxed);
    }

    /// Window of one without pacing: write, wait for the matching response, repeat.
    fn run_sync(mut self, mut rd: FrameReader) {
        let lat = self.sh.latency.part();
        let msgs = self.plan.spec.kind.msgs_per_request() as u64;
        let bytes = msgs * self.plan.spec.body_size as u64;
        let mut seq = 0u32;
        while !self.sh.stopped() && self.sh.take_budget(msgs) {
            seq = (seq + 1) & (OPAQUE_SPAN - 1);
            let opaque = OPAQUE_BASE + seq as i32;
            let (origin, _) = self.stage(opaque);
            if !self.write_out() {
                return;
            }
            let (code, remark) = loop {
                match rd.next_frame() {
                    Ok(Some(frame)) => match scan_header(frame) {
                        Ok(h) if h.flag & 1 != 0 && h.opaque == opaque => {
                            let remark = (h.code != 0)
                                .then(|| decode_header(frame).ok()?.remark)
                                .flatten();
                            break (h.code, remark);
                        }
                        Ok(_) => {}
                        Err(e) => return self.sh.fail(format!("{}: {e}", self.plan.broker)),
                    },
                    Ok(None) => {
                        let waited = self.sh.now_ns().saturating_sub(origin);
                        if waited > self.plan.timeout.as_nanos() as u64 {
                            return self.sh.fail(format!(
                                "no response from {} for {:?}",
                                self.plan.broker, self.plan.timeout
                            ));
                        }
                    }
                    Err(e) => return self.sh.fail(format!("{}: {e}", self.plan.broker)),
                }
            };
            let done = self.sh.now_ns();
            if self.sh.measures(origin) {
                record_ns(&lat, done - origin);
                if code == 0 {
                    self.sh.record_ok(msgs, bytes, done);
                } else {
                    self.sh.record_err(code, done, || remark);
                }
            }
        }
    }

    fn run_oneway(mut self) {
        if self.pacer.is_some() {
            tighten_timer_slack();
        }
        let mut counter = 0u32;
        let size = self.plan.spec.body_size as u64;
        'outer: while !self.sh.stopped() {
            if !self.wait_turn() {
                continue;
            }
            let mut n = 0u64;
            loop {
                if !self.sh.take_budget(1) {
                    self.flush_oneway(n, size);
                    break 'outer;
                }
                counter = (counter + 1) & (OPAQUE_SPAN - 1);
                self.stage(OPAQUE_BASE + counter as i32);
                n += 1;
                if self.out.len() >= COALESCE_BYTES || self.not_due() {
                    break;
                }
            }
            if !self.flush_oneway(n, size) {
                break;
            }
        }
    }

    fn flush_oneway(&mut self, n: u64, size: u64) -> bool {
        let recording = self.sh.recording();
        if !self.write_out() {
            return false;
        }
        if recording && n > 0 {
            self.sh.record_ok(n, n * size, self.sh.now_ns());
        }
        true
    }
}

fn read_loop(
    mut rd: FrameReader,
    st: Arc<ConnState>,
    free: Sender<u32>,
    sh: Arc<Shared>,
    plan: SendPlan,
) {
    let lat = sh.latency.part();
    let service = plan.rate.is_some().then(|| sh.service.part());
    let msgs = plan.spec.kind.msgs_per_request() as u64;
    let bytes = msgs * plan.spec.body_size as u64;
    let timeout_ns = plan.timeout.as_nanos() as u64;
    loop {
        match rd.next_frame() {
            Ok(Some(frame)) => {
                let h = match scan_header(frame) {
                    Ok(h) => h,
                    Err(e) => {
                        sh.fail(format!("{}: {e}", plan.broker));
                        break;
                    }
                };
                // Requests from the broker (none expected) and unknown opaques are skipped.
                if h.flag & 1 == 0 || h.opaque < OPAQUE_BASE {
                    continue;
                }
                let idx = ((h.opaque - OPAQUE_BASE) as u32 & st.mask) as usize;
                let sl = &st.slots[idx];
                if sl.opaque.load(Relaxed) != h.opaque {
                    continue;
                }
                sl.opaque.store(0, Relaxed);
                let done = sh.now_ns();
                let origin = sl.origin_ns.load(Relaxed);
                if sh.measures(origin) {
                    record_ns(&lat, corrected_latency(origin, done));
                    if let Some(s) = &service {
                        record_ns(s, done.saturating_sub(sl.sent_ns.load(Relaxed)));
                    }
                    if h.code == 0 {
                        sh.record_ok(msgs, bytes, done);
                    } else {
                        sh.record_err(h.code, done, || decode_header(frame).ok()?.remark);
                    }
                }
                st.last_progress_ns.store(done, Relaxed);
                st.outstanding.fetch_sub(1, Relaxed);
                let _ = free.send(idx as u32);
            }
            Ok(None) => {}
            Err(e) => {
                let drained = st.writer_done.load(Relaxed) && st.outstanding.load(Relaxed) == 0;
                if !drained && !sh.stopped() {
                    sh.fail(format!("{}: {e}", plan.broker));
                }
                break;
            }
        }
        let outstanding = st.outstanding.load(Relaxed);
        if st.writer_done.load(Relaxed) && outstanding == 0 {
            break;
        }
        if sh.failure_flag() {
            break;
        }
        let idle = sh
            .now_ns()
            .saturating_sub(st.last_progress_ns.load(Relaxed));
        if outstanding > 0 && idle > timeout_ns {
            sh.fail(format!(
                "no response from {} for {:?} with {outstanding} requests outstanding",
                plan.broker, plan.timeout
            ));
            break;
        }
    }
}
