//! Where ringmq's threads run: one rule, used by the broker and by the benchmarks that measure
//! it as it runs. With pinning on and more than one core, the commit-log writer and its helper
//! threads (group commit, segment allocator) take the last core, the shards the others (shard
//! `i` on core `i % (cores - 1)`), and the ASYNC flusher runs on the first shard's core: its
//! writeback is spread over the shards' spare time instead of slowing every append on the
//! writer's core. With pinning off or one core, nothing is pinned.

/// The cores of one process's threads; `None` = left to the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CorePlan {
    cores: usize,
    pin: bool,
}

impl CorePlan {
    /// The plan for `cores` usable cores, pinning or not (`pinCores`).
    pub fn new(cores: usize, pin: bool) -> CorePlan {
        CorePlan { cores, pin }
    }

    /// The plan for this process's cores.
    pub fn for_this_process(pin: bool) -> CorePlan {
        CorePlan::new(super::available_cores(), pin)
    }

    fn pinning(&self) -> bool {
        self.pin && self.cores > 1
    }

    /// The writer's core, shared with its helper threads.
    pub fn writer_core(&self) -> Option<usize> {
        self.pinning().then(|| self.cores - 1)
    }

    /// The ASYNC flusher's core: the first shard's.
    pub fn flush_core(&self) -> Option<usize> {
        self.pinning().then_some(0)
    }

    /// Shard `i`'s core.
    pub fn shard_core(&self, i: usize) -> Option<usize> {
        self.pinning().then(|| i % (self.cores - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::CorePlan;

    /// The writer alone on the last core, shards round the others, the flusher on shard 0's.
    #[test]
    fn writer_last_shards_round_the_rest() {
        let p = CorePlan::new(4, true);
        assert_eq!(p.writer_core(), Some(3));
        assert_eq!(p.flush_core(), Some(0));
        let shards: Vec<_> = (0..5).map(|i| p.shard_core(i)).collect();
        assert_eq!(shards, vec![Some(0), Some(1), Some(2), Some(0), Some(1)]);
        for p in [CorePlan::new(1, true), CorePlan::new(8, false)] {
            assert_eq!(
                (p.writer_core(), p.flush_core(), p.shard_core(3)),
                (None, None, None)
            );
        }
    }
}
