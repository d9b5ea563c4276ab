//! Says a failing append path once instead of once per batch: the first failed batch as an
//! ERROR with its cause, then, while batches keep failing, one line per interval with how many
//! failed, and one line when a batch is written again. A full disk under load fails thousands of
//! batches a second; the log should say what happened, not drown in it.

use std::time::{Duration, Instant};

use crate::StoreError;

/// How often a still-failing writer says how many batches failed since it last said so.
pub const FAILURE_REPORT_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub struct FailureLog {
    /// Since when batches fail (None: the last batch was written).
    failing_since: Option<Instant>,
    last_report: Option<Instant>,
    /// Failed batches since the last line, and since the first failure.
    since_report: u64,
    total: u64,
}

impl FailureLog {
    /// A batch failed with `e` and was rolled back. Returns whether a line was logged.
    pub fn failed(&mut self, e: &StoreError) -> bool {
        self.failed_at(e, Instant::now())
    }

    fn failed_at(&mut self, e: &StoreError, now: Instant) -> bool {
        self.total += 1;
        let Some(since) = self.failing_since else {
            self.failing_since = Some(now);
            self.last_report = Some(now);
            self.since_report = 0;
            tracing::error!(error = %e, "append batch failed and was rolled back; further failures are counted, not logged one by one");
            return true;
        };
        self.since_report += 1;
        let due = self
            .last_report
            .is_none_or(|t| now.duration_since(t) >= FAILURE_REPORT_INTERVAL);
        if !due {
            return false;
        }
        tracing::error!(
            error = %e,
            failed_batches = self.since_report,
            failing_for_s = now.duration_since(since).as_secs(),
            "append batches still failing"
        );
        self.since_report = 0;
        self.last_report = Some(now);
        true
    }

    /// A batch was written. Returns whether a line was logged (the first success after
    /// failures).
    pub fn succeeded(&mut self) -> bool {
        let Some(since) = self.failing_since.take() else {
            return false;
        };
        tracing::warn!(
            failed_batches = self.total,
            failing_for_ms = since.elapsed().as_millis() as u64,
            "appends succeed again"
        );
        self.total = 0;
        self.since_report = 0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first failure is logged, the next ones only once per interval, and the recovery once.
    #[test]
    fn failures_are_said_once_then_counted() {
        let mut f = FailureLog::default();
        let e = StoreError::DiskFull("no space".into());
        let t0 = Instant::now();
        assert!(f.failed_at(&e, t0));
        let logged = (1..1000)
            .filter(|i| f.failed_at(&e, t0 + Duration::from_millis(*i)))
            .count();
        assert_eq!(logged, 0);
        assert!(f.failed_at(&e, t0 + FAILURE_REPORT_INTERVAL));
        assert_eq!(f.since_report, 0);
        assert!(f.succeeded());
        assert!(!f.succeeded(), "a second success says nothing");
        assert!(
            f.failed_at(&e, t0),
            "a new failure after recovery is said again"
        );
    }
}
