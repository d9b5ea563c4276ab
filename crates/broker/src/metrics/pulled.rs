//! The pull offsets (Java's `ConsumerOffsetManager.pullOffsetTable`): per topic, consumer group
//! and queue, the next offset after the messages the queue's owner shard last answered the
//! group's pull with. The consumer metrics read them (inflight = pull − committed, ready =
//! max − pull, queueing latency) and so does GET_CONSUME_STATS' `pullOffset`; like Java's they
//! are not persisted.
//!
//! They live in a thread-local of the owner shard, as `record`'s figures do: noting a pull costs
//! three hash lookups by the borrowed topic, group and queue id, and only the first pull of a
//! (topic, group, queue) allocates its entry. `PULLED_MAX` entries bound the table; past it a
//! new queue's pull offset is not kept (counted in `dropped`), and its figures fall back to the
//! committed offset as Java's do for a group without a pull offset. A reset of a queue's
//! committed offset (222) forgets its pull offset (the next pull notes it again), and a group's
//! deletion with its offsets (207) or a topic's deletion forget theirs.

use std::cell::RefCell;

use hashbrown::HashMap;

/// Most (topic, group, queue) pull offsets one shard keeps.
pub const PULLED_MAX: usize = 100_000;

/// topic -> consumer group -> queue id -> next offset.
type Table = HashMap<Box<str>, HashMap<Box<str>, HashMap<u32, u64>>>;

#[derive(Default)]
struct Pulled {
    table: Table,
    /// Queue entries in `table`.
    entries: usize,
    /// Pulls not noted because the table was full.
    dropped: u64,
}

thread_local! {
    static PULLED: RefCell<Pulled> = RefCell::new(Pulled::default());
}

/// The owner shard answered `group`'s pull of `topic`'s queue `queue_id`; the group's next pull
/// starts at `next`.
pub fn note(topic: &str, group: &str, queue_id: u32, next: u64) {
    PULLED.with(|p| {
        let p = &mut *p.borrow_mut();
        if let Some(off) = p
            .table
            .get_mut(topic)
            .and_then(|g| g.get_mut(group))
            .and_then(|q| q.get_mut(&queue_id))
        {
            *off = next;
            return;
        }
        if p.entries >= PULLED_MAX {
            p.dropped += 1;
            return;
        }
        let groups = match p.table.get_mut(topic) {
            Some(g) => g,
            None => p.table.entry(topic.into()).or_default(),
        };
        let queues = match groups.get_mut(group) {
            Some(q) => q,
            None => groups.entry(group.into()).or_default(),
        };
        queues.insert(queue_id, next);
        p.entries += 1;
    })
}

/// The pull offset of `group` on `topic`'s queue `queue_id`, if this shard noted one.
pub fn get(topic: &str, group: &str, queue_id: u32) -> Option<u64> {
    PULLED.with(|p| {
        p.borrow()
            .table
            .get(topic)
            .and_then(|g| g.get(group))
            .and_then(|q| q.get(&queue_id))
            .copied()
    })
}

/// Forgets `group`'s pull offset on `topic`'s queue `queue_id` (its committed offset was reset).
pub fn forget_queue(topic: &str, group: &str, queue_id: u32) {
    PULLED.with(|p| {
        let p = &mut *p.borrow_mut();
        let Some(groups) = p.table.get_mut(topic) else {
            return;
        };
        let Some(queues) = groups.get_mut(group) else {
            return;
        };
        if queues.remove(&queue_id).is_some() {
            p.entries -= 1;
        }
        if queues.is_empty() {
            groups.remove(group);
        }
        if groups.is_empty() {
            p.table.remove(topic);
        }
    })
}

/// Forgets every pull offset of `group`.
pub fn forget_group(group: &str) {
    PULLED.with(|p| {
        let p = &mut *p.borrow_mut();
        let mut gone = 0;
        p.table.retain(|_, groups| {
            gone += groups.remove(group).map_or(0, |q| q.len());
            !groups.is_empty()
        });
        p.entries -= gone;
    })
}

/// Forgets every pull offset on `topic`.
pub fn forget_topic(topic: &str) {
    PULLED.with(|p| {
        let p = &mut *p.borrow_mut();
        if let Some(groups) = p.table.remove(topic) {
            p.entries -= groups.values().map(HashMap::len).sum::<usize>();
        }
    })
}

/// Every (topic, group, queue id, pull offset) this shard keeps, for a scrape.
pub fn all() -> Vec<(String, String, u32, u64)> {
    PULLED.with(|p| {
        let p = p.borrow();
        let mut out = Vec::with_capacity(p.entries);
        for (topic, groups) in &p.table {
            for (group, queues) in groups {
                for (&qid, &off) in queues {
                    out.push((topic.to_string(), group.to_string(), qid, off));
                }
            }
        }
        out
    })
}

/// Pulls not noted because the table was full.
pub fn dropped() -> u64 {
    PULLED.with(|p| p.borrow().dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A later pull replaces the queue's offset; forgetting a queue, a group or a topic removes
    /// exactly theirs; a full table keeps its entries and counts what it could not note.
    #[test]
    fn noted_replaced_forgotten_bounded() {
        note("T", "G", 0, 5);
        note("T", "G", 0, 9);
        note("T", "G", 1, 3);
        note("T", "H", 0, 4);
        note("U", "G", 0, 7);
        assert_eq!(get("T", "G", 0), Some(9));
        assert_eq!(get("T", "G", 2), None);
        forget_queue("T", "G", 1);
        assert_eq!(get("T", "G", 1), None);
        assert_eq!(get("T", "G", 0), Some(9));
        forget_group("G");
        assert_eq!((get("T", "G", 0), get("U", "G", 0)), (None, None));
        assert_eq!(get("T", "H", 0), Some(4));
        forget_topic("T");
        assert!(all().is_empty());
        PULLED.with(|p| assert_eq!(p.borrow().entries, 0));

        for q in 0..PULLED_MAX as u32 {
            note("T", "G", q, 1);
        }
        note("T", "G", PULLED_MAX as u32, 1);
        assert_eq!(get("T", "G", PULLED_MAX as u32), None);
        assert_eq!(dropped(), 1);
        note("T", "G", 0, 2);
        assert_eq!(get("T", "G", 0), Some(2), "a known queue is still noted");
        forget_topic("T");
        note("T", "G", PULLED_MAX as u32, 1);
        assert_eq!(get("T", "G", PULLED_MAX as u32), Some(1), "room again");
    }
}
