//! The broker's dispatch table: request code -> handler, and the one place a `BrokerError`
//! becomes a response (code from `BrokerError::response_code`, remark = the error text).
//! Every request's time to its response is recorded for `rocketmq_rpc_latency`
//! (`metrics::RpcTimer`), and a topic's or group's creation for the creation-time histograms.

use std::rc::Rc;

use crate::error::BrokerError;
use crate::metadata::topic_validator::is_system_topic;
use crate::metrics::record::Creation;
use crate::metrics::{timed_creation, RpcTimer};
use crate::protocol::codes::{request_code as req, response_code as rc};
use crate::protocol::RemotingCommand;
use crate::remoting::{encode_frame, ConnInfo, Handler, LocalFuture, Outbound};
use crate::shard::Shard;
use crate::store::SegmentRange;
use crate::{
    admin, admin_auth, admin_config, admin_conns, admin_groups, admin_offsets, admin_stats,
    admin_store, assignment, clients, offsets, pop, pull, query, relay, replicas, reply, retry,
    send, topic_delete, transaction,
};
use crate::{auth_gate, broker_stats, runtime_info};

pub struct BrokerHandler {
    pub shard: Rc<Shard>,
    /// Requests on RocketMQ's "fast" (VIP) port: everything but pulls.
    pub fast_port: bool,
}

impl Handler for BrokerHandler {
    fn handle(
        self: Rc<Self>,
        conn: ConnInfo,
        cmd: RemotingCommand,
    ) -> LocalFuture<Option<Outbound>> {
        let timer = RpcTimer::start(cmd.code, cmd.is_oneway());
        Box::pin(async move {
            let out = self.dispatch(conn, cmd).await;
            timer.done(out.as_ref());
            out
        })
    }

    fn admit(&self, conn: &ConnInfo, cmd: &RemotingCommand) -> Result<(), Option<Outbound>> {
        auth_gate::admit(&self.shard, conn.peer, cmd)
    }

    fn closed(self: Rc<Self>, conn: &ConnInfo) {
        self.shard.remove_conn(conn.id);
        let conn_id = conn.id;
        let job = Box::new(move |s0: &Rc<Shard>| clients::connection_closed(s0, conn_id));
        let _ = self.shard.mesh.post(0, job);
    }

    type Range = SegmentRange;

    fn open_range(&self, phy_offset: u64, size: u32) -> std::io::Result<SegmentRange> {
        self.shard
            .reader()
            .locate(phy_offset, size)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }
}

impl BrokerHandler {
    async fn dispatch(self: Rc<Self>, conn: ConnInfo, cmd: RemotingCommand) -> Option<Outbound> {
        {
            let shard = self.shard.clone();
            let oneway = cmd.is_oneway();
            let code = cmd.code;
            let result: Result<Option<Outbound>, BrokerError> = match code {
                req::SEND_MESSAGE | req::SEND_MESSAGE_V2 | req::SEND_BATCH_MESSAGE => {
                    return send::send(shard, &conn, &cmd)
                        .await
                        .and_then(|r| encode_frame(&r));
                }
                req::SEND_REPLY_MESSAGE | req::SEND_REPLY_MESSAGE_V2 => {
                    frame(reply::send_reply(shard, &conn, &cmd).await)
                }
                req::PULL_MESSAGE | req::LITE_PULL_MESSAGE if !self.fast_port => {
                    pull::pull(shard, &cmd).await.map(Some)
                }
                req::QUERY_MESSAGE => query::query_message(shard, &cmd).await.map(Some),
                req::VIEW_MESSAGE_BY_ID => query::view_message_by_id(shard, &cmd).await.map(Some),
                req::END_TRANSACTION => transaction::end::end_transaction(shard, &cmd)
                    .await
                    .map(|r| r.and_then(|c| encode_frame(&c))),
                req::POP_MESSAGE => pop::pop_message::pop_message(shard, &cmd).await.map(Some),
                req::PEEK_MESSAGE => pop::pop_message::peek_message(shard, &cmd).await.map(Some),
                req::ACK_MESSAGE => frame(pop::ack::ack_message(shard, &cmd).await),
                req::BATCH_ACK_MESSAGE => frame(pop::ack::batch_ack_message(shard, &cmd).await),
                req::CHANGE_MESSAGE_INVISIBLETIME => {
                    frame(pop::ack::change_invisible_time(shard, &cmd).await)
                }
                req::NOTIFICATION => frame(pop::notify::notification(shard, &cmd).await),
                req::POLLING_INFO => frame(pop::notify::polling_info(shard, &cmd).await),
                req::QUERY_ASSIGNMENT => frame(assignment::query_assignment(shard, &cmd).await),
                req::SET_MESSAGE_REQUEST_MODE => {
                    frame(assignment::set_message_request_mode(shard, &cmd).await)
                }
                req::GET_ALL_MESSAGE_REQUEST_MODE => {
                    frame(assignment::all_message_request_modes(shard, &cmd).await)
                }
                req::CONSUMER_SEND_MSG_BACK => frame(retry::send_msg_back(shard, &cmd).await),
                req::HEART_BEAT => frame(clients::heart_beat(shard, &conn, &cmd).await),
                req::UNREGISTER_CLIENT => frame(clients::unregister_client(shard, &cmd).await),
                req::GET_CONSUMER_LIST_BY_GROUP => frame(clients::consumer_list(shard, &cmd).await),
                req::LOCK_BATCH_MQ => frame(clients::lock_batch(shard, &cmd).await),
                req::UNLOCK_BATCH_MQ => frame(clients::unlock_batch(shard, &cmd).await),
                req::QUERY_CONSUMER_OFFSET => {
                    frame(offsets::query_consumer_offset(shard, &cmd).await)
                }
                req::UPDATE_CONSUMER_OFFSET => {
                    frame(offsets::update_consumer_offset(shard, &cmd).await)
                }
                req::GET_MAX_OFFSET => frame(offsets::get_max_offset(shard, &cmd).await),
                req::GET_MIN_OFFSET => frame(offsets::get_min_offset(shard, &cmd).await),
                req::SEARCH_OFFSET_BY_TIMESTAMP => {
                    frame(offsets::search_offset_by_timestamp(shard, &cmd).await)
                }
                req::GET_EARLIEST_MSG_STORETIME => {
                    frame(offsets::get_earliest_msg_storetime(shard, &cmd).await)
                }
                req::UPDATE_AND_CREATE_TOPIC => {
                    let system = cmd.ext("topic").is_some_and(is_system_topic);
                    let create = admin::create_topic(shard, &cmd);
                    frame(timed_creation(Creation::Topic { system }, create).await)
                }
                req::DELETE_TOPIC_IN_BROKER => frame(topic_delete::delete_topic(shard, &cmd).await),
                req::GET_ALL_TOPIC_CONFIG => frame(admin::all_topic_config(shard, &cmd).await),
                req::UPDATE_AND_CREATE_TOPIC_LIST => {
                    let create = admin::create_topic_list(shard, &cmd);
                    frame(timed_creation(Creation::Topic { system: false }, create).await)
                }
                req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST => {
                    let create = admin::create_subscription_group_list(shard, &cmd);
                    frame(timed_creation(Creation::Group, create).await)
                }
                req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
                    let create = admin::create_subscription_group(shard, &cmd);
                    frame(timed_creation(Creation::Group, create).await)
                }
                req::GET_ALL_CONSUMER_OFFSET => {
                    frame(offsets::all_consumer_offsets(shard, &cmd).await)
                }
                req::GET_ALL_DELAY_OFFSET => frame(admin::all_delay_offsets(shard, &cmd).await),
                req::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => {
                    frame(admin::all_subscription_groups(shard, &cmd).await)
                }
                req::GET_CONSUMER_CONNECTION_LIST => {
                    frame(admin_conns::consumer_connection_list(shard, &cmd).await)
                }
                req::GET_PRODUCER_CONNECTION_LIST => {
                    frame(admin_conns::producer_connection_list(shard, &cmd).await)
                }
                req::GET_CONSUME_STATS => frame(admin_stats::consume_stats(shard, &cmd).await),
                req::GET_TOPIC_STATS_INFO => frame(admin_stats::topic_stats(shard, &cmd).await),
                req::VIEW_BROKER_STATS_DATA => {
                    frame(broker_stats::view_broker_stats_data(shard, &cmd).await)
                }
                req::GET_BROKER_HA_STATUS => frame(Ok(runtime_info::ha_status(&shard, &cmd))),
                req::NOTIFY_BROKER_ROLE_CHANGED => {
                    frame(replicas::role_changed(shard, cmd.clone()).await)
                }
                req::GET_BROKER_EPOCH_CACHE => frame(replicas::epoch_cache(shard, &cmd).await),
                req::GET_BROKER_RUNTIME_INFO => {
                    frame(runtime_info::runtime_info(shard, &cmd).await)
                }
                req::GET_BROKER_CONFIG => frame(Ok(admin::broker_config(&shard, &cmd))),
                req::CHECK_CLIENT_CONFIG => frame(admin::check_client_config(&shard, &cmd)),
                req::GET_CONSUMER_RUNNING_INFO => {
                    frame(relay::consumer_running_info(shard, &cmd).await)
                }
                req::CONSUME_MESSAGE_DIRECTLY => {
                    frame(relay::consume_message_directly(shard, &cmd).await)
                }
                req::UPDATE_BROKER_CONFIG => {
                    frame(admin_config::update_broker_config(shard, &cmd).await)
                }
                req::GET_TOPIC_CONFIG => frame(admin::topic_config(&shard, &cmd)),
                req::GET_SYSTEM_TOPIC_LIST_FROM_BROKER => frame(Ok(admin::system_topic_list(&cmd))),
                req::DELETE_SUBSCRIPTIONGROUP => {
                    frame(admin_groups::delete_subscription_group(shard, &cmd).await)
                }
                req::GET_SUBSCRIPTIONGROUP_CONFIG => {
                    frame(admin_groups::subscription_group_config(shard, &cmd).await)
                }
                req::QUERY_TOPIC_CONSUME_BY_WHO => {
                    frame(admin_groups::topic_consume_by_who(shard, &cmd).await)
                }
                req::QUERY_TOPICS_BY_CONSUMER => {
                    frame(admin_groups::topics_by_consumer(shard, &cmd).await)
                }
                req::QUERY_SUBSCRIPTION_BY_CONSUMER => {
                    frame(admin_groups::subscription_by_consumer(shard, &cmd).await)
                }
                req::GET_ALL_PRODUCER_INFO => {
                    frame(admin_groups::all_producer_info(shard, &cmd).await)
                }
                req::INVOKE_BROKER_TO_RESET_OFFSET => {
                    frame(admin_offsets::reset_offset(shard, &cmd).await)
                }
                req::CLONE_GROUP_OFFSET => {
                    frame(admin_offsets::clone_group_offset(shard, &cmd).await)
                }
                req::GET_BROKER_CONSUME_STATS => {
                    frame(admin_offsets::broker_consume_stats(shard, &cmd).await)
                }
                req::QUERY_CONSUME_QUEUE => {
                    frame(admin_store::query_consume_queue(shard, &cmd).await)
                }
                req::CLEAN_EXPIRED_CONSUMEQUEUE => {
                    frame(admin_store::clean_expired_consume_queue(shard, &cmd).await)
                }
                req::DELETE_EXPIRED_COMMITLOG => {
                    frame(Ok(admin_store::delete_expired_commit_log(&shard, &cmd)))
                }
                req::CLEAN_UNUSED_TOPIC => {
                    frame(admin_store::clean_unused_topic(shard, &cmd).await)
                }
                req::AUTH_CREATE_USER
                | req::AUTH_UPDATE_USER
                | req::AUTH_DELETE_USER
                | req::AUTH_GET_USER
                | req::AUTH_LIST_USER
                | req::AUTH_CREATE_ACL
                | req::AUTH_UPDATE_ACL
                | req::AUTH_DELETE_ACL
                | req::AUTH_GET_ACL
                | req::AUTH_LIST_ACL => frame(admin_auth::handle(shard, &cmd).await),
                _ => {
                    let remark = format!(" request type {code} not supported");
                    tracing::debug!(code, "request code not supported");
                    Ok(encode_frame(&RemotingCommand::response_for(
                        &cmd,
                        rc::REQUEST_CODE_NOT_SUPPORTED,
                        Some(remark),
                    )))
                }
            };
            tracing::debug!(
                code,
                opaque = cmd.opaque,
                ok = result.is_ok(),
                conn = conn.id,
                "request served"
            );
            if oneway {
                if let Err(e) = &result {
                    tracing::warn!(code, error = %e, "oneway request failed");
                }
                return None;
            }
            match result {
                Ok(out) => out,
                Err(e) => {
                    tracing::debug!(code, error = %e, "request failed");
                    encode_frame(&RemotingCommand::response_for(
                        &cmd,
                        e.response_code(),
                        Some(e.to_string()),
                    ))
                }
            }
        }
    }
}

fn frame(r: Result<RemotingCommand, BrokerError>) -> Result<Option<Outbound>, BrokerError> {
    r.map(|c| encode_frame(&c))
}
