//! Long-polling waiters: a pull that found nothing parks a [`Waiter`] on its queue (owner shard
//! only) and awaits it with a deadline; dispatch of a new unit to the queue notifies every waiter.
//! Waiters are shard-local (`Rc`), so a waiter whose pull gave up is recognised by being the last
//! reference and dropped at the next park.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Waiter {
    notified: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Waiter {
    pub fn new() -> Rc<Waiter> {
        Rc::new(Waiter::default())
    }

    /// Marks the waiter notified and wakes its task.
    pub fn notify(&self) {
        self.notified.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    /// True when nobody waits on it any more (only the queue's list holds it).
    pub fn abandoned(self: &Rc<Self>) -> bool {
        Rc::strong_count(self) == 1
    }

    /// Resolves once notified.
    pub fn notified(self: &Rc<Self>) -> Notified {
        Notified(self.clone())
    }
}

pub struct Notified(Rc<Waiter>);

impl Future for Notified {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.notified.get() {
            return Poll::Ready(());
        }
        *self.0.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A notify before or after the first poll completes the wait; a dropped wait is abandoned.
    #[test]
    fn notify_and_abandon() {
        let w = Waiter::new();
        let held = w.clone();
        held.notify();
        futures_lite::future::block_on(w.notified());
        let w2 = Waiter::new();
        let list = [w2.clone()];
        drop(w2);
        assert!(list[0].abandoned());
    }
}
