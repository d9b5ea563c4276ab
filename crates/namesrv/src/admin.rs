//! The name server's admin requests: GET_SYSTEM_TOPIC_LIST_FROM_NS (304),
//! WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327), GET_NAMESRV_CONFIG (319)
//! and UPDATE_NAMESRV_CONFIG (318), as Java's `DefaultRequestProcessor` answers them.
//!
//! The name server's configuration is what ringmq's name server has: its listen port and where
//! its KV config is kept. Neither can change while it runs, so an update that names a key is
//! refused with the keys named (Java's own black list, `kvConfigPath` among them, is refused
//! with Java's NO_PERMISSION remark); an update without keys succeeds, as on Java.

use crate::common::properties_text;
use crate::protocol::body::{self, TopicList};
use crate::protocol::codes::response_code;
use crate::protocol::headers::{
    AddWritePermOfBrokerResponseHeader, WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
};
use crate::protocol::RemotingCommand;

use super::{NameServer, NamesrvError};

/// Java's `NamesrvConfig.configBlackList` default: keys no admin may change remotely.
const CONFIG_BLACK_LIST: [&str; 3] = ["configBlackList", "configStorePath", "kvConfigPath"];

type Reply = Result<RemotingCommand, NamesrvError>;

impl NameServer {
    pub(super) fn system_topic_list(&self, req: &RemotingCommand) -> RemotingCommand {
        let (topics, addr) = self.routes.system_topics();
        let list = TopicList {
            broker_addr: addr,
            topic_list: topics.into_iter().collect(),
        };
        RemotingCommand::response_for(req, response_code::SUCCESS, None)
            .with_body(body::to_json(&list))
    }

    /// 205 (`wipe`) and 327: the broker group's queue routes, answered with the topic count.
    pub(super) fn operate_write_perm(&mut self, req: &RemotingCommand, wipe: bool) -> Reply {
        let h = WipeWritePermOfBrokerRequestHeader::from_command(req)?;
        let count = self.routes.operate_write_perm(&h.broker_name, wipe);
        tracing::info!(broker = %h.broker_name, wipe, topics = count, "write permission changed");
        let mut resp = RemotingCommand::response_for(req, response_code::SUCCESS, None);
        if wipe {
            WipeWritePermOfBrokerResponseHeader {
                wipe_topic_count: count,
            }
            .write_to(&mut resp);
        } else {
            AddWritePermOfBrokerResponseHeader {
                add_topic_count: count,
            }
            .write_to(&mut resp);
        }
        Ok(resp)
    }

    /// GET_NAMESRV_CONFIG: the keys as Java `Properties` text.
    pub(super) fn config_text(&self, req: &RemotingCommand) -> RemotingCommand {
        let mut text = String::new();
        if let Some(p) = &self.kv_config_path {
            text.push_str(&format!("kvConfigPath={}\n", p.display()));
        }
        if let Some(port) = self.listen_port {
            text.push_str(&format!("listenPort={port}\n"));
        }
        RemotingCommand::response_for(req, response_code::SUCCESS, None).with_body(text)
    }

    /// UPDATE_NAMESRV_CONFIG: nothing ringmq's name server has can change while it runs.
    pub(super) fn update_config(&self, req: &RemotingCommand) -> RemotingCommand {
        let text = String::from_utf8_lossy(&req.body);
        let keys: Vec<String> = properties_text::parse(&text)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let (code, remark) = if keys.iter().any(|k| CONFIG_BLACK_LIST.contains(&k.as_str())) {
            (
                response_code::NO_PERMISSION,
                Some("Can not update config in black list.".to_string()),
            )
        } else if keys.is_empty() {
            (response_code::SUCCESS, None)
        } else {
            (
                response_code::INVALID_PARAMETER,
                Some(format!(
                    "ringmq's name server cannot change these keys while it runs: {}",
                    keys.join(", ")
                )),
            )
        };
        RemotingCommand::response_for(req, code, remark)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::codes::request_code;

    /// 318 refuses black-listed keys with Java's remark and names every other key; an empty
    /// body succeeds; 319 lists the KV path and the listen port.
    #[test]
    fn config_update_refuses_and_names_keys() {
        let mut ns = NameServer::new(Some("/tmp/ns/kv.json".into()));
        ns.set_listen_port(9876);
        let req = |body: &str| {
            RemotingCommand::new_request(request_code::UPDATE_NAMESRV_CONFIG)
                .with_body(body.to_owned())
        };
        let r = ns.update_config(&req("kvConfigPath=/x\n"));
        assert_eq!(r.code, response_code::NO_PERMISSION);
        assert_eq!(
            r.remark.as_deref(),
            Some("Can not update config in black list.")
        );
        let r = ns.update_config(&req("orderMessageEnable=true\nfoo=1\n"));
        assert_eq!(r.code, response_code::INVALID_PARAMETER);
        let remark = r.remark.unwrap_or_default();
        assert!(remark.contains("orderMessageEnable, foo"), "{remark}");
        assert_eq!(ns.update_config(&req("")).code, response_code::SUCCESS);
        let get = RemotingCommand::new_request(request_code::GET_NAMESRV_CONFIG);
        let body = String::from_utf8(ns.config_text(&get).body.to_vec()).unwrap();
        assert_eq!(body, "kvConfigPath=/tmp/ns/kv.json\nlistenPort=9876\n");
    }
}
