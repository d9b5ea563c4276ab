//! GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309) relayed for an admin
//! caller (Java's `AdminBrokerProcessor.getConsumerRunningInfo` / `consumeMessageDirectly` /
//! `callConsumer`): the consumer is found by group and client id in shard 0's registrations,
//! the request goes to it over its own connection ([`broker2client::call_client`]), and its
//! answer, whatever its code, becomes the admin caller's response. A consumer not registered is
//! SYSTEM_ERROR "not online"; one that does not answer in time is CONSUME_MSG_TIMEOUT; any other
//! failure to reach it is SYSTEM_ERROR, with Java's remarks.

use std::rc::Rc;

use crate::error::BrokerError;
use crate::protocol::command::ExtFields;
use crate::protocol::headers::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
};
use crate::protocol::msg_id::decode_offset_msg_id;
use crate::protocol::RemotingCommand;
use crate::remoting::InvokeError;
use crate::shard::Shard;
use crate::{broker2client, query};

/// GET_CONSUMER_RUNNING_INFO: the consumer's own report, relayed as it answered.
pub async fn consumer_running_info(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = GetConsumerRunningInfoRequestHeader::from_command(cmd)?;
    let relayed = Relayed {
        code: cmd.code,
        ext_fields: cmd.ext_fields.clone(),
        body: cmd.body.clone(),
    };
    call_consumer(&shard, cmd, &h.consumer_group, &h.client_id, relayed).await
}

/// CONSUME_MESSAGE_DIRECTLY: the stored message named by `msgId` (an offset message id) is
/// sent to the consumer to consume now; its result is relayed.
pub async fn consume_message_directly(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = ConsumeMessageDirectlyResultRequestHeader::from_command(cmd)?;
    let mut ext_fields = cmd.ext_fields.clone();
    ext_fields.insert("brokerName", &shard.ctx.cfg.broker_name);
    if let Some(topic) = h.topic.as_deref().filter(|t| !t.is_empty()) {
        if let Some(tc) = shard.topics().get(topic) {
            ext_fields.insert("topicSysFlag", &tc.topic_sys_flag.to_string());
        }
    }
    if let Some(flag) = group_sys_flag(&shard, &h.consumer_group).await? {
        ext_fields.insert("groupSysFlag", &flag.to_string());
    }
    let body = stored_message(&shard, h.msg_id.as_deref().unwrap_or_default())?;
    let relayed = Relayed {
        code: cmd.code,
        ext_fields,
        body: body.into(),
    };
    let client_id = h.client_id.unwrap_or_default();
    call_consumer(&shard, cmd, &h.consumer_group, &client_id, relayed).await
}

/// The request as it goes to the consumer: the admin's code, fields and body (Java copies the
/// caller's extFields into a new request).
struct Relayed {
    code: i32,
    ext_fields: ExtFields,
    body: bytes::Bytes,
}

/// Asks the consumer `client_id` of `group` and answers `cmd` with what it said.
async fn call_consumer(
    shard: &Rc<Shard>,
    cmd: &RemotingCommand,
    group: &str,
    client_id: &str,
    relayed: Relayed,
) -> Result<RemotingCommand, BrokerError> {
    let Some(conn_id) = broker2client::consumer_conn(shard, group, client_id).await? else {
        return Err(BrokerError::System(format!(
            "The Consumer <{group}> <{client_id}> not online"
        )));
    };
    let mut request = RemotingCommand::new_request(relayed.code);
    request.ext_fields = relayed.ext_fields;
    request.body = relayed.body;
    match broker2client::call_client(shard, conn_id, request).await {
        Ok(answer) => {
            let mut resp = RemotingCommand::response_for(cmd, answer.code, answer.remark);
            resp.ext_fields = answer.ext_fields;
            resp.body = answer.body;
            Ok(resp)
        }
        Err(e @ InvokeError::Timeout { .. }) => Err(BrokerError::ConsumeMsgTimeout(format!(
            "consumer <{group}> <{client_id}> Timeout: {e}"
        ))),
        Err(e) => Err(BrokerError::System(format!(
            "invoke consumer <{group}> <{client_id}> Exception: {e}"
        ))),
    }
}

/// The subscription group's sys flag, when the group is configured.
async fn group_sys_flag(shard: &Rc<Shard>, group: &str) -> Result<Option<i32>, BrokerError> {
    let group = group.to_string();
    let flag = shard.mesh.call(0, move |s0| async move {
        s0.meta().groups.get(&group).map(|g| g.group_sys_flag)
    });
    Ok(flag.await?)
}

/// The stored record (commit-log format) named by an offset message id.
fn stored_message(shard: &Shard, msg_id: &str) -> Result<Vec<u8>, BrokerError> {
    let (_, offset) = decode_offset_msg_id(msg_id).map_err(|e| {
        // The id comes from the network: echo a bounded prefix of it.
        let shown: String = msg_id.chars().take(64).collect();
        BrokerError::System(format!("cannot decode the message id [{shown}]: {e}"))
    })?;
    let not_found = |e: BrokerError| {
        BrokerError::System(format!("can not find message by the offset {offset}: {e}"))
    };
    let phy = u64::try_from(offset)
        .map_err(|_| not_found(BrokerError::InvalidParameter("negative offset".into())))?;
    let size = query::record_size(shard, phy).map_err(not_found)?;
    let mut reader = shard.reader();
    let bytes = reader.read(phy, size).map_err(|e| not_found(e.into()))?;
    Ok(bytes.to_vec())
}
