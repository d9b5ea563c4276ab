//! What a master's HA connections (classic and AutoSwitch) share on shard 0: the wait for the
//! writer to publish more of the commit log ([`PublishWatch`], fed by one [`publish_hub`] task
//! that registers with the writer only while a connection waits), and the error a stalled
//! slave ends with.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

use crate::broker::shard::Shard;
use crate::writer::WriterSender;

/// Shard 0's HA connections waiting for the writer to publish more of the commit log. The
/// writer wakes one waker per publish; [`publish_hub`] passes that on to every waiting
/// connection, and registers with the writer only while one waits.
#[derive(Default)]
pub struct PublishWatch {
    waiting: RefCell<Vec<Waker>>,
    /// The hub, parked while no connection waits.
    hub: Cell<Option<Waker>>,
}

impl PublishWatch {
    /// Ready once the published end of the commit log is past `offset`.
    pub fn past<'a>(
        &'a self,
        writer: &'a WriterSender,
        offset: u64,
    ) -> impl Future<Output = ()> + 'a {
        poll_fn(move |cx| {
            if writer.max_phy_offset() > offset {
                return Poll::Ready(());
            }
            let mut waiting = self.waiting.borrow_mut();
            if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
                waiting.push(cx.waker().clone());
            }
            drop(waiting);
            if let Some(hub) = self.hub.take() {
                hub.wake();
            }
            Poll::Pending
        })
    }
}

/// Wakes the waiting connections after every publish of the writer.
pub async fn publish_hub(shard: Rc<Shard>, watch: Rc<PublishWatch>) {
    let writer = &shard.ctx.writer;
    let mut seen = writer.max_phy_offset();
    loop {
        poll_fn(|cx| {
            if watch.waiting.borrow().is_empty() {
                watch.hub.set(Some(cx.waker().clone()));
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
        poll_fn(|cx| {
            writer.wake_on_publish(cx.waker());
            let now = writer.max_phy_offset();
            if now != seen {
                seen = now;
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        for w in watch.waiting.take() {
            w.wake();
        }
    }
}

pub fn stalled(housekeeping: Duration) -> String {
    format!("the slave read nothing for {} ms", housekeeping.as_millis())
}
