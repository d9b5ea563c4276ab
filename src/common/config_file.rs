//! Config files (topics.json, subscriptionGroup.json, consumerOffset.json, the name server's
//! kvConfig.json, ...) are replaced as RocketMQ 5 replaces them, so a crash mid-write leaves
//! either the old file or the new one, and the previous version stays as `.bak`.

use std::io::Write;
use std::path::Path;

/// Writes a config file the way RocketMQ 5 does: the old file becomes `.bak`, the new one is
/// written to a temporary name, fsynced and renamed into place. Blocking: call from a helper
/// thread, never on a shard.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    if path.exists() {
        std::fs::copy(path, path.with_extension("json.bak"))?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
