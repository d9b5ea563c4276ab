//! The one way the broker asks a client something (Java's `Broker2Client`), and finds the
//! connection to ask on.
//!
//! A client's connection lives on the shard that accepted it (the top 16 bits of its id); that
//! shard owns the connection's [`ConnHandle`], whose response table matches the client's answer
//! to the request. Any shard may ask: [`call_client`] carries the request to the connection's
//! shard with `Mesh::call`, it waits there (bounded per connection, with the configured timeout)
//! and the answer, or why there is none, comes back the same way. [`send_oneway`] posts a
//! request nothing waits on (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE). Which
//! connection belongs to a client is shard 0's knowledge (its registrations): [`consumer_conn`]
//! and [`producer_conn`] ask there.

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use crate::error::BrokerError;
use crate::protocol::RemotingCommand;
use crate::remoting::InvokeError;
use crate::shard::Shard;

/// The shard serving connection `conn_id`.
pub fn shard_of_conn(conn_id: u64) -> usize {
    (conn_id >> 48) as usize
}

/// Sends `request` to the client on connection `conn_id` and returns its answer, whatever its
/// code. Callable from any shard.
pub async fn call_client(
    shard: &Rc<Shard>,
    conn_id: u64,
    request: RemotingCommand,
) -> Result<RemotingCommand, InvokeError> {
    let timeout = shard.ctx.cfg.limits.call_client_timeout();
    let target = shard_of_conn(conn_id);
    if target == shard.id {
        return invoke_here(shard, conn_id, request, timeout).await;
    }
    let asked = shard.mesh.call(target, move |s| async move {
        invoke_here(&s, conn_id, request, timeout).await
    });
    asked.await.unwrap_or(Err(InvokeError::Busy))
}

/// On the connection's shard: hands the request to the connection and waits for the answer.
async fn invoke_here(
    shard: &Shard,
    conn_id: u64,
    request: RemotingCommand,
    timeout: Duration,
) -> Result<RemotingCommand, InvokeError> {
    let conn = shard.conn(conn_id);
    let conn = conn.ok_or(InvokeError::NoConnection)?;
    conn.invoke(request, timeout).await
}

/// Queues an encoded oneway request on connection `conn_id` (any shard); a connection gone or
/// not reading loses it, with a debug line, as Java's `invokeOneway` failures are only logged.
pub fn send_oneway(shard: &Shard, conn_id: u64, frame: Bytes) {
    let job = Box::new(move |s: &Rc<Shard>| {
        let conn = s.conn(conn_id);
        let sent = conn
            .ok_or(InvokeError::NoConnection)
            .and_then(|c| c.send_oneway(frame));
        if let Err(e) = sent {
            tracing::debug!(conn = conn_id, error = %e, "oneway request to a client not sent");
        }
    });
    let target = shard_of_conn(conn_id);
    if shard.mesh.post(target, job).is_err() {
        tracing::debug!(
            conn = conn_id,
            shard = target,
            "oneway request to a client not sent: shard busy"
        );
    }
}

/// The connection of `client_id` registered (by heartbeat) as a consumer of `group`.
pub async fn consumer_conn(
    shard: &Rc<Shard>,
    group: &str,
    client_id: &str,
) -> Result<Option<u64>, BrokerError> {
    let (group, client_id) = (group.to_string(), client_id.to_string());
    let found = shard.mesh.call(0, move |s0| async move {
        let m = s0.meta();
        m.consumers
            .get(&group)
            .and_then(|info| info.clients.get(&client_id))
            .map(|c| c.conn_id)
    });
    Ok(found.await?)
}

/// The connection of the producer `client_id` in any producer group (Java's
/// `ProducerManager.findChannel`); the latest heartbeat wins if it is in several.
pub async fn producer_conn(shard: &Rc<Shard>, client_id: &str) -> Result<Option<u64>, BrokerError> {
    let client_id = client_id.to_string();
    let found = shard.mesh.call(0, move |s0| async move {
        let m = s0.meta();
        m.producers
            .values()
            .filter_map(|clients| clients.get(&client_id))
            .max_by_key(|c| c.last_update_ms)
            .map(|c| c.conn_id)
    });
    Ok(found.await?)
}

#[cfg(test)]
mod tests {
    use super::shard_of_conn;

    /// A connection id names its shard in the top 16 bits, as `Shard::next_conn_id` makes it.
    #[test]
    fn conn_id_names_its_shard() {
        assert_eq!(shard_of_conn((3u64 << 48) | 77), 3);
        assert_eq!(shard_of_conn(5), 0);
    }
}
