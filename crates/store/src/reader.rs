//! CommitLogReader: read-only view of commit-log segments for one shard (pull, query, view).
//!
//! Each shard owns one. Segments are opened by file name (20-digit start offset) and mapped
//! read-only; a small LRU cache keeps the recently used ones. Invariant: callers ask only for
//! ranges below the writer's published `max_phy_offset` (the reader cannot know the frontier
//! itself); a deleted segment (retention) reads as `OffsetNotFound`.
//!
//! A retired segment's file may come back as a new segment (`store::recycle`), so a cached
//! mapping of it could show another segment's bytes. With the writer's published minimum
//! (`with_min_phy`) every read below it is refused and the stale cache entries dropped, and a
//! `SegmentRange` can tell (`is_live`) whether its bytes are still the ones asked for, which
//! the zero-copy writes check before every syscall that reads the file.
//!
//! A truncation of the running log (`WriterSender::try_truncate_to`) unlinks segments that are
//! created again, under the same names, as the log grows back: the writer then bumps
//! `ReadBounds::truncations`, and a reader that sees it change drops every cached mapping, and
//! ranges handed out before stop being live.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use memmap2::{Mmap, MmapOptions};

use crate::commit_log::list_segments;
use crate::constants::READER_CACHE_SEGMENTS;
use crate::mapped_file::segment_file_name;
use crate::StoreError;

/// What the writer publishes for the readers of its segments.
#[derive(Debug, Default)]
pub struct ReadBounds {
    /// The first byte still in the commit log (retention moves it).
    pub min_phy: AtomicU64,
    /// How many times the running log was truncated back: segment files may have been
    /// replaced by new ones with the same names.
    pub truncations: AtomicU64,
}

struct CachedSegment {
    start: u64,
    /// File and mapping are shared with in-progress zero-copy writes, so evicting the segment
    /// never closes an fd or unmaps memory they still use.
    file: Arc<File>,
    map: Arc<Mmap>,
    last_use: u64,
}

/// One commit-log range handed to a zero-copy write: the segment's file (for sendfile) and
/// mapping (for vmsplice), kept alive by this handle, and where the range starts in them.
pub struct SegmentRange {
    pub file: Arc<File>,
    map: Arc<Mmap>,
    pub offset: u64,
    pub len: u32,
    /// Commit-log position of the range, and the published minimum it must stay above.
    phy: u64,
    bounds: Option<Arc<ReadBounds>>,
    /// `bounds.truncations` when the range was located.
    truncations: u64,
}

/// A commit-log range is what the broker's zero-copy bodies are made of.
impl crate::runtime::net::FileRange for SegmentRange {
    fn fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&*self.file)
    }
    fn file_offset(&self) -> u64 {
        self.offset
    }
    fn size(&self) -> u32 {
        self.len
    }
    fn bytes(&self) -> &[u8] {
        SegmentRange::bytes(self)
    }
    fn is_live(&self) -> bool {
        SegmentRange::is_live(self)
    }
}

impl SegmentRange {
    /// False once retention has taken the range's segment out of the log: its file may be
    /// reused, so bytes not yet handed to the kernel must not be read from it any more.
    /// (Pages already spliced into a pipe or socket keep their content: reuse detaches them.)
    pub fn is_live(&self) -> bool {
        self.bounds.as_ref().is_none_or(|b| {
            self.phy >= b.min_phy.load(Ordering::Acquire)
                && self.truncations == b.truncations.load(Ordering::Acquire)
        })
    }

    /// The range's bytes in the read-only mapping.
    pub fn bytes(&self) -> &[u8] {
        let start = self.offset as usize;
        &self.map[start..start + self.len as usize]
    }
}

pub struct CommitLogReader {
    dir: PathBuf,
    segment_size: u64,
    cache: Vec<CachedSegment>,
    tick: u64,
    /// The writer's published minimum physical offset and truncation count (None: no check,
    /// for tools and tests that run without a writer).
    bounds: Option<Arc<ReadBounds>>,
    /// `bounds.truncations` when the cache was last checked.
    truncations: u64,
}

impl CommitLogReader {
    pub fn new(store_root: &Path, segment_size: u64) -> Self {
        assert!(segment_size > 0, "segment size must be positive");
        CommitLogReader {
            dir: store_root.join("commitlog"),
            segment_size,
            cache: Vec::with_capacity(READER_CACHE_SEGMENTS),
            tick: 0,
            bounds: None,
            truncations: 0,
        }
    }

    /// A reader that refuses ranges below the writer's published minimum and forgets its
    /// mappings after a truncation (`bounds`, from `WriterSender::min_phy_watch`).
    pub fn with_min_phy(store_root: &Path, segment_size: u64, bounds: Arc<ReadBounds>) -> Self {
        let truncations = bounds.truncations.load(Ordering::Acquire);
        CommitLogReader {
            bounds: Some(bounds),
            truncations,
            ..Self::new(store_root, segment_size)
        }
    }

    fn segment(&mut self, phy_offset: u64, size: u32) -> Result<(usize, usize), StoreError> {
        let start = phy_offset - phy_offset % self.segment_size;
        let off = (phy_offset - start) as usize;
        if phy_offset + u64::from(size) > start + self.segment_size {
            return Err(StoreError::Invalid(format!(
                "range {phy_offset}+{size} crosses a segment boundary"
            )));
        }
        if let Some(b) = self.bounds.as_ref() {
            let truncations = b.truncations.load(Ordering::Acquire);
            if truncations != self.truncations {
                self.cache.clear();
                self.truncations = truncations;
            }
        }
        if let Some(min) = self
            .bounds
            .as_ref()
            .map(|b| b.min_phy.load(Ordering::Acquire))
        {
            if phy_offset < min {
                let size = self.segment_size;
                self.cache.retain(|c| c.start + size > min);
                return Err(StoreError::OffsetNotFound(phy_offset));
            }
        }
        self.tick += 1;
        if let Some(i) = self.cache.iter().position(|c| c.start == start) {
            self.cache[i].last_use = self.tick;
            return Ok((i, off));
        }
        let path = self.dir.join(segment_file_name(start));
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::OffsetNotFound(phy_offset))
            }
            Err(e) => return Err(StoreError::io(&path, e)),
        };
        // SAFETY: read-only map of a segment that is never truncated while the store runs;
        // callers read only bytes below the published frontier, which the writer no longer
        // changes (a rolled-back batch is never published).
        let map = unsafe { MmapOptions::new().map(&file) }.map_err(|e| StoreError::io(&path, e))?;
        if (map.len() as u64) < self.segment_size {
            return Err(StoreError::Corrupt {
                path,
                offset: 0,
                reason: format!("segment shorter than {} bytes", self.segment_size),
            });
        }
        let seg = CachedSegment {
            start,
            file: Arc::new(file),
            map: Arc::new(map),
            last_use: self.tick,
        };
        if self.cache.len() == READER_CACHE_SEGMENTS {
            let lru = (0..self.cache.len())
                .min_by_key(|&i| self.cache[i].last_use)
                .expect("cache is full, so not empty");
            self.cache[lru] = seg;
            return Ok((lru, off));
        }
        self.cache.push(seg);
        Ok((self.cache.len() - 1, off))
    }

    /// The bytes `[phy_offset, phy_offset+size)`; the range must lie inside one segment.
    pub fn read(&mut self, phy_offset: u64, size: u32) -> Result<&[u8], StoreError> {
        let (i, off) = self.segment(phy_offset, size)?;
        Ok(&self.cache[i].map[off..off + size as usize])
    }

    /// For zero-copy writes: a handle on the range that stays valid even if the cache evicts
    /// the segment meanwhile (no dup per range).
    pub fn locate(&mut self, phy_offset: u64, size: u32) -> Result<SegmentRange, StoreError> {
        let (i, off) = self.segment(phy_offset, size)?;
        let seg = &self.cache[i];
        Ok(SegmentRange {
            file: seg.file.clone(),
            map: seg.map.clone(),
            offset: off as u64,
            len: size,
            phy: phy_offset,
            bounds: self.bounds.clone(),
            truncations: self.truncations,
        })
    }

    /// Start of the oldest segment on disk (0 for an empty store).
    pub fn min_phy_offset(&mut self) -> u64 {
        match list_segments(&self.dir) {
            Ok(v) => v.first().map_or(0, |(s, _)| *s),
            Err(e) => {
                tracing::warn!(error = %e, "listing commit-log segments");
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEG: u64 = 64 << 10;

    /// Proves a reader with the writer's minimum refuses ranges below it once it moves, drops
    /// its cached mapping of the retired segment, and that a range handed out before tells it is
    /// no longer live (its file may be reused).
    #[test]
    fn reads_below_the_published_minimum_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cl = dir.path().join("commitlog");
        std::fs::create_dir_all(&cl).unwrap();
        for (i, fill) in [(0u64, 1u8), (1, 2)] {
            std::fs::write(
                cl.join(segment_file_name(i * SEG)),
                vec![fill; SEG as usize],
            )
            .unwrap();
        }
        let bounds = Arc::new(ReadBounds::default());
        let min = &bounds.min_phy;
        let mut r = CommitLogReader::with_min_phy(dir.path(), SEG, bounds.clone());
        assert_eq!(r.read(10, 4).unwrap(), &[1; 4]);
        let range = r.locate(10, 4).unwrap();
        assert!(range.is_live());
        assert_eq!(r.read(SEG + 10, 4).unwrap(), &[2; 4]);
        assert_eq!(r.cache.len(), 2);
        min.store(SEG, Ordering::Release);
        assert!(!range.is_live(), "its segment was retired");
        assert!(matches!(r.read(10, 4), Err(StoreError::OffsetNotFound(10))));
        assert_eq!(r.cache.len(), 1, "the retired segment's mapping is dropped");
        assert_eq!(r.read(SEG + 10, 4).unwrap(), &[2; 4]);
        // Without the minimum (tools, tests) nothing is checked.
        let mut plain = CommitLogReader::new(dir.path(), SEG);
        assert_eq!(plain.read(10, 4).unwrap(), &[1; 4]);
        assert!(plain.locate(10, 4).unwrap().is_live());
    }
}
