//! Background flusher for ASYNC_FLUSH: fdatasyncs segment files on its own thread
//! ("ringmq-flush") so the writer never stalls on the disk; RocketMQ's FlushRealTimeService.
//!
//! Owned by the writer core, which submits at most one job at a time. Invariant: `flushed_phy`
//! only grows and only after every file of the job synced; a failure sets `failed` (the writer
//! then stops accepting appends: after a failed fdatasync the page cache state is unknown).

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Sender};

pub struct FlushJob {
    pub files: Vec<Arc<File>>,
    pub upto_phy: u64,
    pub store_timestamp: i64,
}

#[derive(Default)]
pub struct FlusherState {
    pub flushed_phy: AtomicU64,
    pub flushed_timestamp: AtomicI64,
    pub busy: AtomicBool,
    pub failed: AtomicBool,
}

pub struct Flusher {
    tx: Option<Sender<FlushJob>>,
    pub state: Arc<FlusherState>,
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    /// `core`: where this thread runs (`StoreConfig::flush_core`; None: unpinned).
    pub fn spawn(start_phy: u64, core: Option<usize>) -> std::io::Result<Self> {
        let (tx, rx) = bounded::<FlushJob>(1);
        let state = Arc::new(FlusherState::default());
        state.flushed_phy.store(start_phy, Ordering::Release);
        let st = state.clone();
        let thread = std::thread::Builder::new()
            .name("ringmq-flush".into())
            .spawn(move || {
                crate::runtime::pin_current_thread_to(core);
                for job in rx {
                    let mut ok = true;
                    for f in &job.files {
                        if let Err(e) = f.sync_data() {
                            tracing::error!(error = %e, "async commit-log flush failed");
                            ok = false;
                        }
                    }
                    if ok {
                        st.flushed_phy.fetch_max(job.upto_phy, Ordering::AcqRel);
                        st.flushed_timestamp
                            .fetch_max(job.store_timestamp, Ordering::AcqRel);
                    } else {
                        st.failed.store(true, Ordering::Release);
                    }
                    st.busy.store(false, Ordering::Release);
                }
            })?;
        Ok(Flusher {
            tx: Some(tx),
            state,
            thread: Some(thread),
        })
    }

    /// Submits a job unless one is running; returns whether it was taken.
    pub fn submit(&self, job: FlushJob) -> bool {
        if self.state.busy.swap(true, Ordering::AcqRel) {
            return false;
        }
        match self.tx.as_ref().map(|tx| tx.send(job)) {
            Some(Ok(())) => true,
            _ => {
                self.state.busy.store(false, Ordering::Release);
                false
            }
        }
    }

    /// Waits for the running job, then stops the thread.
    pub fn stop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("flusher thread panicked");
            }
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.stop();
    }
}
