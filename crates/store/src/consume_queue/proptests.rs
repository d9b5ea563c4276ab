//! Model test: random puts (with gaps and duplicates), reopens, truncations and expiries against
//! a Vec model, on 5-unit files so every run crosses file boundaries. Case count from
//! PROPTEST_CASES, 16 by default to keep `cargo test` quick.

use proptest::prelude::*;

use super::*;

const FS: u64 = 100;

#[derive(Clone, Debug)]
enum Op {
    /// Put at max_offset + gap with the given size.
    Put {
        gap: u64,
        size: u32,
    },
    /// Put again at an offset below max (scaled into range).
    Dup(u64),
    Reopen,
    Flush,
    /// Truncate at this fraction (per mille) of the next phy offset.
    Truncate(u64),
    /// Expire below this fraction (per mille) of the next phy offset.
    Expire(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (prop_oneof![6 => Just(0u64), 1 => 1u64..4, 1 => 4u64..14], 1u32..50)
            .prop_map(|(gap, size)| Op::Put { gap, size }),
        1 => any::<u64>().prop_map(Op::Dup),
        1 => Just(Op::Reopen),
        1 => Just(Op::Flush),
        1 => (0u64..=1000).prop_map(Op::Truncate),
        1 => (0u64..=1000).prop_map(Op::Expire),
    ]
}

/// What the queue should hold: `units[q]` is Some(unit) or None (blank / never written).
struct Model {
    units: Vec<Option<CqUnit>>,
    /// Offsets below this are not readable (expired or before the first message).
    min: u64,
    /// First offset of the first file; a truncation never goes below it.
    floor: Option<u64>,
    next_phy: u64,
}

impl Model {
    fn max(&self) -> u64 {
        self.units.len() as u64
    }

    fn get(&self, q: u64) -> Option<CqUnit> {
        if q < self.min {
            return None;
        }
        self.units.get(q as usize).copied().flatten()
    }

    fn has_messages(&self) -> bool {
        (self.min..self.max()).any(|q| self.get(q).is_some())
    }

    fn max_phy(&self) -> Option<u64> {
        let floor = self.floor.unwrap_or(0) as usize;
        self.units
            .iter()
            .skip(floor)
            .rev()
            .flatten()
            .next()
            .map(|u| u.end())
    }
}

fn check(cq: &ConsumeQueue, m: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(cq.max_offset(), m.max());
    prop_assert_eq!(cq.max_phy_offset(), m.max_phy());
    if m.has_messages() {
        let first = (m.min..m.max()).find(|&q| m.get(q).is_some()).unwrap();
        prop_assert_eq!(cq.min_offset(), first);
    }
    for q in 0..m.max() + 3 {
        prop_assert_eq!(cq.get(q), m.get(q), "offset {}", q);
    }
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let open = || ConsumeQueue::open(dir.path(), "P", 0, FS).unwrap();
    let mut cq = open();
    let mut m = Model {
        units: Vec::new(),
        min: 0,
        floor: None,
        next_phy: 0,
    };
    for op in ops {
        match op {
            Op::Put { gap, size } => {
                let q = m.max() + gap;
                let u = CqUnit {
                    phy_offset: m.next_phy,
                    size,
                    tags_code: q as i64 - 7,
                };
                cq.put(q, u).unwrap();
                let floor = *m
                    .floor
                    .get_or_insert(q * CQ_UNIT_SIZE / FS * FS / CQ_UNIT_SIZE);
                if !m.has_messages() {
                    m.min = q;
                }
                m.units.resize(q as usize, None);
                for slot in m.units.iter_mut().take(floor as usize) {
                    *slot = None;
                }
                m.units.push(Some(u));
                m.next_phy += u64::from(size);
            }
            Op::Dup(x) if m.max() > 0 => {
                let q = x % m.max();
                let u = CqUnit {
                    phy_offset: 1 << 40,
                    size: 1,
                    tags_code: 0,
                };
                cq.put(q, u).unwrap();
            }
            Op::Dup(_) => {}
            Op::Reopen => {
                cq.flush().unwrap();
                drop(cq);
                cq = open();
                // Reopen recounts min from the first file's first message (4.3).
                m.min = m.floor.unwrap_or(0);
            }
            Op::Flush => cq.flush().unwrap(),
            Op::Truncate(permille) => {
                let limit = m.next_phy * permille / 1000;
                cq.truncate_dirty(limit).unwrap();
                let floor = m.floor.unwrap_or(0) as usize;
                if m.max_phy().is_some_and(|end| end > limit) {
                    while m.units.len() > floor
                        && !m.units.last().unwrap().is_some_and(|u| u.end() <= limit)
                    {
                        m.units.pop();
                    }
                    m.min = m.min.min(m.max());
                }
                m.next_phy = m.next_phy.min(limit).max(m.max_phy().unwrap_or(0));
            }
            Op::Expire(permille) => {
                let min_phy = m.next_phy * permille / 1000;
                cq.delete_expired(min_phy).unwrap();
                // Whole files may go, but what matters to readers is the new min_offset.
                let from = m.min.max(m.floor.unwrap_or(0));
                m.min = (from..m.max())
                    .find(|&q| m.get(q).is_some_and(|u| u.phy_offset >= min_phy))
                    .unwrap_or(m.max());
                if let Some(first) = cq.files.first() {
                    m.floor = Some(first.start / CQ_UNIT_SIZE);
                }
            }
        }
        check(&cq, &m)?;
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Proves the queue and a Vec agree after any sequence of operations, including reopens.
    #[test]
    fn consume_queue_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops)?;
    }
}
