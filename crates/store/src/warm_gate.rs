//! The disk's idle windows under group commit, for the background warming of the next segment.
//!
//! A SYNC_FLUSH round keeps the disk busy with the batch's writes and the fdatasync, then idle
//! while the replies go out, the producers send again and the writer writes the next batch.
//! Warming zeros written at a steady pace land anywhere in that cycle, and on this VM's disk a
//! commit write queued behind a 1 MiB zero write waits for all of it (`perf` block trace: a
//! round's flush issued ~1 ms late behind one); with the background warming at its
//! pace the SYNC bench did 7-18 % fewer appends than with it held back (1.08x in the last
//! alternated set, 1.14-1.22x while tuning). So while group commits
//! run, the warming writes one chunk, about the size of the round, right after each round
//! completes, into the idle part of the cycle, and only paces itself by time when no round
//! completed lately.
//!
//! Unless the rounds keep the disk busy (`disk_saturated`): then the gap after a round is
//! shorter than a chunk of zeros takes, and every chunk delays the next round. Under sustained
//! load that warming buys nothing: zeros written into new space cost what appends written there
//! directly cost, so either way each new byte is paid once at that price, and warming would
//! only make the burst pay for the next segment while it still fills a warm one. So it holds
//! back while the disk is saturated and catches up in the windows and idle time that follow.
//!
//! Shared by the writer's group commits (`sync_started`, `round_done`: the only writer of the
//! round fields) and the "ringmq-prealloc" thread (the only reader that waits); plain atomics
//! and an unpark, no lock, so the group commit never waits on the warming.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Group commits count as running while one is syncing or the last one completed this
/// recently; after that the warming paces itself by time again (nothing to stay out of the way
/// of). Well above a round: on a slow disk the time from one round's completion to the next
/// one's sync was 4-10 ms at times, and with 2 ms here the warming took those gaps for the end
/// of the load and sent 1 MiB writes in front of the next flushes.
pub const ROUNDS_RUNNING_WITHIN: Duration = Duration::from_millis(20);
/// Zeros written in one idle window at least. Small windows keep the next round's writes from
/// queueing behind the zeros: in the SYNC bench (64 KiB rounds) a 64 KiB chunk per round did
/// 1.14-1.22x the appends of the time-paced 1 MiB writes, 128 KiB chunks only 1.03-1.13x, and
/// twice the round's bytes 1.10x.
pub const WINDOW_CHUNK_MIN: usize = 64 << 10;
/// The share of time spent in the rounds' fdatasyncs (millionths) from which the disk counts as
/// saturated. A chunk of zeros into new space takes about as long as a round's sync over
/// written blocks, and a chunk is a quarter more than the round: it fits in the gap after a
/// round only while the syncs take less than 1 / 2.25 of the time; 0.4 leaves a margin.
pub const SATURATED_BUSY_PPM: u64 = 400_000;
/// Weight of the newest round in the busy share (1 / this): a few dozen rounds, a few
/// milliseconds under load, to follow a change.
const BUSY_EWMA_DIV: u64 = 8;

#[derive(Debug)]
pub struct WarmGate {
    /// Group commits completed.
    rounds: AtomicU64,
    /// When the last one completed (us since `epoch`; 0: none yet).
    last_round_us: AtomicU64,
    /// Commit-log bytes the last round made durable.
    last_round_bytes: AtomicU64,
    /// Moving average of each round's fdatasync time over the time since the round before
    /// (millionths): the disk's busy share under group commit.
    busy_ppm: AtomicU64,
    /// Whether a round's fdatasync is in flight: the rounds are running however long it takes.
    /// Judged by completions alone, rounds on a slow disk looked stopped while their syncs were
    /// still waiting, and the warming went back to its time pace, 1 MiB writes queued in front
    /// of the flushes (a block trace of a fresh store's SYNC bench at ~1 ms per fdatasync, with
    /// the 2 ms window of then: the next segment warmed at ~116 MiB/s while the rounds' syncs
    /// held 77 % of the time).
    syncing: AtomicBool,
    epoch: Instant,
    /// The warming thread, woken after a round while it waits for one (`wait_round`). Not
    /// otherwise: between segments it sleeps in the allocator's channel, and a wake per round
    /// there would be a futex wake-up and a context switch per round for nothing.
    warmer: OnceLock<Thread>,
    waiting: AtomicBool,
}

impl Default for WarmGate {
    fn default() -> Self {
        WarmGate {
            rounds: AtomicU64::new(0),
            last_round_us: AtomicU64::new(0),
            last_round_bytes: AtomicU64::new(0),
            busy_ppm: AtomicU64::new(0),
            syncing: AtomicBool::new(false),
            epoch: Instant::now(),
            warmer: OnceLock::new(),
            waiting: AtomicBool::new(false),
        }
    }
}

impl WarmGate {
    /// Names the thread `round_done` wakes (the allocator's, once).
    pub fn set_warmer(&self, t: Thread) {
        let _already = self.warmer.set(t);
    }

    /// A group commit starts its fdatasync: rounds are running until `round_done` (or
    /// `sync_abandoned`) however long it takes.
    pub fn sync_started(&self) {
        self.syncing.store(true, Ordering::Relaxed);
    }

    /// The fdatasync `sync_started` announced failed: no round completes (the store refuses
    /// appends from now on), so nothing is in flight any more.
    pub fn sync_abandoned(&self) {
        self.syncing.store(false, Ordering::Relaxed);
    }

    /// A group commit covering `bytes` completed, its fdatasync having taken `synced`: the disk
    /// is idle until the next batch. Called by one thread only (the group commit's), so the
    /// read-modify-writes below need no atomic update.
    pub fn round_done(&self, bytes: u64, synced: Duration) {
        self.last_round_bytes.store(bytes, Ordering::Relaxed);
        let now = self.now_us().max(1);
        let prev = self.last_round_us.swap(now, Ordering::Relaxed);
        // After `last_round_us`: a reader between the two still sees the rounds running.
        self.syncing.store(false, Ordering::Relaxed);
        if prev != 0 {
            let cycle = now.saturating_sub(prev).max(1);
            let sample =
                ((synced.as_micros() as u64).saturating_mul(1_000_000) / cycle).min(1_000_000);
            let old = self.busy_ppm.load(Ordering::Relaxed);
            let new = old - old / BUSY_EWMA_DIV + sample / BUSY_EWMA_DIV;
            self.busy_ppm.store(new, Ordering::Relaxed);
        }
        // SeqCst with `wait_round`'s: either it sees this round, or this sees it waiting.
        self.rounds.fetch_add(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            if let Some(t) = self.warmer.get() {
                t.unpark();
            }
        }
    }

    /// On the warming thread: waits (at most `timeout`, or until unparked for another reason)
    /// for a round after `seen`.
    pub fn wait_round(&self, seen: u64, timeout: Duration) {
        self.waiting.store(true, Ordering::SeqCst);
        if self.rounds.load(Ordering::SeqCst) == seen {
            std::thread::park_timeout(timeout);
        }
        self.waiting.store(false, Ordering::SeqCst);
    }

    /// Rounds completed so far.
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Acquire)
    }

    /// Whether group commits are running: one is syncing, or one completed within
    /// ROUNDS_RUNNING_WITHIN.
    pub fn rounds_running(&self) -> bool {
        if self.syncing.load(Ordering::Relaxed) {
            return true;
        }
        let last = self.last_round_us.load(Ordering::Relaxed);
        last != 0 && self.now_us().saturating_sub(last) < ROUNDS_RUNNING_WITHIN.as_micros() as u64
    }

    /// Whether the rounds keep the disk so busy that warming between them only delays them
    /// (see the module doc): their fdatasyncs take SATURATED_BUSY_PPM of the time or more.
    pub fn disk_saturated(&self) -> bool {
        self.busy_ppm.load(Ordering::Relaxed) >= SATURATED_BUSY_PPM
    }

    /// Zeros to write in this window: a quarter more than the last round made durable (the
    /// next segment's warming starts when this one is taken, so it stays ahead of the appends
    /// filling this one), at least WINDOW_CHUNK_MIN, at most `max`, in whole `align`s.
    pub fn window_chunk(&self, max: usize, align: usize) -> usize {
        let round =
            usize::try_from(self.last_round_bytes.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
        let len = round
            .saturating_add(round / 4)
            .clamp(WINDOW_CHUNK_MIN.min(max), max);
        (len / align * align).max(align.min(max))
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rounds are counted and mark the gate running; the window's chunk follows the last round.
    #[test]
    fn rounds_drive_the_window() {
        let g = WarmGate::default();
        assert!(!g.rounds_running(), "no round yet");
        assert_eq!(g.rounds(), 0);
        g.round_done(16 << 10, Duration::ZERO);
        assert_eq!(g.rounds(), 1);
        assert!(g.rounds_running());
        assert_eq!(
            g.window_chunk(1 << 20, 4096),
            64 << 10,
            "at least the minimum"
        );
        g.round_done(400 << 10, Duration::ZERO);
        assert_eq!(
            g.window_chunk(1 << 20, 4096),
            500 << 10,
            "the last round and a quarter"
        );
        g.round_done(10 << 20, Duration::ZERO);
        assert_eq!(g.window_chunk(1 << 20, 4096), 1 << 20, "at most max");
        g.round_done(100_001, Duration::ZERO);
        assert_eq!(
            g.window_chunk(1 << 20, 4096) % 4096,
            0,
            "whole aligned blocks"
        );
    }

    /// The busy share follows the rounds' fdatasync time over their spacing: rounds that sync
    /// all the time saturate the disk, rounds that sync a tenth of it or nothing do not.
    #[test]
    fn busy_share_marks_saturation() {
        let g = WarmGate::default();
        assert!(!g.disk_saturated(), "no round yet");
        for _ in 0..30 {
            // A sync longer than the time since the last round: a share of 1 (clamped).
            g.round_done(64 << 10, Duration::from_secs(1));
        }
        assert!(g.disk_saturated(), "back-to-back syncs");
        for _ in 0..30 {
            std::thread::sleep(Duration::from_millis(10));
            g.round_done(64 << 10, Duration::from_millis(1));
        }
        assert!(!g.disk_saturated(), "syncs a tenth of the time at most");
        for _ in 0..30 {
            g.round_done(64 << 10, Duration::from_secs(1));
        }
        assert!(g.disk_saturated(), "saturated again");
        for _ in 0..30 {
            g.round_done(64 << 10, Duration::ZERO);
        }
        assert!(!g.disk_saturated(), "rounds without sync time");
    }

    /// A round whose sync takes longer than ROUNDS_RUNNING_WITHIN still counts as running until
    /// it completes; an abandoned one stops counting.
    #[test]
    fn a_sync_in_flight_keeps_rounds_running() {
        let g = WarmGate::default();
        let past = ROUNDS_RUNNING_WITHIN + Duration::from_millis(1);
        g.round_done(64 << 10, Duration::ZERO);
        std::thread::sleep(past);
        assert!(!g.rounds_running(), "the last round is too long ago");
        g.sync_started();
        std::thread::sleep(past);
        assert!(g.rounds_running(), "a sync in flight");
        g.round_done(64 << 10, past);
        assert!(g.rounds_running(), "a round just completed");
        std::thread::sleep(past);
        assert!(!g.rounds_running(), "stopped after the round");
        g.sync_started();
        assert!(g.rounds_running());
        g.sync_abandoned();
        assert!(!g.rounds_running(), "the failed sync is not in flight");
    }

    /// A round wakes the warmer waiting for one: a wait with a long timeout returns at once.
    #[test]
    fn round_done_wakes_a_waiting_warmer() {
        let g = std::sync::Arc::new(WarmGate::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let g2 = g.clone();
        let h = std::thread::spawn(move || {
            let before = g2.rounds();
            tx.send(()).unwrap();
            let t = Instant::now();
            while g2.rounds() == before {
                g2.wait_round(before, Duration::from_secs(10));
            }
            t.elapsed()
        });
        g.set_warmer(h.thread().clone());
        rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20)); // most likely waiting by now
        g.round_done(1, Duration::ZERO);
        let waited = h.join().unwrap();
        assert!(
            waited < Duration::from_secs(5),
            "woken by the round, not the timeout"
        );
    }

    /// A warmer not waiting for a round is not woken by one (it may be asleep elsewhere).
    #[test]
    fn round_done_leaves_a_warmer_that_is_not_waiting() {
        let g = WarmGate::default();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            tx.send(()).unwrap();
            let t = Instant::now();
            std::thread::park_timeout(Duration::from_millis(300));
            t.elapsed()
        });
        g.set_warmer(h.thread().clone());
        rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..10 {
            g.round_done(1, Duration::ZERO);
        }
        let slept = h.join().unwrap();
        assert!(slept >= Duration::from_millis(250), "woken after {slept:?}");
    }
}
