//! Admin listings of a group's live clients: GET_CONSUMER_CONNECTION_LIST (mqadmin
//! `consumerConnection`) and GET_PRODUCER_CONNECTION_LIST (mqadmin `producerConnection`).
//!
//! The registrations are shard 0's (`Metadata::consumers`, `Metadata::producers`, filled by
//! HEART_BEAT with the connection's peer address, language and version); handlers on any shard
//! read them with one `Mesh::call` and answer with Java's `ConsumerConnection` /
//! `ProducerConnection` JSON bodies.

use std::rc::Rc;

use crate::error::BrokerError;
use crate::metadata::ClientChannel;
use crate::protocol::body::{self, Connection, ConsumerConnection, ProducerConnection};
use crate::protocol::codes::language_name;
use crate::protocol::headers::{
    GetConsumerConnectionListRequestHeader, GetProducerConnectionListRequestHeader,
};
use crate::protocol::RemotingCommand;
use crate::shard::Shard;

fn connection(c: &ClientChannel) -> Connection {
    Connection {
        client_addr: c.client_addr.clone(),
        client_id: c.client_id.clone(),
        language: language_name(c.language).to_owned(),
        version: c.version,
    }
}

/// GET_CONSUMER_CONNECTION_LIST: the group's clients, subscriptions and consume settings;
/// CONSUMER_NOT_ONLINE when no client of the group is registered.
pub async fn consumer_connection_list(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = GetConsumerConnectionListRequestHeader::from_command(cmd)?;
    let group = h.consumer_group.clone();
    let found: Option<ConsumerConnection> = shard
        .mesh
        .call(0, move |s0| async move {
            let m = s0.meta();
            let info = m.consumers.get(&group).filter(|i| !i.clients.is_empty())?;
            Some(ConsumerConnection {
                connection_set: info.clients.values().map(connection).collect(),
                consume_from_where: info.consume_from_where,
                consume_type: info.consume_type,
                message_model: info.message_model,
                subscription_table: info
                    .subscriptions
                    .iter()
                    .map(|(t, s)| (t.clone(), s.clone()))
                    .collect(),
            })
        })
        .await?;
    let Some(cc) = found else {
        return Err(BrokerError::ConsumerNotOnline(h.consumer_group));
    };
    Ok(RemotingCommand::response_for(cmd, 0, None).with_body(body::to_json(&cc)))
}

/// GET_PRODUCER_CONNECTION_LIST: the group's producer clients; SYSTEM_ERROR "the producer
/// group[..] not exist" when none is registered, as Java answers.
pub async fn producer_connection_list(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = GetProducerConnectionListRequestHeader::from_command(cmd)?;
    let group = h.producer_group.clone();
    let set: Vec<Connection> = shard
        .mesh
        .call(0, move |s0| async move {
            let m = s0.meta();
            m.producers
                .get(&group)
                .map(|p| p.values().map(connection).collect())
                .unwrap_or_default()
        })
        .await?;
    if set.is_empty() {
        return Err(BrokerError::System(format!(
            "the producer group[{}] not exist",
            h.producer_group
        )));
    }
    let pc = ProducerConnection {
        connection_set: set,
    };
    Ok(RemotingCommand::response_for(cmd, 0, None).with_body(body::to_json(&pc)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::body::{ConsumeType, MessageModel, SubscriptionData};

    /// The consumer listing is written in Java's `ConsumerConnection` shape: camelCase names,
    /// the language as its `LanguageCode` name, enums as their Java names.
    #[test]
    fn consumer_connection_json_shape() {
        let chan = ClientChannel {
            client_id: "10.0.0.1@1".into(),
            conn_id: 7,
            last_update_ms: 1,
            client_addr: "10.0.0.1:50000".into(),
            language: 12,
            version: 499,
        };
        let mut cc = ConsumerConnection {
            connection_set: vec![connection(&chan)],
            consume_type: Some(ConsumeType::ConsumePassively),
            message_model: Some(MessageModel::Clustering),
            ..Default::default()
        };
        let sub = SubscriptionData {
            topic: "T".into(),
            ..Default::default()
        };
        cc.subscription_table.insert("T".into(), sub);
        let v: serde_json::Value = serde_json::from_slice(&body::to_json(&cc)).unwrap();
        let c = &v["connectionSet"][0];
        assert_eq!(c["clientAddr"], "10.0.0.1:50000");
        assert_eq!(c["clientId"], "10.0.0.1@1");
        assert_eq!(c["language"], "RUST");
        assert_eq!(c["version"], 499);
        assert_eq!(v["consumeType"], "CONSUME_PASSIVELY");
        assert_eq!(v["messageModel"], "CLUSTERING");
        assert_eq!(v["subscriptionTable"]["T"]["subString"], "*");
    }
}
