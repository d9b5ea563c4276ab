//! The writer's batch figures, read by the metrics endpoint: how many batches it wrote, the
//! appends, records and bytes they carried, and how many records each batch held (a
//! histogram). Only the writer thread writes them, with relaxed atomic adds (no lock); a scrape
//! reads them from a shard.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Upper bounds of the records-per-batch buckets; one more bucket holds larger batches.
pub const BATCH_RECORD_BOUNDS: [u64; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

#[derive(Debug, Default)]
pub struct BatchStats {
    batches: AtomicU64,
    appends: AtomicU64,
    records: AtomicU64,
    bytes: AtomicU64,
    /// Batches by record count, per bucket (not cumulative); the last is past every bound.
    by_records: [AtomicU64; BATCH_RECORD_BOUNDS.len() + 1],
}

/// A reading of [`BatchStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchFigures {
    pub batches: u64,
    pub appends: u64,
    pub records: u64,
    pub bytes: u64,
    pub by_records: [u64; BATCH_RECORD_BOUNDS.len() + 1],
}

impl BatchStats {
    /// One written batch (the writer thread only).
    pub fn record(&self, appends: usize, records: usize, bytes: u64) {
        self.batches.fetch_add(1, Relaxed);
        self.appends.fetch_add(appends as u64, Relaxed);
        self.records.fetch_add(records as u64, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
        let slot = BATCH_RECORD_BOUNDS
            .iter()
            .position(|b| records as u64 <= *b)
            .unwrap_or(BATCH_RECORD_BOUNDS.len());
        self.by_records[slot].fetch_add(1, Relaxed);
    }

    pub fn read(&self) -> BatchFigures {
        let mut by_records = [0; BATCH_RECORD_BOUNDS.len() + 1];
        for (o, a) in by_records.iter_mut().zip(self.by_records.iter()) {
            *o = a.load(Relaxed);
        }
        BatchFigures {
            batches: self.batches.load(Relaxed),
            appends: self.appends.load(Relaxed),
            records: self.records.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            by_records,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_land_in_their_buckets() {
        let s = BatchStats::default();
        s.record(1, 1, 100);
        s.record(3, 5, 500);
        s.record(2, 1000, 10_000);
        let f = s.read();
        assert_eq!(
            (f.batches, f.appends, f.records, f.bytes),
            (3, 6, 1006, 10_600)
        );
        assert_eq!(f.by_records[0], 1, "1 record: the first bucket");
        assert_eq!(f.by_records[3], 1, "5 records: up to 8");
        assert_eq!(f.by_records[BATCH_RECORD_BOUNDS.len()], 1, "past 256");
        assert_eq!(f.by_records.iter().sum::<u64>(), 3);
    }
}
