//! What the transaction service knows of the half queue, owned by the shard that owns it.
//!
//! `half_progress` is the next half-queue offset not yet resolved: every offset below it was
//! decided, discarded, skipped, or put back as a newer copy by a check. Decisions above it wait in
//! `decided` until the offsets before them are resolved, so the progress RocketMQ persists (the
//! `CID_RMQ_SYS_TRANS` offsets of the half and op queues) moves as soon as it can. A check that
//! puts a half message back leaves two records of one transaction; `copies` remembers the newer
//! ones by UNIQ_KEY, so that a decision reached through any copy resolves all of them and the
//! message is delivered once. Pure bookkeeping: no I/O here.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::constants::MAX_PENDING_TRANSACTION_DECISIONS;

#[derive(Debug, Default)]
pub struct TransactionState {
    /// Next half offset not yet resolved.
    pub half_progress: u64,
    /// Decided half offsets at or past `half_progress`.
    decided: BTreeSet<u64>,
    /// Half offsets whose decision is being written right now.
    deciding: HashSet<u64>,
    /// Op records not yet passed by the op progress: op queue offset -> the largest half offset
    /// it names. The op progress is the first key (or `op_end` when empty).
    op_window: BTreeMap<u64, u64>,
    /// The op queue offset after the last op record taken in.
    op_end: u64,
    /// UNIQ_KEY -> half offsets of copies a check put back, for transactions still undecided.
    copies: HashMap<String, Vec<u64>>,
}

/// Why a decision cannot be taken for a half offset.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    AlreadyDecided,
    BeingDecided,
    TooManyPending,
}

impl TransactionState {
    pub fn new(half_progress: u64, op_progress: u64) -> Self {
        TransactionState {
            half_progress,
            op_end: op_progress,
            ..Default::default()
        }
    }

    /// The op queue offset below which every op record only names resolved half offsets.
    pub fn op_progress(&self) -> u64 {
        self.op_window.keys().next().copied().unwrap_or(self.op_end)
    }

    /// The op queue offset after the last op record taken in.
    pub fn op_end(&self) -> u64 {
        self.op_end
    }

    pub fn is_resolved(&self, half: u64) -> bool {
        half < self.half_progress || self.decided.contains(&half)
    }

    pub fn is_deciding(&self, half: u64) -> bool {
        self.deciding.contains(&half)
    }

    /// The half offsets one decision about `half` (UNIQ_KEY `uniq`) must resolve: `half` itself
    /// when it is open, and every open copy of the same transaction. Marks them as being decided.
    pub fn begin_decision(&mut self, half: u64, uniq: &str) -> Result<Vec<u64>, Refusal> {
        if self.deciding.contains(&half) {
            return Err(Refusal::BeingDecided);
        }
        let mut targets = Vec::new();
        if !self.is_resolved(half) {
            targets.push(half);
        }
        if let Some(copies) = self.copies.get(uniq) {
            for &c in copies {
                if c != half && !self.is_resolved(c) {
                    if self.deciding.contains(&c) {
                        return Err(Refusal::BeingDecided);
                    }
                    targets.push(c);
                }
            }
        }
        if targets.is_empty() {
            return Err(Refusal::AlreadyDecided);
        }
        if self.decided.len() + self.deciding.len() + targets.len()
            > MAX_PENDING_TRANSACTION_DECISIONS
        {
            return Err(Refusal::TooManyPending);
        }
        self.deciding.extend(targets.iter().copied());
        Ok(targets)
    }

    /// The decision's records could not be written: the offsets are open again.
    pub fn abort_decision(&mut self, targets: &[u64]) {
        for t in targets {
            self.deciding.remove(t);
        }
    }

    /// The decision's op record is stored at `op_offset`: its half offsets are resolved.
    pub fn finish_decision(&mut self, uniq: &str, targets: &[u64], op_offset: u64) {
        self.abort_decision(targets);
        self.copies.remove(uniq);
        self.take_op(op_offset, targets);
    }

    /// Takes in an op record (from a decision, or read back from the op queue at start).
    pub fn take_op(&mut self, op_offset: u64, halves: &[u64]) {
        for &h in halves {
            if h >= self.half_progress {
                self.decided.insert(h);
            }
        }
        let max = halves.iter().copied().max().unwrap_or(0);
        self.op_window.insert(op_offset, max);
        self.op_end = self.op_end.max(op_offset + 1);
        self.advance();
    }

    /// The check starts writing what resolves `halves` (open offsets from the progress on): a
    /// decision about one of them meanwhile is refused as being decided.
    pub fn begin_checks(&mut self, halves: &[u64]) -> bool {
        if halves
            .iter()
            .any(|h| self.is_resolved(*h) || self.deciding.contains(h))
        {
            return false;
        }
        self.deciding.extend(halves.iter().copied());
        true
    }

    /// The check's write for `halves` ended: on success each is resolved (with the half offset
    /// of the copy put back for its transaction, if any); on failure they stay open.
    pub fn end_checks(&mut self, halves: &[(u64, Option<String>, Option<u64>)], ok: bool) {
        for (h, _, _) in halves {
            self.deciding.remove(h);
        }
        if !ok {
            return;
        }
        for (h, uniq, copy) in halves {
            self.resolve(*h, uniq.as_deref(), *copy);
        }
        self.advance();
    }

    /// The check resolved `half` (put it back, discarded or skipped it); `copy` is the new half
    /// offset of a put-back copy of transaction `uniq`.
    pub fn resolve(&mut self, half: u64, uniq: Option<&str>, copy: Option<u64>) {
        if half >= self.half_progress {
            self.decided.insert(half);
        }
        if let Some(u) = uniq {
            match copy {
                Some(c) => self.copies.entry(u.to_owned()).or_default().push(c),
                None => {
                    self.copies.remove(u);
                }
            }
        }
        self.advance();
    }

    /// Moves `half_progress` to the half queue's min offset when retention removed what it
    /// pointed at.
    pub fn skip_to(&mut self, half: u64) {
        if half > self.half_progress {
            self.half_progress = half;
            self.advance();
        }
    }

    /// Remembers the copies of one transaction found at start (several records, one UNIQ_KEY).
    pub fn add_copies(&mut self, uniq: String, offsets: Vec<u64>) {
        self.copies.insert(uniq, offsets);
    }

    /// Moves the progress past decided offsets, and the op progress past op records that name
    /// only resolved offsets.
    fn advance(&mut self) {
        while self.decided.remove(&self.half_progress) {
            self.half_progress += 1;
        }
        let stale: Vec<u64> = self.decided.range(..self.half_progress).copied().collect();
        for s in stale {
            self.decided.remove(&s);
        }
        while let Some((&op, &max)) = self.op_window.iter().next() {
            if max >= self.half_progress {
                break;
            }
            self.op_window.remove(&op);
        }
        if !self.copies.is_empty() {
            let progress = self.half_progress;
            self.copies.retain(|_, v| {
                v.retain(|&c| c >= progress);
                !v.is_empty()
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decisions out of order wait above the progress; the progress and the op progress move
    /// once the gap is filled.
    #[test]
    fn progress_follows_decisions() {
        let mut s = TransactionState::new(0, 0);
        let t = s.begin_decision(1, "B").unwrap();
        s.finish_decision("B", &t, 0);
        assert_eq!(s.half_progress, 0);
        assert_eq!(s.op_progress(), 0);
        let t = s.begin_decision(0, "A").unwrap();
        s.finish_decision("A", &t, 1);
        assert_eq!(s.half_progress, 2);
        assert_eq!(s.op_progress(), 2);
        assert_eq!(s.begin_decision(0, "A"), Err(Refusal::AlreadyDecided));
        assert_eq!(s.begin_decision(1, "B"), Err(Refusal::AlreadyDecided));
    }

    /// A decision on the original of a put-back message resolves its copy too, and the copy
    /// cannot be decided again (the message is delivered once).
    #[test]
    fn decision_resolves_copies() {
        let mut s = TransactionState::new(0, 0);
        // The check put offset 0 back as offset 5.
        assert!(s.begin_checks(&[0]));
        s.end_checks(&[(0, Some("U".into()), Some(5))], true);
        assert_eq!(s.half_progress, 1);
        let t = s.begin_decision(0, "U").unwrap();
        assert_eq!(t, vec![5]);
        s.finish_decision("U", &t, 0);
        assert_eq!(s.begin_decision(5, "U"), Err(Refusal::AlreadyDecided));
        assert_eq!(s.begin_decision(0, "U"), Err(Refusal::AlreadyDecided));
    }

    /// A second decision while the first is being written is refused, and an aborted decision
    /// leaves the offset open.
    #[test]
    fn concurrent_and_aborted_decisions() {
        let mut s = TransactionState::new(3, 0);
        let t = s.begin_decision(3, "A").unwrap();
        assert_eq!(s.begin_decision(3, "A"), Err(Refusal::BeingDecided));
        s.abort_decision(&t);
        assert!(s.begin_decision(3, "A").is_ok());
    }

    /// A check over several offsets resolves them all, or none when its write failed; a
    /// decision about one of them meanwhile is refused.
    #[test]
    fn batched_checks() {
        let mut s = TransactionState::new(0, 0);
        assert!(s.begin_checks(&[0, 1, 2]));
        assert_eq!(s.begin_decision(1, "B"), Err(Refusal::BeingDecided));
        assert!(!s.begin_checks(&[2]));
        s.end_checks(&[(0, None, None), (1, None, None), (2, None, None)], false);
        assert_eq!(s.half_progress, 0);
        assert!(s.begin_checks(&[0, 1, 2]));
        s.end_checks(&[(0, None, None), (1, None, None), (2, None, None)], true);
        assert_eq!(s.half_progress, 3);
    }

    /// Op records read back at start rebuild the decided set.
    #[test]
    fn ops_read_back() {
        let mut s = TransactionState::new(10, 4);
        s.take_op(4, &[12]);
        s.take_op(5, &[10, 11]);
        assert_eq!(s.half_progress, 13);
        assert_eq!(s.op_progress(), 6);
        assert_eq!(s.op_end(), 6);
    }
}
