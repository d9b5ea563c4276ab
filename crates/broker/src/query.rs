//! QUERY_MESSAGE (12) by key and time range through the IndexFile, and VIEW_MESSAGE_BY_ID (33)
//! by commit-log offset. Both answer with stored records sent zero-copy, like pulls.
//!
//! The IndexFiles are written by the writer thread; a query maps them read-only on a blocking
//! helper thread (opening files must not stall the shard) and only reads. Index hits are by hash,
//! so every candidate record is re-checked here: its topic must match and the key must be one of
//! its KEYS or its UNIQ_KEY.

use std::rc::Rc;

use bytes::BytesMut;

use crate::constants::MAX_PULL_BYTES;
use crate::error::BrokerError;
use crate::protocol::codes::response_code as rc;
use crate::protocol::headers::{
    QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageByIdRequestHeader,
    UNIQUE_KEY_QUERY,
};
use crate::protocol::properties::{self, keys};
use crate::protocol::{message, RemotingCommand};
use crate::remoting::Outbound;
use crate::runtime;
use crate::shard::Shard;
use crate::store::index_file::IndexService;

/// Most messages one query returns (RocketMQ's defaultQueryMaxNum).
const MAX_QUERY_NUM: usize = 32;

/// Size of the record at `phy`, from its first field, after checking the whole record decodes.
pub(crate) fn record_size(shard: &Shard, phy: u64) -> Result<u32, BrokerError> {
    let mut reader = shard.reader();
    let head = reader.read(phy, 4)?;
    let size = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    let max = shard.ctx.cfg.store.max_message_size as u32 + 64 * 1024;
    if !(91..=max).contains(&size) {
        return Err(BrokerError::QueryNotFound(format!(
            "no message at offset {phy}"
        )));
    }
    // Validates the whole record before it is served.
    let bytes = reader.read(phy, size)?;
    message::decode(bytes, true)
        .map_err(|e| BrokerError::System(format!("corrupt record at {phy}: {e}")))?;
    Ok(size)
}

fn zero_copy(resp: RemotingCommand, ranges: Vec<(u64, u32)>) -> Result<Outbound, BrokerError> {
    let body_len: usize = ranges.iter().map(|r| r.1 as usize).sum();
    let mut prefix = BytesMut::with_capacity(256);
    resp.encode_prefix(body_len, &mut prefix)?;
    Ok(Outbound::ZeroCopy {
        prefix: prefix.freeze(),
        ranges,
    })
}

pub async fn view_message_by_id(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<Outbound, BrokerError> {
    let h = ViewMessageByIdRequestHeader::from_command(cmd)?;
    if h.offset < 0 {
        return Err(BrokerError::InvalidParameter(format!(
            "offset {} is negative",
            h.offset
        )));
    }
    let phy = h.offset as u64;
    let size = record_size(&shard, phy).map_err(|e| {
        BrokerError::System(format!("can not find message by the offset {phy}: {e}"))
    })?;
    zero_copy(
        RemotingCommand::response_for(cmd, rc::SUCCESS, None),
        vec![(phy, size)],
    )
}

pub async fn query_message(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<Outbound, BrokerError> {
    let h = QueryMessageRequestHeader::from_command(cmd)?;
    let unique = cmd
        .ext(UNIQUE_KEY_QUERY)
        .map(|v| v.eq_ignore_ascii_case("true"))
        == Some(true);
    let max = if unique {
        MAX_QUERY_NUM
    } else {
        (h.max_num.max(1) as usize).min(MAX_QUERY_NUM)
    };
    let store = &shard.ctx.cfg.store;
    if !store.message_index_enable {
        return Err(BrokerError::QueryNotFound(
            "the message index is disabled".into(),
        ));
    }
    let (root, slots, num) = (
        store.store_path_root_dir.clone(),
        store.max_hash_slot_num,
        store.max_index_num,
    );
    let (topic, key) = (h.topic.clone(), h.key.clone());
    let (begin, end) = (h.begin_timestamp, h.end_timestamp);
    let found = runtime::spawn_blocking(move || -> Result<(Vec<u64>, i64, u64), BrokerError> {
        let ix = IndexService::open(&root, slots, num)?;
        // Ask for more than `max`: hash collisions are filtered below.
        let phys = ix.query(&topic, &key, max * 4, begin, end);
        let last_ts = ix.files().last().map(|f| f.end_timestamp()).unwrap_or(0);
        Ok((phys, last_ts, ix.max_phy_offset()))
    })
    .await?;
    let (phys, last_ts, last_phy) = found;
    let mut ranges = Vec::new();
    let mut bytes = 0usize;
    for phy in phys {
        if ranges.len() >= max || bytes >= MAX_PULL_BYTES * 16 {
            break;
        }
        let Ok(size) = record_size(&shard, phy) else {
            continue;
        };
        let matches = {
            let mut reader = shard.reader();
            let rec = reader.read(phy, size)?;
            match message::decode(rec, false) {
                Ok(r) if r.topic == h.topic => {
                    let props = properties::parse(r.properties);
                    props.iter().any(|(k, v)| {
                        (k == keys::UNIQ_KEY && v == &h.key)
                            || (k == keys::KEYS && v.split(' ').any(|x| x == h.key))
                    })
                }
                _ => false,
            }
        };
        if matches {
            bytes += size as usize;
            ranges.push((phy, size));
        }
    }
    if ranges.is_empty() {
        return Err(BrokerError::QueryNotFound(
            "can not find message, maybe time range not correct".into(),
        ));
    }
    ranges.sort_unstable();
    let mut resp = RemotingCommand::response_for(cmd, rc::SUCCESS, None);
    QueryMessageResponseHeader {
        index_last_update_timestamp: last_ts,
        index_last_update_phyoffset: last_phy as i64,
    }
    .write_to(&mut resp);
    zero_copy(resp, ranges)
}
