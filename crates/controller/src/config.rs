//! controller.conf: Java's `ControllerConfig` keys that a ringmq controller reads, parsed from
//! a `key=value` properties file. An unknown key, or a value that does not parse, is a start-up
//! error naming the key. Owned by `ringmq controller`; the flags that may change at run time
//! (UPDATE_CONTROLLER_CONFIG) are listed in `UPDATABLE_KEYS`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// One Raft peer: its DLedger-style id (`n0`), the openraft node id derived from it, and the
/// address that serves both Raft and brokers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub id: String,
    pub node_id: u64,
    pub addr: SocketAddr,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerConfig {
    pub group: String,
    /// Sorted by id; `node_id` is the position in this order, so every controller given the
    /// same peer list derives the same ids.
    pub peers: Vec<Peer>,
    pub self_id: String,
    pub store_path: PathBuf,
    pub scan_not_active_broker_interval_ms: u64,
    /// How often the leader looks for groups whose master is dead, and how long a freshly
    /// started controller waits before the first look (brokers must first be heard from).
    pub scan_inactive_master_interval_ms: u64,
    pub notify_broker_role_changed: bool,
    pub enable_elect_unclean_master: bool,
    pub elect_master_max_retry_count: u32,
}

/// Keys UPDATE_CONTROLLER_CONFIG may change on a running controller.
pub const UPDATABLE_KEYS: &[&str] = &[
    "notifyBrokerRoleChanged",
    "enableElectUncleanMaster",
    "electMasterMaxRetryCount",
];

/// Keys read from the file; anything else is refused.
const KNOWN_KEYS: &[&str] = &[
    "controllerDLegerGroup",
    "controllerDLegerPeers",
    "controllerDLegerSelfId",
    "controllerStorePath",
    "scanNotActiveBrokerInterval",
    "scanInactiveMasterInterval",
    "notifyBrokerRoleChanged",
    "enableElectUncleanMaster",
    "electMasterMaxRetryCount",
    "controllerType",
];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("unknown controller config key {0:?}")]
    UnknownKey(String),
    #[error("invalid value {value:?} for {key}: {why}")]
    Invalid {
        key: String,
        value: String,
        why: String,
    },
    #[error("{0} is required")]
    Missing(&'static str),
}

fn invalid(key: &str, value: &str, why: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        value: value.to_owned(),
        why: why.into(),
    }
}

/// Java's `Boolean.parseBoolean` is lenient; a config file deserves a clear error instead.
fn parse_bool(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, v, "expected true or false")),
    }
}

/// A scan interval: 100 ms to an hour.
fn interval_ms(key: &str, v: &str) -> Result<u64, ConfigError> {
    v.parse()
        .ok()
        .filter(|ms| (100..=3_600_000).contains(ms))
        .ok_or_else(|| invalid(key, v, "must be 100..=3600000 ms"))
}

/// `n0-127.0.0.1:9878;n1-127.0.0.1:9868`.
pub fn parse_peers(v: &str) -> Result<Vec<Peer>, ConfigError> {
    const KEY: &str = "controllerDLegerPeers";
    let mut peers: Vec<Peer> = Vec::new();
    for part in v.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) = part
            .split_once('-')
            .ok_or_else(|| invalid(KEY, v, format!("{part:?} is not id-host:port")))?;
        let addr: SocketAddr = addr
            .trim()
            .parse()
            .map_err(|e| invalid(KEY, v, format!("{addr:?}: {e}")))?;
        if peers.iter().any(|p| p.id == id) {
            return Err(invalid(KEY, v, format!("peer id {id:?} twice")));
        }
        peers.push(Peer {
            id: id.trim().to_owned(),
            node_id: 0,
            addr,
        });
    }
    if peers.is_empty() {
        return Err(invalid(KEY, v, "no peer"));
    }
    peers.sort_by(|a, b| a.id.cmp(&b.id));
    for (i, p) in peers.iter_mut().enumerate() {
        p.node_id = i as u64;
    }
    Ok(peers)
}

impl ControllerConfig {
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_properties(&text)
    }

    /// Parses `key=value` lines (`#` and `!` comments, blank lines ignored).
    pub fn from_properties(text: &str) -> Result<Self, ConfigError> {
        let mut kv = BTreeMap::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| invalid(line, "", "line is not key=value"))?;
            let k = k.trim();
            if !KNOWN_KEYS.contains(&k) {
                return Err(ConfigError::UnknownKey(k.to_owned()));
            }
            kv.insert(k.to_owned(), v.trim().to_owned());
        }
        let get = |k: &'static str| kv.get(k).map(String::as_str);
        let group = get("controllerDLegerGroup")
            .ok_or(ConfigError::Missing("controllerDLegerGroup"))?
            .to_owned();
        let peers = parse_peers(
            get("controllerDLegerPeers").ok_or(ConfigError::Missing("controllerDLegerPeers"))?,
        )?;
        let self_id = get("controllerDLegerSelfId")
            .ok_or(ConfigError::Missing("controllerDLegerSelfId"))?
            .to_owned();
        if !peers.iter().any(|p| p.id == self_id) {
            return Err(invalid(
                "controllerDLegerSelfId",
                &self_id,
                "not one of controllerDLegerPeers",
            ));
        }
        if let Some(t) = get("controllerType") {
            if t != "DLedger" {
                return Err(invalid(
                    "controllerType",
                    t,
                    "ringmq runs its own Raft; only DLedger (the default) is accepted",
                ));
            }
        }
        let mut cfg = ControllerConfig {
            group,
            peers,
            self_id,
            store_path: get("controllerStorePath")
                .filter(|s| !s.is_empty())
                .map_or_else(|| PathBuf::from("./controller-store"), PathBuf::from),
            scan_not_active_broker_interval_ms: 5_000,
            scan_inactive_master_interval_ms: 5_000,
            notify_broker_role_changed: true,
            enable_elect_unclean_master: false,
            elect_master_max_retry_count: 3,
        };
        if let Some(v) = get("scanNotActiveBrokerInterval") {
            cfg.scan_not_active_broker_interval_ms = interval_ms("scanNotActiveBrokerInterval", v)?;
        }
        if let Some(v) = get("scanInactiveMasterInterval") {
            cfg.scan_inactive_master_interval_ms = interval_ms("scanInactiveMasterInterval", v)?;
        }
        for k in UPDATABLE_KEYS {
            if let Some(v) = get(k) {
                cfg.update(k, v)?;
            }
        }
        Ok(cfg)
    }

    /// Sets one of `UPDATABLE_KEYS`.
    pub fn update(&mut self, key: &str, v: &str) -> Result<(), ConfigError> {
        match key {
            "notifyBrokerRoleChanged" => self.notify_broker_role_changed = parse_bool(key, v)?,
            "enableElectUncleanMaster" => self.enable_elect_unclean_master = parse_bool(key, v)?,
            "electMasterMaxRetryCount" => {
                self.elect_master_max_retry_count = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| invalid(key, v, "must be 1..=100"))?;
            }
            _ => return Err(ConfigError::UnknownKey(key.to_owned())),
        }
        Ok(())
    }

    pub fn self_peer(&self) -> &Peer {
        self.peers
            .iter()
            .find(|p| p.id == self.self_id)
            .expect("validated at parse time")
    }

    /// GET_CONTROLLER_CONFIG's body: Java's properties text.
    pub fn to_properties(&self) -> String {
        let peers: Vec<String> = self
            .peers
            .iter()
            .map(|p| format!("{}-{}", p.id, p.addr))
            .collect();
        format!(
            "controllerDLegerGroup={}\ncontrollerDLegerPeers={}\ncontrollerDLegerSelfId={}\ncontrollerStorePath={}\nscanNotActiveBrokerInterval={}\nscanInactiveMasterInterval={}\nnotifyBrokerRoleChanged={}\nenableElectUncleanMaster={}\nelectMasterMaxRetryCount={}\ncontrollerType=DLedger\n",
            self.group,
            peers.join(";"),
            self.self_id,
            self.store_path.display(),
            self.scan_not_active_broker_interval_ms,
            self.scan_inactive_master_interval_ms,
            self.notify_broker_role_changed,
            self.enable_elect_unclean_master,
            self.elect_master_max_retry_count,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "controllerDLegerGroup=g\ncontrollerDLegerPeers=n1-127.0.0.1:9868;n0-127.0.0.1:9878\ncontrollerDLegerSelfId=n1\n";

    /// Peers are sorted by id into node ids, defaults are Java's, and keys override them.
    #[test]
    fn parses_keys_and_defaults() {
        let c = ControllerConfig::from_properties(BASE).unwrap();
        assert_eq!(c.peers[0].id, "n0");
        assert_eq!(c.self_peer().node_id, 1);
        assert_eq!(c.self_peer().addr.port(), 9868);
        assert_eq!(c.scan_not_active_broker_interval_ms, 5000);
        assert!(c.notify_broker_role_changed && !c.enable_elect_unclean_master);
        let c = ControllerConfig::from_properties(&format!(
            "{BASE}enableElectUncleanMaster=true\nscanNotActiveBrokerInterval=1000\n"
        ))
        .unwrap();
        assert!(c.enable_elect_unclean_master);
        assert_eq!(c.scan_not_active_broker_interval_ms, 1000);
        let back = ControllerConfig::from_properties(&c.to_properties()).unwrap();
        assert_eq!(back, c);
    }

    /// Unknown keys, bad values and a self id outside the peers name the key at fault.
    #[test]
    fn refuses_bad_keys() {
        for (extra, key) in [
            ("fooBar=1\n", "fooBar"),
            ("notifyBrokerRoleChanged=yes\n", "notifyBrokerRoleChanged"),
            (
                "scanNotActiveBrokerInterval=x\n",
                "scanNotActiveBrokerInterval",
            ),
            ("controllerType=jRaft\n", "controllerType"),
        ] {
            let e = ControllerConfig::from_properties(&format!("{BASE}{extra}")).unwrap_err();
            assert!(e.to_string().contains(key), "{e}");
        }
        let e = ControllerConfig::from_properties(
            "controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:1\ncontrollerDLegerSelfId=n9\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("controllerDLegerSelfId"), "{e}");
        let e = ControllerConfig::from_properties("controllerDLegerGroup=g\n").unwrap_err();
        assert!(e.to_string().contains("controllerDLegerPeers"), "{e}");
    }
}
