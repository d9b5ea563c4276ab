//! The loop that keeps push consumers' held messages invisible (Java's
//! `DefaultReceiptHandleManager`): every `renewSchedulePeriodMillis` the messages whose deadline
//! is within `renewAheadTimeMillis` get CHANGE_MESSAGE_INVISIBLETIME for another
//! `defaultInvisibleTimeMills`, on their client's virtual connection; one held past
//! `renewMaxTimeMillis`, or whose client is gone, is left to come back. A client that ends
//! (NotifyClientTermination) has its held messages come back within a second
//! (`invisibleTimeMillisWhenClear`).

use std::sync::Arc;
use std::time::Duration;

use ringmq_protocol::pop::ExtraInfo;

use crate::clients::Client;
use crate::consume;
use crate::endpoint::Endpoint;

/// What a released message's invisible time becomes (`invisibleTimeMillisWhenClear`).
const CLEAR_INVISIBLE_MS: i64 = 1_000;

/// Runs for the endpoint's life on the gRPC thread.
pub async fn run(ep: Arc<Endpoint>) {
    let period = Duration::from_millis(ep.cfg.renew.period_ms.max(1) as u64);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        renew_due(&ep).await;
    }
}

async fn renew_due(ep: &Endpoint) {
    let cfg = ep.cfg.renew;
    let max = Duration::from_millis(cfg.max_ms.max(0) as u64);
    for (key, r) in ep.renewals.due(crate::now_ms(), cfg.ahead_ms) {
        if r.since.elapsed() >= max {
            ep.renewals.take(&key);
            tracing::debug!(client = %key.client_id, message = %key.message_id, "held past renewMaxTimeMillis: no longer renewed");
            continue;
        }
        let Some(client) = ep.clients.get(&key.client_id) else {
            ep.renewals.take(&key);
            continue;
        };
        match consume::change(
            ep,
            &client,
            &key.group,
            &r.topic,
            &r.handle,
            cfg.invisible_ms,
        )
        .await
        {
            Ok(new) => {
                let next = ExtraInfo::parse(&new)
                    .map(|h| h.next_visible_time())
                    .unwrap_or_else(|_| crate::now_ms() + cfg.invisible_ms);
                ep.renewals.renewed(&key, new, next);
            }
            Err(e) => {
                // Acked meanwhile with the previous handle, or no longer in flight.
                ep.renewals.take(&key);
                tracing::debug!(client = %key.client_id, message = %key.message_id, error = %e, "renewal failed; the message is no longer renewed");
            }
        }
    }
}

/// The client ends: what it holds comes back soon instead of after its invisible time.
pub async fn release(ep: &Endpoint, client: &Client) {
    for (key, r) in ep
        .renewals
        .due(i64::MAX / 2, 0)
        .into_iter()
        .filter(|(k, _)| k.client_id == client.client_id)
    {
        ep.renewals.take(&key);
        if let Err(e) = consume::change(
            ep,
            client,
            &key.group,
            &r.topic,
            &r.handle,
            CLEAR_INVISIBLE_MS,
        )
        .await
        {
            tracing::debug!(client = %key.client_id, error = %e, "a released message keeps its invisible time");
        }
    }
}
