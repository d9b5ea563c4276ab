//! The receipt handles the endpoint renews for push consumers (Java's
//! `DefaultReceiptHandleManager`): a receive with `auto_renew` hands its messages out for the
//! short default invisible time, and the endpoint moves each one's deadline on before it
//! passes, for as long as the client holds the message (at most `renewMaxTimeMillis`). The
//! client acks with the handle it was given; the endpoint acks with the latest one. Keyed by
//! (client, group, message id), bounded (`MAX_TRACKED`: past it new messages go untracked and
//! come back after their invisible time, as without renewal).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Handles tracked at once, over every client.
pub const MAX_TRACKED: usize = 200_000;

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct RenewKey {
    pub client_id: String,
    pub group: String,
    pub message_id: String,
}

#[derive(Clone, Debug)]
pub struct Renewal {
    /// The topic the client received from.
    pub topic: String,
    /// The latest handle (what an ack must name).
    pub handle: String,
    /// When the message becomes visible again unless renewed.
    pub next_visible_ms: i64,
    /// When it was received.
    pub since: Instant,
}

#[derive(Default)]
pub struct Renewals {
    inner: Mutex<HashMap<RenewKey, Renewal>>,
}

impl Renewals {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<RenewKey, Renewal>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts renewing a received message; false when the table is full.
    pub fn track(&self, key: RenewKey, r: Renewal) -> bool {
        let mut m = self.map();
        if m.len() >= MAX_TRACKED && !m.contains_key(&key) {
            return false;
        }
        m.insert(key, r);
        true
    }

    /// Stops renewing the message (it is acked, changed or forwarded) and gives its latest
    /// handle.
    pub fn take(&self, key: &RenewKey) -> Option<Renewal> {
        self.map().remove(key)
    }

    /// The messages whose deadline is within `ahead_ms` of `now_ms`.
    pub fn due(&self, now_ms: i64, ahead_ms: i64) -> Vec<(RenewKey, Renewal)> {
        self.map()
            .iter()
            .filter(|(_, r)| r.next_visible_ms - now_ms <= ahead_ms)
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect()
    }

    /// Records a renewal, unless the message was taken meanwhile.
    pub fn renewed(&self, key: &RenewKey, handle: String, next_visible_ms: i64) {
        if let Some(r) = self.map().get_mut(key) {
            r.handle = handle;
            r.next_visible_ms = next_visible_ms;
        }
    }

    /// Stops renewing every message of `client_id`.
    pub fn forget_client(&self, client_id: &str) -> usize {
        let mut m = self.map();
        let before = m.len();
        m.retain(|k, _| k.client_id != client_id);
        before - m.len()
    }

    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(m: &str) -> RenewKey {
        RenewKey {
            client_id: "c".into(),
            group: "g".into(),
            message_id: m.into(),
        }
    }

    fn renewal(next: i64) -> Renewal {
        Renewal {
            topic: "t".into(),
            handle: "h0".into(),
            next_visible_ms: next,
            since: Instant::now(),
        }
    }

    #[test]
    fn due_renewed_taken() {
        let t = Renewals::default();
        assert!(t.track(key("a"), renewal(1_000)));
        assert!(t.track(key("b"), renewal(50_000)));
        let due: Vec<String> = t
            .due(0, 10_000)
            .into_iter()
            .map(|(k, _)| k.message_id)
            .collect();
        assert_eq!(due, vec!["a"]);
        t.renewed(&key("a"), "h1".into(), 60_000);
        assert!(t.due(0, 10_000).is_empty());
        assert_eq!(t.take(&key("a")).unwrap().handle, "h1");
        t.renewed(&key("a"), "h2".into(), 1);
        assert!(t.take(&key("a")).is_none());
        assert_eq!(t.forget_client("c"), 1);
        assert!(t.is_empty());
    }
}
