//! The "ringmq-clean" thread (`Role::CleanFiles`, left to the scheduler): unlinks the files retention took out of the store, one at a
//! time, pausing `deleteCommitLogFilesInterval` between two deletions (RocketMQ's
//! `deleteFilesInterval`). Unlinking a 1 GiB segment on ext4 frees its extents synchronously and
//! can take many milliseconds, and so can the munmap of its mapping; on the writer thread that
//! stalled every append behind it.
//!
//! The writer detaches files (`CommitLog::detach_oldest_segment`, `IndexService::detach_expired`)
//! and hands them over with `submit`, which never blocks: the queue is bounded and retention
//! asks `has_room` before it detaches anything, so a full queue leaves the segment in the commit
//! log for the next pass. `queued_bytes` lets retention count a segment waiting here as already
//! freed, so a pass under disk pressure does not detach more than it needs while usage has not
//! dropped yet.
//!
//! Invariants: commit-log segments are unlinked in the order they were detached, which is
//! oldest first, and the directory is fsynced after each unlink, so whatever a crash interrupts,
//! the segments left on disk stay contiguous and the next start loads them (its retention deletes
//! them again). After a failed unlink no later segment is unlinked (that would leave a hole) and
//! `has_room` turns false. The thread logs errors and never panics. `finish` (clean shutdown)
//! unlinks what is queued without pausing; dropping the handle abandons what is queued.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};

use crate::index_file::IndexFile;
use crate::mapped_file::{sync_dir, MappedFile};
use crate::recycle::RecyclePool;
use crate::runtime::placement::{spawn_unpinned, Role};
use crate::StoreError;

/// Files queued for unlinking at most. One full retention pass fits, so the queue only cuts a
/// pass short when the previous pass has not been drained yet.
pub const DELETER_QUEUE_CAPACITY: usize = 16;

/// A file no longer part of the store, still mapped and on disk.
pub enum DetachedFile {
    /// The oldest commit-log segment (fully allocated: its size is what unlinking frees),
    /// unlinked; retention frees space forcibly, so the reuse pool is emptied as well.
    Segment(MappedFile),
    /// The oldest commit-log segment, expired: kept in the reuse pool if it has room
    /// (`store::recycle`), else unlinked.
    Retired(MappedFile),
    /// Not a file: unlink every segment kept for reuse (appends are refused for disk space).
    PurgePool,
    /// An expired IndexFile (sparse: not counted in `queued_bytes`).
    Index(IndexFile),
}

impl DetachedFile {
    fn path(&self) -> &Path {
        match self {
            DetachedFile::Segment(s) | DetachedFile::Retired(s) => s.path(),
            DetachedFile::PurgePool => Path::new("the segment reuse pool"),
            DetachedFile::Index(f) => f.path(),
        }
    }

    fn is_segment(&self) -> bool {
        matches!(self, DetachedFile::Segment(_) | DetachedFile::Retired(_))
    }

    fn counted_bytes(&self) -> u64 {
        match self {
            DetachedFile::Segment(s) | DetachedFile::Retired(s) => s.size(),
            DetachedFile::PurgePool => 0,
            DetachedFile::Index(_) => 0,
        }
    }
}

/// What the deleter has done, for retention decisions and tests.
#[derive(Debug, Default)]
pub struct DeleterState {
    /// Bytes of commit-log segments submitted and not unlinked yet.
    queued_bytes: AtomicU64,
    /// Files unlinked so far.
    deleted: AtomicU64,
    /// A segment could not be unlinked: later segments are kept (see the module invariants).
    segment_failed: AtomicBool,
}

enum Stop {
    /// Clean shutdown: unlink what is queued, without pausing.
    Finish,
    /// Leave what is queued on disk.
    Abandon,
}

pub struct FileDeleter {
    tx: Option<Sender<DetachedFile>>,
    pool: Option<Arc<RecyclePool>>,
    stop_tx: Sender<Stop>,
    state: Arc<DeleterState>,
    thread: Option<JoinHandle<()>>,
}

impl FileDeleter {
    /// `pool`: where retired segments go instead of being unlinked (None: always unlinked).
    pub fn spawn(interval: Duration, pool: Option<Arc<RecyclePool>>) -> Result<Self, StoreError> {
        let (tx, rx) = bounded(DELETER_QUEUE_CAPACITY);
        let (stop_tx, stop_rx) = bounded(1);
        let state = Arc::new(DeleterState::default());
        let (st, p) = (state.clone(), pool.clone());
        let thread = spawn_unpinned(Role::CleanFiles, move || {
            run(&rx, &stop_rx, interval, &st, p.as_deref())
        })
        .map_err(|e| StoreError::io("ringmq-clean thread", e))?;
        Ok(FileDeleter {
            tx: Some(tx),
            pool,
            stop_tx,
            state,
            thread: Some(thread),
        })
    }

    /// True when `submit` will take one more file. Only the writer submits, so room seen here
    /// is still there at its next `submit`.
    pub fn has_room(&self) -> bool {
        !self.state.segment_failed.load(Ordering::Acquire)
            && self.tx.as_ref().is_some_and(|tx| !tx.is_full())
    }

    /// Hands `file` to the thread; never blocks. Without room (or with the thread gone) the
    /// file is unmapped here and left on disk: the next start loads it and retention deletes
    /// it again, so nothing is lost but time.
    pub fn submit(&self, file: DetachedFile) {
        let bytes = file.counted_bytes();
        // Counted before the send so the thread's decrement never comes first.
        self.state.queued_bytes.fetch_add(bytes, Ordering::AcqRel);
        let Some(tx) = self.tx.as_ref() else {
            return self.refused(file, bytes);
        };
        match tx.try_send(file) {
            Ok(()) => {}
            Err(TrySendError::Full(f)) | Err(TrySendError::Disconnected(f)) => {
                self.refused(f, bytes)
            }
        }
    }

    fn refused(&self, file: DetachedFile, bytes: u64) {
        self.state.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
        tracing::error!(path = %file.path().display(),
            "file deleter has no room or stopped; the file stays until the next start");
    }

    /// Bytes of segments detached but not unlinked yet (still using disk space).
    pub fn queued_bytes(&self) -> u64 {
        self.state.queued_bytes.load(Ordering::Acquire)
    }

    /// Bytes of retired segments kept for reuse (used space until they become segments again).
    pub fn pooled_bytes(&self) -> u64 {
        self.pool.as_ref().map_or(0, |p| p.bytes())
    }

    /// Files unlinked (or kept for reuse) so far.
    pub fn deleted(&self) -> u64 {
        self.state.deleted.load(Ordering::Acquire)
    }

    /// Clean shutdown: unlinks everything queued without the pause (no appends are left to
    /// protect), then joins the thread. Later submits are refused (left on disk).
    pub fn finish(&mut self) {
        self.stop(Stop::Finish);
    }

    fn stop(&mut self, how: Stop) {
        // Full: a stop is already pending; Disconnected: the thread is gone. Either way the
        // join below is all that is left to do.
        let _pending = self.stop_tx.try_send(how);
        self.tx = None;
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("file deleter thread panicked");
            }
        }
    }
}

impl Drop for FileDeleter {
    fn drop(&mut self) {
        self.stop(Stop::Abandon);
    }
}

fn run(
    rx: &Receiver<DetachedFile>,
    stop_rx: &Receiver<Stop>,
    interval: Duration,
    st: &DeleterState,
    pool: Option<&RecyclePool>,
) {
    let mut stop = None;
    let mut last_unlink: Option<Instant> = None;
    while let Ok(file) = rx.recv() {
        if stop.is_none() {
            if let Some(done) = last_unlink {
                stop = pause(stop_rx, done + interval);
            }
        }
        if stop.is_none() {
            stop = stop_rx.try_recv().ok();
        }
        let bytes = file.counted_bytes();
        let keep = matches!(stop, Some(Stop::Abandon))
            || (file.is_segment() && st.segment_failed.load(Ordering::Acquire));
        if keep {
            tracing::warn!(path = %file.path().display(),
                "file deletion abandoned; the next start deletes it again");
            drop(file);
        } else {
            delete(file, st, pool);
            last_unlink = Some(Instant::now());
        }
        st.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Sleeps until `until` unless a stop arrives first (returned). A dropped handle is an abandon.
fn pause(stop_rx: &Receiver<Stop>, until: Instant) -> Option<Stop> {
    let left = until.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return None;
    }
    match stop_rx.recv_timeout(left) {
        Ok(s) => Some(s),
        Err(RecvTimeoutError::Timeout) => None,
        Err(RecvTimeoutError::Disconnected) => Some(Stop::Abandon),
    }
}

/// Unmaps, unlinks (or moves a retired segment into the reuse pool) and fsyncs the directory.
/// A segment that cannot be unlinked stops all later segment deletions (`segment_failed`).
fn delete(file: DetachedFile, st: &DeleterState, pool: Option<&RecyclePool>) {
    let is_segment = file.is_segment();
    let retired = matches!(file, DetachedFile::Retired(_));
    // Freeing space (a segment deleted forcibly, or appends refused) empties the reuse pool too.
    let forcibly = matches!(file, DetachedFile::Segment(_) | DetachedFile::PurgePool);
    if let Some(pool) = pool.filter(|p| forcibly && !p.is_empty()) {
        if let Err(e) = pool.purge() {
            tracing::error!(error = %e, "emptying the segment reuse pool failed");
        }
    }
    if matches!(file, DetachedFile::PurgePool) {
        return;
    }
    let path: PathBuf = file.path().to_path_buf();
    // The munmap of a large mapping is part of the cost moved off the writer.
    drop(file);
    if let Some(pool) = pool {
        if retired {
            match pool.put(&path) {
                Ok(true) => {
                    st.deleted.fetch_add(1, Ordering::AcqRel);
                    return;
                }
                Ok(false) => {}
                // Not moved (or moved and the directory sync failed): unlinking it, by either
                // name, is still the goal.
                Err(e) => tracing::warn!(error = %e, "keeping a retired segment for reuse failed"),
            }
        }
    }
    let removed = match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        // Already gone (e.g. by an operator): the goal is reached.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(&path, e)),
    };
    let synced = removed.and_then(|()| match path.parent() {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    });
    match synced {
        Ok(()) => {
            st.deleted.fetch_add(1, Ordering::AcqRel);
            tracing::info!(path = %path.display(), "deleted file");
        }
        Err(e) => {
            tracing::error!(error = %e, "file deletion failed");
            if is_segment {
                st.segment_failed.store(true, Ordering::Release);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEG: u64 = 64 << 10;

    fn segments(dir: &Path, n: u64) -> Vec<MappedFile> {
        (0..n)
            .map(|i| {
                MappedFile::create(dir, i * SEG, SEG, None, crate::mapped_file::Warm::Off).unwrap()
            })
            .collect()
    }

    /// When each of `paths` disappears, polled every few hundred microseconds (gives up after
    /// 10 s).
    fn disappearances(paths: &[PathBuf]) -> Vec<Instant> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen: Vec<Option<Instant>> = vec![None; paths.len()];
        while seen.iter().any(Option::is_none) && Instant::now() < deadline {
            for (p, s) in paths.iter().zip(seen.iter_mut()) {
                if s.is_none() && !p.exists() {
                    *s = Some(Instant::now());
                }
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        seen.into_iter().map(|s| s.expect("file deleted")).collect()
    }

    /// Proves consecutive deletions are spaced by the interval, oldest first, that submitting
    /// does not wait for them, and that the queued bytes drain to zero.
    #[test]
    fn deletions_are_spaced_by_the_interval() {
        let dir = tempfile::tempdir().unwrap();
        let segs = segments(dir.path(), 4);
        let paths: Vec<PathBuf> = segs.iter().map(|s| s.path().to_path_buf()).collect();
        let mut d = FileDeleter::spawn(Duration::from_millis(50), None).unwrap();
        let t0 = Instant::now();
        for s in segs {
            assert!(d.has_room());
            d.submit(DetachedFile::Segment(s));
        }
        assert!(t0.elapsed() < Duration::from_millis(40), "submit waited");
        let gone = disappearances(&paths);
        for pair in gone.windows(2) {
            let gap = pair[1].duration_since(pair[0]);
            // Polling blurs each time by at most one poll period.
            assert!(gap >= Duration::from_millis(48), "gap {gap:?}");
        }
        while d.queued_bytes() != 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(d.deleted(), 4);
        d.finish();
    }

    /// Proves the queue is bounded and `has_room` says so before `submit` would refuse, and
    /// that `finish` unlinks everything queued at once instead of pausing between files.
    #[test]
    fn full_queue_has_no_room_and_finish_skips_the_pause() {
        let dir = tempfile::tempdir().unwrap();
        let n = DELETER_QUEUE_CAPACITY as u64 + 4;
        let segs = segments(dir.path(), n);
        let mut d = FileDeleter::spawn(Duration::from_secs(3600), None).unwrap();
        let mut submitted = 0;
        let mut segs = segs.into_iter().peekable();
        // The thread may take a file off the queue after `has_room` said no: fill again until
        // the queue stays full while the thread sits in its pause.
        while segs.peek().is_some() {
            while d.has_room() {
                let Some(s) = segs.next() else { break };
                d.submit(DetachedFile::Segment(s));
                submitted += 1;
            }
            std::thread::sleep(Duration::from_millis(50));
            if !d.has_room() {
                break;
            }
        }
        // The thread unlinks the first file at once and holds the second through an hour's
        // pause: the queue takes its capacity on top of those two at most.
        let cap = DELETER_QUEUE_CAPACITY as u64;
        assert!((cap..=cap + 2).contains(&submitted), "{submitted}");
        assert!(!d.has_room());
        assert!(d.queued_bytes() >= (submitted - 1) * SEG);
        let t0 = Instant::now();
        d.finish();
        assert!(t0.elapsed() < Duration::from_secs(10));
        let left = std::fs::read_dir(dir.path()).unwrap().count() as u64;
        assert_eq!(left, n - submitted, "every queued file unlinked");
    }

    /// Proves dropping the deleter (what a crash amounts to) leaves queued segments on disk and
    /// that what is left is the newest, contiguous end of the detached ones.
    #[test]
    fn drop_abandons_queued_files_from_the_newest_end() {
        let dir = tempfile::tempdir().unwrap();
        let segs = segments(dir.path(), 3);
        let d = FileDeleter::spawn(Duration::from_secs(3600), None).unwrap();
        for s in segs {
            d.submit(DetachedFile::Segment(s));
        }
        while d.deleted() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(d);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, vec![format!("{SEG:020}"), format!("{:020}", 2 * SEG)]);
    }
}
