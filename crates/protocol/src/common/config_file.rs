//! Config files (topics.json, subscriptionGroup.json, consumerOffset.json, the name server's
//! kvConfig.json, ...) are replaced as RocketMQ 5 replaces them, so a crash mid-write leaves
//! either the old file or the new one, and the previous version stays as `.bak`.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes a config file the way RocketMQ 5 does: the old file becomes `.bak`, the new one is
/// written to a temporary name, fsynced and renamed into place. Blocking: call from a helper
/// thread, never on a shard.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with_mode(path, bytes, 0o666)
}

/// As [`write`], for a file holding secrets: the new file and its `.bak` are readable and
/// writable by the owner only (0600), whatever the umask.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with_mode(path, bytes, 0o600)
}

fn write_with_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    {
        // A temporary file left by a crash keeps its old mode: start from a fresh one.
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    if path.exists() {
        let bak = path.with_extension("json.bak");
        std::fs::copy(path, &bak)?;
        if mode != 0o666 {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&bak, std::fs::Permissions::from_mode(mode))?;
        }
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A private file and its backup are 0600; the old content is the backup.
    #[test]
    fn private_files_are_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config").join("users.json");
        write_private(&p, b"[1]").unwrap();
        write_private(&p, b"[2]").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"[2]");
        let bak = p.with_extension("json.bak");
        assert_eq!(std::fs::read(&bak).unwrap(), b"[1]");
        for f in [&p, &bak] {
            let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", f.display());
        }
    }
}
