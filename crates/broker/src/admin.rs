//! Topic and group administration: UPDATE_AND_CREATE_TOPIC (17) and its list form (18),
//! GET_ALL_TOPIC_CONFIG (21), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) and its list form (225),
//! GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), GET_ALL_DELAY_OFFSET (45), GET_BROKER_CONFIG (26),
//! CHECK_CLIENT_CONFIG (46), GET_TOPIC_CONFIG (351), GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305);
//! and what follows any topic change on shard 0 (publish the snapshot,
//! persist topics.json, re-register with the name servers). Topic deletion is `topic_delete`,
//! GET_BROKER_RUNTIME_INFO `stats`.

use std::rc::Rc;

use crate::error::BrokerError;
use crate::metadata::topic_validator::validate_topic;
use crate::protocol::body::{
    self, CheckClientRequestBody, CreateTopicListRequestBody, SubscriptionGroupConfig,
    SubscriptionGroupList, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType,
};
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::{CreateTopicRequestHeader, GetTopicConfigRequestHeader};
use crate::protocol::RemotingCommand;
use crate::shard::Shard;
use crate::topic_manager::{persist_in_background, topics_changed};

pub async fn create_topic(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let h = CreateTopicRequestHeader::from_command(cmd)?;
    let tc = TopicConfig {
        topic_name: h.topic.clone(),
        read_queue_nums: h.read_queue_nums,
        write_queue_nums: h.write_queue_nums,
        // As Java: the requested permission as sent, 0 (neither read nor write) included.
        perm: h.perm,
        topic_filter_type: if h.topic_filter_type.eq_ignore_ascii_case("MULTI_TAG") {
            TopicFilterType::MultiTag
        } else {
            TopicFilterType::SingleTag
        },
        topic_sys_flag: h.topic_sys_flag,
        order: h.order,
        ..TopicConfig::default()
    };
    upsert_topics(&shard, vec![(tc, h.attributes)]).await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

/// UPDATE_AND_CREATE_TOPIC_LIST (18): every topic of the body's list created or changed as 17
/// changes one. Every config is checked before any is applied; then all are applied in one
/// change (one publish, one write of topics.json, one registration). A config's `attributes`
/// map holds changes (`+key` to value, `-key`), as 17's header does.
pub async fn create_topic_list(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let list: CreateTopicListRequestBody = body::from_json(&cmd.body)?;
    let changes = list
        .topic_config_list
        .into_iter()
        .map(|mut tc| {
            let mods: Vec<String> = std::mem::take(&mut tc.attributes)
                .into_iter()
                .map(|(k, v)| {
                    if k.starts_with('-') {
                        k
                    } else {
                        format!("{k}={v}")
                    }
                })
                .collect();
            (tc, Some(mods.join(",")).filter(|m| !m.is_empty()))
        })
        .collect();
    upsert_topics(&shard, changes).await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

/// What an admin may create or change: a name RocketMQ takes, not one of the broker's own
/// topics (Java's `validateSystemTopicWhenUpdateTopic`, on by default), sane queue numbers.
fn check_topic(tc: &TopicConfig) -> Result<(), BrokerError> {
    validate_topic(&tc.topic_name)?;
    if crate::metadata::topic_validator::is_system_topic(&tc.topic_name) {
        return Err(BrokerError::InvalidParameter(format!(
            "The topic[{}] is conflict with system topic.",
            tc.topic_name
        )));
    }
    if tc.read_queue_nums <= 0 || tc.write_queue_nums <= 0 || tc.read_queue_nums > 1024 {
        return Err(BrokerError::InvalidParameter(format!(
            "invalid queue numbers read={} write={}",
            tc.read_queue_nums, tc.write_queue_nums
        )));
    }
    Ok(())
}

/// Checks every (config, attribute changes) pair, then, on shard 0, works out every topic's
/// attributes before applying any, so a refused change leaves the table as it was.
async fn upsert_topics(
    shard: &Rc<Shard>,
    changes: Vec<(TopicConfig, Option<String>)>,
) -> Result<(), BrokerError> {
    for (tc, _) in &changes {
        check_topic(tc)?;
    }
    shard
        .mesh
        .call(0, move |s0| async move {
            let changed = {
                let mut m = s0.meta_mut();
                let empty = Default::default();
                let mut ready = Vec::with_capacity(changes.len());
                for (mut tc, mods) in changes {
                    let current = m.topics.get(&tc.topic_name).map(|t| &t.attributes);
                    tc.attributes = crate::metadata::topic_attributes::alter(
                        current.unwrap_or(&empty),
                        mods.as_deref(),
                        current.is_none(),
                    )?;
                    ready.push(tc);
                }
                ready
                    .into_iter()
                    .fold(false, |changed, tc| m.upsert_topic(tc) | changed)
            };
            if changed {
                topics_changed(&s0);
            }
            Ok::<(), BrokerError>(())
        })
        .await?
}

pub async fn all_topic_config(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let bytes = shard
        .mesh
        .call(0, |s0| async move {
            let m = s0.meta();
            body::to_json(&TopicConfigSerializeWrapper {
                topic_config_table: m
                    .topics
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                data_version: m.topics_version.clone(),
            })
        })
        .await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(bytes))
}

pub async fn create_subscription_group(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let g: SubscriptionGroupConfig = body::from_json(&cmd.body)?;
    upsert_groups(&shard, vec![g]).await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225): every group of the body's list created or
/// replaced as 200 does, in one change written once.
pub async fn create_subscription_group_list(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let list: SubscriptionGroupList = body::from_json(&cmd.body)?;
    upsert_groups(&shard, list.group_config_list).await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

/// Groups created or replaced on shard 0; a config without a name refuses the whole change.
async fn upsert_groups(
    shard: &Rc<Shard>,
    groups: Vec<SubscriptionGroupConfig>,
) -> Result<(), BrokerError> {
    if groups.iter().any(|g| g.group_name.is_empty()) {
        return Err(BrokerError::InvalidParameter("groupName is empty".into()));
    }
    shard
        .mesh
        .call(0, move |s0| async move {
            let (bytes, path) = {
                let mut m = s0.meta_mut();
                for g in groups {
                    m.groups.insert(g.group_name.clone(), g);
                }
                crate::metadata::bump(&mut m.groups_version);
                (m.groups_file_bytes(), m.groups_path())
            };
            persist_in_background(path, bytes);
        })
        .await?;
    Ok(())
}

pub async fn all_subscription_groups(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let bytes = shard
        .mesh
        .call(0, |s0| async move { s0.meta().groups_file_bytes() })
        .await?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(bytes))
}

/// GET_ALL_DELAY_OFFSET (45): every delay level's progress as Java's `ScheduleMessageService`
/// encodes it (`offsetTable`, `dataVersion`; fastjson's unquoted level keys). ringmq keeps no
/// data version for this progress; the one sent is stamped with the time of the answer.
pub async fn all_delay_offsets(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let mut w = body::DelayOffsetSerializeWrapper {
        offset_table: crate::schedule::gather_table(&shard).await,
        ..Default::default()
    };
    w.data_version.timestamp = crate::common::now_ms();
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None)
        .with_body(body::to_fastjson_legacy(&w)))
}

/// GET_BROKER_CONFIG: every key ringmq implements with its effective value, as Java's
/// properties text (`flushDiskType=ASYNC_FLUSH`); `listenPort` is the port actually bound, and
/// the run-time settings are the ones UPDATE_BROKER_CONFIG last set.
pub fn broker_config(shard: &Shard, cmd: &RemotingCommand) -> RemotingCommand {
    let mut c = shard.ctx.cfg.clone();
    shard.settings().apply_to(&mut c);
    c.listen_addr.set_port(shard.ctx.store_host.port());
    if let Some(ha) = shard.ctx.ha_addr {
        c.ha.ha_listen_port = Some(ha.port());
    }
    RemotingCommand::response_for(cmd, rc::SUCCESS, None)
        .with_body(c.properties_text().into_bytes())
}

/// CHECK_CLIENT_CONFIG: TAG subscriptions are fine; SQL92 needs enablePropertyFilter.
pub fn check_client_config(
    shard: &Shard,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let req: CheckClientRequestBody = body::from_json(&cmd.body)?;
    let sub = &req.subscription_data;
    crate::pull::MsgFilter::build(
        &sub.sub_string,
        Some(&sub.expression_type),
        shard.settings().enable_property_filter,
    )?;
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None))
}

/// GET_TOPIC_CONFIG: the topic's config as Java's `TopicConfigAndQueueMapping` (the config's
/// fields; `mappingDetail` left out, as fastjson leaves out null: ringmq has no static topics).
pub fn topic_config(shard: &Shard, cmd: &RemotingCommand) -> Result<RemotingCommand, BrokerError> {
    let h = GetTopicConfigRequestHeader::from_command(cmd)?;
    let found = shard.topics().get(&h.topic).cloned();
    Ok(match found {
        Some(tc) => {
            RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body::to_json(&tc))
        }
        None => RemotingCommand::response_for(
            cmd,
            rc::TOPIC_NOT_EXIST,
            Some(format!("No topic in this broker. topic: {}", h.topic)),
        ),
    })
}

/// GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the broker's own topic names (Java's `TopicList`, without
/// a broker address, as Java answers it).
pub fn system_topic_list(cmd: &RemotingCommand) -> RemotingCommand {
    let list = body::TopicList {
        broker_addr: None,
        topic_list: crate::metadata::topic_validator::system_topic_set()
            .map(str::to_owned)
            .collect(),
    };
    RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body::to_json(&list))
}
