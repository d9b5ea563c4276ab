//! Requests a server sends to a client over the client's own connection, and the answers that
//! come back on it (Java's `responseTable` of `NettyRemotingAbstract`, used by `invokeSync`).
//!
//! One table per connection, owned by the shard that serves the connection: the connection task
//! hands every response frame it reads to [`ResponseTable::complete`] and calls
//! [`ResponseTable::close`] when the connection ends; [`ResponseTable::invoke`], run on the same
//! shard, registers a request, queues its frame on the connection's outbox and waits for the
//! answer or a deadline. The table picks each request's opaque from its own counter, skipping
//! any still pending, so two requests waiting on one connection never share an opaque; the
//! client's own requests carry no RESPONSE flag and never reach the table.
//!
//! Invariants: at most `max_pending` entries (one more is refused at once with
//! [`InvokeError::TooManyPending`]); every entry leaves the table exactly once, by its answer,
//! by its deadline or its asker going away (the entry guard), or failed by `close`; an answer
//! that finds no entry (it came after the deadline) is the caller's to log and drop.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use super::{encode_frame, Outbox};
use crate::protocol::RemotingCommand;
use crate::runtime::{self, SendError};

/// Why a request to a client got no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvokeError {
    #[error("the client's connection is gone")]
    NoConnection,
    #[error("{max} requests to this client already wait for answers")]
    TooManyPending { max: usize },
    #[error("the client does not read its connection (outbox full)")]
    OutboxFull,
    #[error("the request could not be encoded")]
    Encode,
    #[error("no answer within {ms} ms")]
    Timeout { ms: u64 },
    #[error("the connection closed before the client answered")]
    ConnectionClosed,
    #[error("the shard serving the client's connection is busy")]
    Busy,
}

/// A request's outcome as the waiter receives it.
type Answer = Result<RemotingCommand, InvokeError>;

/// The pending requests of one connection; see the module doc.
pub struct ResponseTable {
    pending: RefCell<HashMap<i32, oneshot::Sender<Answer>>>,
    next_opaque: Cell<i32>,
    max_pending: usize,
    closed: Cell<bool>,
}

/// Removes its entry when the request ends for any reason (a no-op once answered).
struct Entry<'a> {
    table: &'a ResponseTable,
    opaque: i32,
}

impl Drop for Entry<'_> {
    fn drop(&mut self) {
        self.table.pending.borrow_mut().remove(&self.opaque);
    }
}

impl ResponseTable {
    /// An empty table holding at most `max_pending` requests (0: the server never asks).
    pub fn new(max_pending: usize) -> ResponseTable {
        ResponseTable {
            pending: RefCell::new(HashMap::new()),
            next_opaque: Cell::new(1),
            max_pending,
            closed: Cell::new(false),
        }
    }

    /// Requests waiting for an answer.
    pub fn len(&self) -> usize {
        self.pending.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes a free opaque and a slot for its answer.
    fn register(&self) -> Result<(i32, oneshot::Receiver<Answer>), InvokeError> {
        if self.closed.get() {
            return Err(InvokeError::ConnectionClosed);
        }
        let mut pending = self.pending.borrow_mut();
        if pending.len() >= self.max_pending {
            return Err(InvokeError::TooManyPending {
                max: self.max_pending,
            });
        }
        // At most `max_pending` opaques are taken, so this skips at most that many.
        let mut opaque = self.next_opaque.get();
        while pending.contains_key(&opaque) {
            opaque = opaque.wrapping_add(1);
        }
        self.next_opaque.set(opaque.wrapping_add(1));
        let (tx, rx) = oneshot::channel();
        pending.insert(opaque, tx);
        Ok((opaque, rx))
    }

    /// Hands a response frame read from the client to the request waiting for it. False when
    /// none waits: the answer came after its deadline, or answers nothing we asked.
    pub fn complete(&self, answer: RemotingCommand) -> bool {
        let waiter = self.pending.borrow_mut().remove(&answer.opaque);
        match waiter {
            Some(tx) => {
                // The asker may have gone since (its task dropped); nothing else waits.
                let _ = tx.send(Ok(answer));
                true
            }
            None => false,
        }
    }

    /// The connection ended: every waiting request fails now, and later ones at once.
    pub fn close(&self) {
        self.closed.set(true);
        let waiters: Vec<_> = self.pending.borrow_mut().drain().collect();
        for (_, tx) in waiters {
            let _ = tx.send(Err(InvokeError::ConnectionClosed));
        }
    }

    /// Sends `request` to the client through `outbox` and waits up to `timeout` for its answer.
    /// Runs on the connection's shard.
    pub async fn invoke(
        &self,
        outbox: &Outbox,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, InvokeError> {
        let ms = timeout.as_millis() as u64;
        let deadline = async move {
            runtime::sleep(timeout).await;
            ms
        };
        self.invoke_until(outbox, request, deadline).await
    }

    /// `invoke` with the deadline as a future resolving to the milliseconds it stands for.
    async fn invoke_until(
        &self,
        outbox: &Outbox,
        mut request: RemotingCommand,
        deadline: impl Future<Output = u64>,
    ) -> Result<RemotingCommand, InvokeError> {
        use futures_lite::FutureExt;
        let (opaque, answer) = self.register()?;
        let _entry = Entry {
            table: self,
            opaque,
        };
        request.opaque = opaque;
        let frame = encode_frame(&request).ok_or(InvokeError::Encode)?;
        match outbox.try_send(frame) {
            Ok(()) => {}
            Err(SendError::Full(_)) => return Err(InvokeError::OutboxFull),
            Err(SendError::Closed(_)) => return Err(InvokeError::ConnectionClosed),
        }
        let answered = async {
            // A dropped sender means the table itself went away with its connection.
            answer.await.unwrap_or(Err(InvokeError::ConnectionClosed))
        };
        let timed_out = async { Err(InvokeError::Timeout { ms: deadline.await }) };
        answered.or(timed_out).await
    }
}

#[cfg(test)]
mod tests {
    use futures_lite::future::{block_on, pending, poll_once, ready, yield_now, zip};

    use super::*;
    use crate::protocol::codes::request_code;
    use crate::protocol::frame::split_frame;
    use crate::runtime::{mailbox, MailboxReceiver};
    use crate::Outbound;

    fn request() -> RemotingCommand {
        RemotingCommand::new_request(request_code::GET_CONSUMER_RUNNING_INFO)
    }

    /// The request the table wrote to the outbox, decoded.
    fn sent(rx: &MailboxReceiver<Outbound>) -> RemotingCommand {
        let Some(Outbound::Frame(frame)) = rx.try_recv() else {
            panic!("no request frame in the outbox");
        };
        let mut buf = bytes::BytesMut::from(&frame[..]);
        let f = split_frame(&mut buf, 1 << 20).unwrap().unwrap();
        RemotingCommand::decode(f).unwrap()
    }

    fn answer_to(req: &RemotingCommand, code: i32) -> RemotingCommand {
        RemotingCommand::response_for(req, code, Some("from the client".into()))
    }

    /// The answer with the request's opaque reaches the asker, and the entry is gone after.
    #[test]
    fn answer_reaches_the_asker() {
        let table = ResponseTable::new(4);
        let (tx, rx) = mailbox(8);
        let (got, ()) = block_on(zip(table.invoke_until(&tx, request(), pending()), async {
            yield_now().await;
            let req = sent(&rx);
            assert_eq!(table.len(), 1);
            // An answer to something never asked is refused and changes nothing.
            let mut stray = answer_to(&req, 0);
            stray.opaque = req.opaque + 1000;
            assert!(!table.complete(stray));
            assert!(table.complete(answer_to(&req, 7)));
        }));
        let got = got.unwrap();
        assert_eq!(
            (got.code, got.remark.as_deref()),
            (7, Some("from the client"))
        );
        assert!(table.is_empty());
    }

    /// A deadline fails the request and frees its slot; the late answer then finds nothing.
    #[test]
    fn deadline_fails_and_late_answer_is_dropped() {
        let table = ResponseTable::new(4);
        let (tx, rx) = mailbox(8);
        let got = block_on(table.invoke_until(&tx, request(), ready(25)));
        assert_eq!(got, Err(InvokeError::Timeout { ms: 25 }));
        assert!(table.is_empty());
        assert!(!table.complete(answer_to(&sent(&rx), 0)));
    }

    /// A full table refuses the next request at once, without writing it to the client.
    #[test]
    fn full_table_refuses_at_once() {
        let table = ResponseTable::new(2);
        let (tx, rx) = mailbox(8);
        let (a, (b, ())) = block_on(zip(
            table.invoke_until(&tx, request(), pending()),
            zip(table.invoke_until(&tx, request(), pending()), async {
                yield_now().await;
                let first = sent(&rx);
                let second = sent(&rx);
                assert_ne!(first.opaque, second.opaque);
                let third = table.invoke_until(&tx, request(), pending()).await;
                assert_eq!(third, Err(InvokeError::TooManyPending { max: 2 }));
                assert!(
                    rx.try_recv().is_none(),
                    "a refused request must not be sent"
                );
                table.complete(answer_to(&first, 0));
                table.complete(answer_to(&second, 0));
            }),
        ));
        assert!(a.is_ok() && b.is_ok());
        assert!(table.is_empty());
    }

    /// Closing the connection fails every waiter, and later requests fail without being sent.
    #[test]
    fn close_fails_waiters_and_later_requests() {
        let table = ResponseTable::new(4);
        let (tx, rx) = mailbox(8);
        let (got, ()) = block_on(zip(table.invoke_until(&tx, request(), pending()), async {
            yield_now().await;
            sent(&rx);
            table.close();
        }));
        assert_eq!(got, Err(InvokeError::ConnectionClosed));
        let later = block_on(table.invoke_until(&tx, request(), pending()));
        assert_eq!(later, Err(InvokeError::ConnectionClosed));
        assert!(rx.try_recv().is_none());
        assert!(table.is_empty());
    }

    /// A full outbox (a client that stopped reading) fails the request and frees its slot.
    #[test]
    fn full_outbox_fails_and_frees_the_slot() {
        let table = ResponseTable::new(4);
        let (tx, _rx) = mailbox(1);
        tx.try_send(Outbound::Close).ok().unwrap();
        let got = block_on(table.invoke_until(&tx, request(), pending()));
        assert_eq!(got, Err(InvokeError::OutboxFull));
        assert!(table.is_empty());
    }

    /// An asker that goes away (its task dropped) takes its entry with it.
    #[test]
    fn dropped_asker_frees_its_slot() {
        let table = ResponseTable::new(1);
        let (tx, _rx) = mailbox(8);
        let mut ask = Box::pin(table.invoke_until(&tx, request(), pending()));
        assert!(block_on(poll_once(ask.as_mut())).is_none());
        assert_eq!(table.len(), 1);
        drop(ask);
        assert!(table.is_empty());
    }
}
