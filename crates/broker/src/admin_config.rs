//! UPDATE_BROKER_CONFIG (25): an admin's change of broker settings while the broker runs, as
//! Java's `AdminBrokerProcessor.updateBrokerConfig` takes it (the body is Java `Properties`
//! text), limited to what ringmq can change at run time (`settings::RUNTIME_KEYS`).
//!
//! The request is all or nothing: Java's black-listed keys are refused with Java's
//! NO_PERMISSION remark; any other key ringmq cannot change while it runs, and any value that
//! does not parse, makes it INVALID_PARAMETER naming each such key, and nothing changes.
//! Otherwise shard 0 applies the change, and the request is answered once every shard has the
//! new settings; GET_BROKER_CONFIG (26) shows them from then on. When the broker was started from a
//! broker.conf (`-c`), the changed keys are written into that file, as Java persists its
//! configuration there: each key's line replaced, or appended, the rest of the file kept.
//! Without one the change lasts until the broker stops.

use std::path::Path;
use std::rc::Rc;

use crate::common::properties_text;
use crate::error::BrokerError;
use crate::protocol::codes::response_code as rc;
use crate::protocol::RemotingCommand;
use crate::runtime;
use crate::settings::{Settings, RUNTIME_KEYS};
use crate::shard::Shard;

/// Java's default `configBlackList` of the broker: keys no admin may change remotely.
const CONFIG_BLACK_LIST: [&str; 3] = ["brokerConfigPath", "rocketmqHome", "configBlackList"];

pub async fn update_broker_config(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let text = std::str::from_utf8(&cmd.body)
        .map_err(|_| BrokerError::InvalidParameter("the body is not UTF-8 text".into()))?;
    let pairs: Vec<(String, String)> = properties_text::parse(text);
    if pairs.is_empty() {
        return Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None));
    }
    if pairs
        .iter()
        .any(|(k, _)| CONFIG_BLACK_LIST.contains(&k.as_str()))
    {
        return Ok(RemotingCommand::response_for(
            cmd,
            rc::NO_PERMISSION,
            Some("Can not update config in black list.".into()),
        ));
    }
    let fixed: Vec<&str> = pairs
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !RUNTIME_KEYS.contains(k))
        .collect();
    if !fixed.is_empty() {
        return Err(BrokerError::InvalidParameter(format!(
            "ringmq cannot change these keys while it runs: {} (it can: {})",
            fixed.join(", "),
            RUNTIME_KEYS.join(", ")
        )));
    }
    let changed = shard
        .mesh
        .call(0, move |s0| async move {
            let new = s0
                .settings()
                .with_changes(&s0.ctx.cfg, &pairs)
                .map_err(|e| BrokerError::InvalidParameter(e.to_string()))?;
            s0.set_settings(new);
            tracing::info!(?pairs, "broker settings changed at run time");
            if let Some(path) = s0.ctx.cfg.broker_config_path.clone() {
                persist(path, pairs);
            }
            Ok::<Settings, BrokerError>(new)
        })
        .await??;
    // Answered once every shard has them: the admin's next request sees them wherever it goes.
    for i in 1..shard.mesh.len() {
        if i == shard.id {
            shard.set_settings(changed);
        } else {
            shard
                .mesh
                .call(i, move |s| async move { s.set_settings(changed) })
                .await?;
        }
    }
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

/// Writes the changed keys into broker.conf on a helper thread; a failure is logged.
fn persist(path: std::path::PathBuf, pairs: Vec<(String, String)>) {
    runtime::spawn(async move {
        let p = path.clone();
        let done = runtime::spawn_blocking(move || rewrite_config_file(&p, &pairs)).await;
        if let Err(e) = done {
            tracing::error!(path = %path.display(), error = %e, "cannot persist broker config");
        }
    });
}

/// `text` with each key's `key=value` line replaced (the first one; later duplicates dropped)
/// or appended, every other line kept as it was.
fn with_keys(text: &str, pairs: &[(String, String)]) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut written = vec![false; pairs.len()];
    for line in text.lines() {
        let parsed = properties_text::parse(line);
        let hit = parsed
            .first()
            .and_then(|(k, _)| pairs.iter().position(|(pk, _)| pk == k));
        match hit {
            Some(i) if !written[i] => {
                out.push_str(&format!("{}={}\n", pairs[i].0, pairs[i].1));
                written[i] = true;
            }
            Some(_) => {}
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    for (i, (k, v)) in pairs.iter().enumerate() {
        if !written[i] {
            out.push_str(&format!("{k}={v}\n"));
        }
    }
    out
}

/// Whether a broker.conf key holds a secret (credentials, a password, a key's passphrase).
fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["secret", "password", "credential"]
        .iter()
        .any(|w| k.contains(w))
}

/// The mode the rewritten file gets: the file's own, narrowed to 0600 when it holds a secret
/// (readable by the broker's user alone), so a rewrite never widens who may read it.
fn rewritten_mode(old_mode: u32, text: &str) -> u32 {
    let secret = properties_text::parse(text)
        .iter()
        .any(|(k, _)| is_secret_key(k));
    let mode = old_mode & 0o7777;
    if secret {
        mode & 0o600
    } else {
        mode
    }
}

/// Blocking: the file rewritten through a temporary file, fsynced and renamed into place, with
/// the file's mode kept (`rewritten_mode`).
fn rewrite_config_file(path: &Path, pairs: &[(String, String)]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let text = std::fs::read_to_string(path)?;
    let new_text = with_keys(&text, pairs);
    let mode = rewritten_mode(std::fs::metadata(path)?.permissions().mode(), &new_text);
    let tmp = path.with_extension("conf.tmp");
    {
        // Created unreadable by others, then set exactly (the umask may narrow the mode asked
        // for at creation).
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(new_text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{rewrite_config_file, rewritten_mode, with_keys};

    /// A rewrite keeps the file's mode, and narrows it to the owner when the file holds a
    /// secret.
    #[test]
    fn rewrite_keeps_the_mode_and_never_widens_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.conf");
        std::fs::write(&path, "brokerName=a\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let pairs = vec![("maxReconsumeTimes".to_string(), "3".to_string())];
        rewrite_config_file(&path, &pairs).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o640);
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("maxReconsumeTimes=3"));
        let secret = vec![(
            "innerClientAuthenticationCredentials".to_string(),
            r#"{"accessKey":"a","secretKey":"s"}"#.to_string(),
        )];
        rewrite_config_file(&path, &secret).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(rewritten_mode(0o644, "tls.server.keyPassword=x\n"), 0o600);
        assert_eq!(rewritten_mode(0o600, "brokerName=a\n"), 0o600);
        assert_eq!(rewritten_mode(0o644, "brokerName=a\n"), 0o644);
    }

    /// A changed key's line is replaced in place, a new key appended, comments and other keys
    /// kept.
    #[test]
    fn config_file_keeps_other_lines() {
        let text = "# broker\nbrokerName=a\nmaxReconsumeTimes = 16\nlistenPort=10911\n";
        let pairs = vec![
            ("maxReconsumeTimes".to_string(), "3".to_string()),
            ("longPollingEnable".to_string(), "false".to_string()),
        ];
        assert_eq!(
            with_keys(text, &pairs),
            "# broker\nbrokerName=a\nmaxReconsumeTimes=3\nlistenPort=10911\nlongPollingEnable=false\n"
        );
    }
}
