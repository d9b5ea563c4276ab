//! TEMPORARY stand-in for the CQ worker's `consume_queue` and `index_file` modules, written to
//! the shared contract's signatures so the writer and recovery compile and can be tested before
//! that work is merged. DELETE this file at merge and switch the re-exports in `store/mod.rs`.
//!
//! Simplified on purpose: one growing file per queue (no preallocation, no multi-file roll), an
//! in-memory index. Same on-disk unit layout (20 bytes, big-endian) and the same semantics for
//! `put` (idempotent below max, blank-filled gaps), `truncate_dirty` and `max_phy_offset`.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::store::StoreError;

pub const CQ_UNIT_SIZE: u64 = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqUnit {
    pub phy_offset: u64,
    pub size: u32,
    pub tags_code: i64,
}

pub struct ConsumeQueue {
    topic: String,
    queue_id: u32,
    path: PathBuf,
    file: File,
    units: Vec<CqUnit>,
}

const BLANK: CqUnit = CqUnit {
    phy_offset: 0,
    size: i32::MAX as u32,
    tags_code: 0,
};

fn encode_unit(u: CqUnit) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[0..8].copy_from_slice(&u.phy_offset.to_be_bytes());
    b[8..12].copy_from_slice(&u.size.to_be_bytes());
    b[12..20].copy_from_slice(&u.tags_code.to_be_bytes());
    b
}

impl ConsumeQueue {
    pub fn open(
        store_root: &Path,
        topic: &str,
        queue_id: u32,
        _file_size: u64,
    ) -> Result<Self, StoreError> {
        let dir = store_root
            .join("consumequeue")
            .join(topic)
            .join(queue_id.to_string());
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
        let path = dir.join("00000000000000000000");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        let raw = std::fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
        let mut units = Vec::new();
        for c in raw.chunks_exact(20) {
            let phy = i64::from_be_bytes(c[0..8].try_into().expect("8 bytes"));
            let size = i32::from_be_bytes(c[8..12].try_into().expect("4 bytes"));
            if phy < 0 || size <= 0 || (phy == 0 && size == 0) {
                break;
            }
            units.push(CqUnit {
                phy_offset: phy as u64,
                size: size as u32,
                tags_code: i64::from_be_bytes(c[12..20].try_into().expect("8 bytes")),
            });
        }
        Ok(ConsumeQueue {
            topic: topic.to_string(),
            queue_id,
            path,
            file,
            units,
        })
    }
    pub fn topic(&self) -> &str {
        &self.topic
    }
    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }
    pub fn min_offset(&self) -> u64 {
        0
    }
    pub fn max_offset(&self) -> u64 {
        self.units.len() as u64
    }
    pub fn put(&mut self, queue_offset: u64, unit: CqUnit) -> Result<(), StoreError> {
        if queue_offset < self.max_offset() {
            return Ok(());
        }
        while self.max_offset() < queue_offset {
            self.write_at(self.max_offset(), BLANK)?;
            self.units.push(BLANK);
        }
        self.write_at(queue_offset, unit)?;
        self.units.push(unit);
        Ok(())
    }
    fn write_at(&self, queue_offset: u64, unit: CqUnit) -> Result<(), StoreError> {
        self.file
            .write_all_at(&encode_unit(unit), queue_offset * CQ_UNIT_SIZE)
            .map_err(|e| StoreError::io(&self.path, e))
    }
    pub fn get(&self, queue_offset: u64) -> Option<CqUnit> {
        self.units
            .get(queue_offset as usize)
            .copied()
            .filter(|u| *u != BLANK)
    }
    pub fn max_phy_offset(&self) -> Option<u64> {
        self.units
            .iter()
            .rev()
            .find(|u| **u != BLANK)
            .map(|u| u.phy_offset + u64::from(u.size))
    }
    pub fn truncate_dirty(&mut self, phy_limit: u64) -> Result<(), StoreError> {
        while let Some(u) = self.units.last() {
            if *u != BLANK && u.phy_offset + u64::from(u.size) <= phy_limit {
                break;
            }
            self.units.pop();
        }
        self.file
            .set_len(self.units.len() as u64 * CQ_UNIT_SIZE)
            .map_err(|e| StoreError::io(&self.path, e))
    }
    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.file
            .sync_data()
            .map_err(|e| StoreError::io(&self.path, e))
    }
}

pub fn list_queues(store_root: &Path) -> Result<Vec<(String, u32)>, StoreError> {
    let root = store_root.join("consumequeue");
    let mut out = Vec::new();
    let Ok(topics) = std::fs::read_dir(&root) else {
        return Ok(out);
    };
    for t in topics {
        let t = t.map_err(|e| StoreError::io(&root, e))?;
        let Some(topic) = t.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let qs = std::fs::read_dir(t.path()).map_err(|e| StoreError::io(t.path(), e))?;
        for q in qs {
            let q = q.map_err(|e| StoreError::io(t.path(), e))?;
            if let Some(id) = q.file_name().to_str().and_then(|s| s.parse().ok()) {
                out.push((topic.clone(), id));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// In-memory stand-in of the index service (no files).
pub struct IndexService {
    keys: HashMap<String, Vec<(u64, i64)>>,
    max_phy: u64,
}

impl IndexService {
    pub fn open(_store_root: &Path, _slots: u32, _num: u32) -> Result<Self, StoreError> {
        Ok(IndexService {
            keys: HashMap::new(),
            max_phy: 0,
        })
    }
    pub fn put(
        &mut self,
        topic: &str,
        keys: &[&str],
        phy_offset: u64,
        store_timestamp: i64,
    ) -> Result<(), StoreError> {
        for k in keys {
            self.keys
                .entry(format!("{topic}#{k}"))
                .or_default()
                .push((phy_offset, store_timestamp));
        }
        self.max_phy = self.max_phy.max(phy_offset);
        Ok(())
    }
    pub fn query(&self, topic: &str, key: &str, max: usize, begin: i64, end: i64) -> Vec<u64> {
        self.keys
            .get(&format!("{topic}#{key}"))
            .map(|v| {
                v.iter()
                    .rev()
                    .filter(|(_, ts)| *ts >= begin && *ts <= end)
                    .map(|(p, _)| *p)
                    .take(max)
                    .collect()
            })
            .unwrap_or_default()
    }
    pub fn truncate_after(&mut self, _ts: i64) -> Result<(), StoreError> {
        Ok(())
    }
    pub fn max_phy_offset(&self) -> u64 {
        self.max_phy
    }
    pub fn flush(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}
