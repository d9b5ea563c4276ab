//! Bounded cross-thread mailboxes that an async shard can await.
//!
//! A mailbox is a crossbeam channel plus an `AtomicWaker`: any thread (another shard, the writer
//! thread) pushes without taking a lock the receiver could hold, and the owning shard's task
//! awaits `recv()`. The capacity is fixed at creation (ARCHITECTURE invariant 3) and enforced by
//! an atomic count: `try_send` hands the message back when full, and only plain threads (never a
//! shard) may use the blocking `send_blocking`, because a shard must never block its core.
//! The channel underneath allocates in small blocks as messages arrive, so an idle mailbox (one
//! per connection) costs a few hundred bytes, not `capacity` slots.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use atomic_waker::AtomicWaker;
use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};

/// Creates a mailbox holding at most `capacity` messages.
pub fn mailbox<T>(capacity: usize) -> (MailboxSender<T>, MailboxReceiver<T>) {
    assert!(capacity > 0, "a mailbox needs room for one message");
    let (tx, rx) = crossbeam_channel::unbounded();
    let shared = Arc::new(Shared {
        waker: AtomicWaker::new(),
        len: AtomicUsize::new(0),
        capacity,
    });
    (
        MailboxSender {
            tx,
            shared: shared.clone(),
        },
        MailboxReceiver { rx, shared },
    )
}

/// What both halves share: the receiver's waker and the bound.
struct Shared {
    waker: AtomicWaker,
    len: AtomicUsize,
    capacity: usize,
}

impl Shared {
    /// Reserves a slot; false when the mailbox is full.
    fn reserve(&self) -> bool {
        let prev = self.len.fetch_add(1, Ordering::AcqRel);
        if prev >= self.capacity {
            self.len.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }
}

/// The sending half: cheap to clone, `Send`.
pub struct MailboxSender<T> {
    tx: Sender<T>,
    shared: Arc<Shared>,
}

impl<T> Clone for MailboxSender<T> {
    fn clone(&self) -> Self {
        MailboxSender {
            tx: self.tx.clone(),
            shared: self.shared.clone(),
        }
    }
}

/// Why a message could not be delivered; the message comes back.
#[derive(Debug)]
pub enum SendError<T> {
    Full(T),
    Closed(T),
}

impl<T> MailboxSender<T> {
    /// Never blocks; gives the message back when the mailbox is full or its receiver is gone.
    pub fn try_send(&self, msg: T) -> Result<(), SendError<T>> {
        if !self.shared.reserve() {
            return Err(SendError::Full(msg));
        }
        match self.tx.try_send(msg) {
            Ok(()) => {
                self.shared.waker.wake();
                Ok(())
            }
            Err(TrySendError::Full(m)) | Err(TrySendError::Disconnected(m)) => {
                self.shared.len.fetch_sub(1, Ordering::AcqRel);
                Err(SendError::Closed(m))
            }
        }
    }

    /// Messages waiting in the mailbox now.
    pub fn len(&self) -> usize {
        self.shared.len.load(Ordering::Acquire)
    }

    /// True when no message waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Blocks the calling thread while the mailbox is full. Only for plain threads (the writer),
    /// never from a shard: a shard must not block its core.
    pub fn send_blocking(&self, mut msg: T) -> Result<(), T> {
        let mut backoff = Duration::from_micros(10);
        loop {
            match self.try_send(msg) {
                Ok(()) => return Ok(()),
                Err(SendError::Closed(m)) => return Err(m),
                Err(SendError::Full(m)) => {
                    // Make sure the receiver drains while we wait.
                    self.shared.waker.wake();
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_millis(1));
                    msg = m;
                }
            }
        }
    }
}

/// The receiving half, owned by exactly one shard task.
pub struct MailboxReceiver<T> {
    rx: Receiver<T>,
    shared: Arc<Shared>,
}

impl<T> MailboxReceiver<T> {
    /// Takes one message if there is one.
    pub fn try_recv(&self) -> Option<T> {
        let m = self.rx.try_recv().ok()?;
        self.shared.len.fetch_sub(1, Ordering::AcqRel);
        Some(m)
    }

    /// Waits for the next message; `None` once every sender is gone and the mailbox is empty.
    pub fn recv(&self) -> Recv<'_, T> {
        Recv { rx: self }
    }
}

/// Future returned by [`MailboxReceiver::recv`].
pub struct Recv<'a, T> {
    rx: &'a MailboxReceiver<T>,
}

impl<T> Future for Recv<'_, T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let rx = self.rx;
        let take = |m| {
            rx.shared.len.fetch_sub(1, Ordering::AcqRel);
            Poll::Ready(Some(m))
        };
        match rx.rx.try_recv() {
            Ok(m) => return take(m),
            Err(TryRecvError::Disconnected) => return Poll::Ready(None),
            Err(TryRecvError::Empty) => {}
        }
        // Register, then look again: a send between the first look and the registration would
        // otherwise be missed.
        rx.shared.waker.register(cx.waker());
        match rx.rx.try_recv() {
            Ok(m) => take(m),
            Err(TryRecvError::Disconnected) => Poll::Ready(None),
            Err(TryRecvError::Empty) => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full mailbox hands the message back instead of growing.
    #[test]
    fn bounded_and_gives_back() {
        let (tx, rx) = mailbox::<u32>(2);
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        match tx.try_send(3) {
            Err(SendError::Full(3)) => {}
            other => panic!("expected Full(3), got {other:?}"),
        }
        assert_eq!(tx.len(), 2);
        assert_eq!(rx.try_recv(), Some(1));
        assert_eq!(tx.len(), 1);
        assert_eq!(rx.try_recv(), Some(2));
        assert_eq!(rx.try_recv(), None);
        assert!(tx.is_empty());
    }

    /// A message sent from another thread wakes a pending receiver.
    #[test]
    fn wakes_across_threads() {
        let (tx, rx) = mailbox::<u32>(4);
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            tx.send_blocking(7).unwrap();
        });
        let got = futures_lite::future::block_on(rx.recv());
        assert_eq!(got, Some(7));
        t.join().unwrap();
        assert_eq!(futures_lite::future::block_on(rx.recv()), None);
    }
}
