//! The only module that names glommio: executors named and pinned by the thread plan
//! (`placement`, which every thread ringmq starts goes through), the cross-shard mesh, timers,
//! spawning, and (in `net`) sockets with a non-blocking sendfile.
//!
//! A shard is one glommio `LocalExecutor` on its own thread with its own io_uring rings. Shards
//! share nothing mutable: the only way to touch another shard's state is to send it a [`Job`]
//! through its bounded [`mailbox`], which the shard runs on its own thread. [`Mesh::call`] builds
//! request/response on top of that. Everything outside this module is plain Rust that can be
//! tested without glommio (ARCHITECTURE invariant 7).

// The lower crates, under the names this crate's modules use for them.
use ringmq_protocol::constants;

pub mod mailbox;
pub mod net;
pub mod placement;
mod splice;

use std::future::Future;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use glommio::{LocalExecutorBuilder, Placement, PoolPlacement};

pub use mailbox::{mailbox, MailboxReceiver, MailboxSender, SendError};
pub use placement::{Role, ThreadPlan};

/// A unit of work for a shard: runs on the target shard's thread with its state.
pub type Job<S> = Box<dyn FnOnce(&Rc<S>) + Send>;

/// Handles to every shard's mailbox, indexed by shard number. Cheap to clone, `Send`.
pub struct Mesh<S> {
    senders: Arc<Vec<MailboxSender<Job<S>>>>,
    me: usize,
}

impl<S> Clone for Mesh<S> {
    fn clone(&self) -> Self {
        Mesh {
            senders: self.senders.clone(),
            me: self.me,
        }
    }
}

/// The target shard's mailbox is full (back-pressure) or the shard is gone.
#[derive(Debug, thiserror::Error)]
#[error("shard {0} is busy or stopped")]
pub struct MeshBusy(pub usize);

impl<S: 'static> Mesh<S> {
    /// Builds the mesh and the receivers, one per shard, each mailbox holding `capacity` jobs.
    pub fn new(shards: usize, capacity: usize) -> (Vec<Mesh<S>>, Vec<MailboxReceiver<Job<S>>>) {
        let mut senders = Vec::with_capacity(shards);
        let mut receivers = Vec::with_capacity(shards);
        for _ in 0..shards {
            let (tx, rx) = mailbox(capacity);
            senders.push(tx);
            receivers.push(rx);
        }
        let senders = Arc::new(senders);
        let meshes = (0..shards)
            .map(|me| Mesh {
                senders: senders.clone(),
                me,
            })
            .collect();
        (meshes, receivers)
    }

    /// This shard's number.
    pub fn me(&self) -> usize {
        self.me
    }

    /// How many shards there are.
    pub fn len(&self) -> usize {
        self.senders.len()
    }

    /// Always false: a mesh has at least one shard.
    pub fn is_empty(&self) -> bool {
        self.senders.is_empty()
    }

    /// Jobs posted to shard `i` that it has not taken up yet.
    pub fn queued(&self, i: usize) -> usize {
        self.senders[i].len()
    }

    /// The sender of shard `i`, for plain threads (the writer) that post jobs.
    pub fn sender(&self, i: usize) -> MailboxSender<Job<S>> {
        self.senders[i].clone()
    }

    /// Posts a job to shard `target` without waiting for it to run.
    pub fn post(&self, target: usize, job: Job<S>) -> Result<(), MeshBusy> {
        self.senders[target]
            .try_send(job)
            .map_err(|_| MeshBusy(target))
    }

    /// Runs `f` on shard `target` (as a local task there) and waits for its result here.
    pub async fn call<R, F, Fut>(&self, target: usize, f: F) -> Result<R, MeshBusy>
    where
        R: Send + 'static,
        F: FnOnce(Rc<S>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
    {
        let (tx, rx) = mailbox::<R>(1);
        let job: Job<S> = Box::new(move |state: &Rc<S>| {
            let fut = f(state.clone());
            spawn(async move {
                let r = fut.await;
                // Capacity 1 and exactly one send: it cannot be full; a gone caller is fine.
                let _ = tx.try_send(r);
            });
        });
        self.post(target, job)?;
        rx.recv().await.ok_or(MeshBusy(target))
    }
}

/// Spawns a detached local task on the current shard.
pub fn spawn<F: Future<Output = ()> + 'static>(fut: F) {
    glommio::spawn_local(fut).detach();
}

/// Sleeps on the current shard's timer.
pub async fn sleep(d: Duration) {
    glommio::timer::sleep(d).await;
}

/// Runs a blocking closure on the executor's file-work thread (`Role::ShardFiles`,
/// `Role::NamesrvFiles`: glommio's blocking pool), so the executor keeps serving (file
/// creation, config persistence, fsync of small files).
/// Lets the executor run other tasks if this one has had its share of the core.
pub async fn yield_now() {
    glommio::yield_if_needed().await
}

pub async fn spawn_blocking<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    glommio::executor().spawn_blocking(f).await
}

/// Runs `fut` with a deadline; `None` when it passed first.
pub async fn timeout<T>(d: Duration, fut: impl Future<Output = T>) -> Option<T> {
    use futures_lite::FutureExt;
    let deadline = async {
        sleep(d).await;
        None
    };
    async { Some(fut.await) }.or(deadline).await
}

/// Starts one executor thread per role (shards, the name server), each named and pinned by
/// `plan`, with the file-work thread the plan gives it (glommio's blocking pool of one thread,
/// behind [`spawn_blocking`]). `body(i)` builds the future
/// the `i`th executor runs until it returns. Returns the join handles once every executor is
/// up, or the first executor's failure to start (a locked-memory limit too low for its io_uring
/// rings, a core that does not exist): a broker with a missing shard must not look healthy.
pub fn start_executors<B, Fut>(
    plan: &ThreadPlan,
    roles: Vec<Role>,
    body: B,
) -> io::Result<Vec<std::thread::JoinHandle<()>>>
where
    B: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let mut handles = Vec::new();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    for (i, role) in roles.into_iter().enumerate() {
        let placement = match plan.core(role) {
            Some(c) => Placement::Fixed(c),
            None => Placement::Unbound,
        };
        let files = plan.files_of(role);
        let pool = match plan.core(files) {
            Some(c) => PoolPlacement::from(Placement::Fixed(c)),
            None => PoolPlacement::Unbound(1),
        };
        let body = body.clone();
        let ready = ready_tx.clone();
        let handle = plan.spawn(role, move || {
            let name = role.name();
            // glommio starts the blocking pool's thread inside `make` without naming it, and a
            // new Linux thread takes its creator's name: wear the pool's name meanwhile.
            set_current_thread_comm(&files.name());
            let ex = LocalExecutorBuilder::new(placement)
                .name(&name)
                .blocking_thread_pool_placement(pool)
                .spin_before_park(Duration::from_micros(0))
                .make();
            set_current_thread_comm(&name);
            match ex {
                Ok(ex) => {
                    // The receiver waits for every executor before it returns.
                    let _ = ready.send(Ok(()));
                    ex.run(body(i))
                }
                Err(e) => {
                    let _ = ready.send(Err(format!("{name}: {e}")));
                }
            }
        })?;
        handles.push(handle);
    }
    drop(ready_tx);
    for _ in 0..handles.len() {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let hint = if e.contains("MemLock") {
                    " (io_uring needs locked memory: raise RLIMIT_MEMLOCK, e.g. `ulimit -l 8192` \
                     or LimitMEMLOCK= in a systemd unit)"
                } else {
                    ""
                };
                return Err(io::Error::other(format!("cannot start executor {e}{hint}")));
            }
            Err(_) => return Err(io::Error::other("an executor thread ended before starting")),
        }
    }
    Ok(handles)
}

/// Renames the calling thread as Linux shows it (`comm`; cut to 15 bytes). Errors are ignored:
/// a name is for people reading thread listings.
fn set_current_thread_comm(name: &str) {
    let Ok(c) = std::ffi::CString::new(name) else {
        return;
    };
    // SAFETY: PR_SET_NAME reads a NUL-terminated string (at most 16 bytes used) that outlives
    // the call, and renames only the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c.as_ptr());
    }
}

/// Number of CPUs this process may run on.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Shards when `shardCount` is not set: one per core, less the writer's.
pub fn default_shard_count() -> usize {
    available_cores().saturating_sub(1).max(1)
}

/// Pins the calling thread to CPU `core` (plain threads; shards are pinned by their executor's
/// placement too).
pub fn pin_current_thread(core: usize) -> io::Result<()> {
    if core >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {core} is past CPU_SETSIZE"),
        ));
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it (`core` is below CPU_SETSIZE);
    // sched_setaffinity(0) affects only the calling thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Pins the calling thread to `core` when one is given (`ThreadPlan::spawn`). A failure
/// is logged and the thread runs unpinned: slower, never wrong.
pub fn pin_current_thread_to(core: Option<usize>) {
    let Some(core) = core else {
        return;
    };
    if let Err(e) = pin_current_thread(core) {
        let thread = std::thread::current();
        tracing::warn!(core, thread = thread.name(), error = %e, "pinning failed; running unpinned");
    }
}
