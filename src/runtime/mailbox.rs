//! Bounded cross-thread mailboxes that an async shard can await.
//!
//! A mailbox is a crossbeam bounded channel plus an `AtomicWaker`: any thread (another shard, the
//! writer thread) pushes without taking a lock the receiver could hold, and the owning shard's task
//! awaits `recv()`. The capacity is fixed at creation (ARCHITECTURE invariant 3): `try_send` hands
//! the message back when full, and only plain threads (never a shard) may use the blocking
//! `send_blocking`, because a shard must never block its core.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;
use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};

/// Creates a mailbox holding at most `capacity` messages.
pub fn mailbox<T>(capacity: usize) -> (MailboxSender<T>, MailboxReceiver<T>) {
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    let waker = Arc::new(AtomicWaker::new());
    (
        MailboxSender {
            tx,
            waker: waker.clone(),
        },
        MailboxReceiver { rx, waker },
    )
}

/// The sending half: cheap to clone, `Send`.
pub struct MailboxSender<T> {
    tx: Sender<T>,
    waker: Arc<AtomicWaker>,
}

impl<T> Clone for MailboxSender<T> {
    fn clone(&self) -> Self {
        MailboxSender {
            tx: self.tx.clone(),
            waker: self.waker.clone(),
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
        match self.tx.try_send(msg) {
            Ok(()) => {
                self.waker.wake();
                Ok(())
            }
            Err(TrySendError::Full(m)) => Err(SendError::Full(m)),
            Err(TrySendError::Disconnected(m)) => Err(SendError::Closed(m)),
        }
    }

    /// Blocks the calling thread while the mailbox is full. Only for plain threads (the writer),
    /// never from a shard: a shard must not block its core.
    pub fn send_blocking(&self, msg: T) -> Result<(), T> {
        // Wake first so a full mailbox gets drained while we wait.
        self.waker.wake();
        let res = self.tx.send(msg).map_err(|e| e.0);
        self.waker.wake();
        res
    }
}

/// The receiving half, owned by exactly one shard task.
pub struct MailboxReceiver<T> {
    rx: Receiver<T>,
    waker: Arc<AtomicWaker>,
}

impl<T> MailboxReceiver<T> {
    /// Takes one message if there is one.
    pub fn try_recv(&self) -> Option<T> {
        self.rx.try_recv().ok()
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
        match rx.rx.try_recv() {
            Ok(m) => return Poll::Ready(Some(m)),
            Err(TryRecvError::Disconnected) => return Poll::Ready(None),
            Err(TryRecvError::Empty) => {}
        }
        // Register, then look again: a send between the first look and the registration would
        // otherwise be missed.
        rx.waker.register(cx.waker());
        match rx.rx.try_recv() {
            Ok(m) => Poll::Ready(Some(m)),
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
        assert_eq!(rx.try_recv(), Some(1));
        assert_eq!(rx.try_recv(), Some(2));
        assert_eq!(rx.try_recv(), None);
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
