//! The broker's questions to gRPC clients waiting for their answers (see `diagnostics`), by the
//! nonce the question carries; at most `MAX_WAITING` per client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Questions one client may have open at once.
pub const MAX_WAITING: usize = 64;

/// A broker request waiting for a client's answer: its opaque and code.
#[derive(Clone, Copy, Debug)]
pub struct Waiting {
    pub opaque: i32,
    pub code: i32,
}

/// Open questions by nonce, over every client (a nonce names its client).
#[derive(Default)]
pub struct Questions {
    inner: Mutex<HashMap<String, (String, Waiting)>>,
    next: AtomicU64,
}

impl Questions {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Waiting)>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A nonce for a question to `client_id`; None when it has `MAX_WAITING` open already.
    pub fn open(&self, client_id: &str, w: Waiting) -> Option<String> {
        let mut m = self.map();
        if m.values().filter(|(c, _)| c == client_id).count() >= MAX_WAITING {
            return None;
        }
        let nonce = format!(
            "{:x}-{:x}",
            crate::now_ms(),
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        m.insert(nonce.clone(), (client_id.to_string(), w));
        Some(nonce)
    }

    /// The question `nonce` names, if `client_id` asked it.
    pub fn close(&self, client_id: &str, nonce: &str) -> Option<Waiting> {
        let mut m = self.map();
        match m.get(nonce) {
            Some((c, _)) if c == client_id => m.remove(nonce).map(|(_, w)| w),
            _ => None,
        }
    }

    /// Forgets the questions of a client that is gone.
    pub fn forget_client(&self, client_id: &str) {
        self.map().retain(|_, (c, _)| c != client_id);
    }
}
