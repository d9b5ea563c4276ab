//! GET_BROKER_RUNTIME_INFO (28), in the keys and value formats of Java's
//! `DefaultMessageStore.getRuntimeInfo`, `StoreStatsService` and
//! `AdminBrokerProcessor.prepareRuntimeInfo`, which mqadmin and the dashboard parse; and shard
//! 0's sampler task, which feeds the rates (`stats`) and measures the store's disk usage; and
//! GET_BROKER_HA_STATUS (907), the replication group as this broker sees it (`ha_status`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::common::now_ms;
use crate::error::BrokerError;
use crate::protocol::codes::response_code as rc;
use crate::protocol::{message, RemotingCommand};
use crate::runtime;
use crate::shard::Shard;
use crate::stats::{Sample, Sampler, ONEWAY_DROPPED};

const SAMPLE_PERIOD: Duration = Duration::from_secs(1);

thread_local! {
    /// Shard 0's sampler (other shards never touch theirs).
    static SAMPLER: RefCell<Sampler> = RefCell::new(Sampler::default());
}

/// Shard 0: samples the counters and the store's disk usage (statvfs, on a helper thread)
/// every second while the broker runs, so a request reads them without waiting.
pub async fn run_sampler(s0: Rc<Shard>) {
    while !s0.is_stopping() {
        let s = s0.ctx.stats.sum(now_ms());
        SAMPLER.with(|x| x.borrow_mut().record(s));
        let root = s0.ctx.cfg.store.store_path_root_dir.clone();
        let disk =
            runtime::spawn_blocking(move || crate::store::retention::disk_usage(&root)).await;
        let ratio = match disk {
            Ok(d) if d.total_bytes > 0 => Some(d.used_bytes as f64 / d.total_bytes as f64),
            _ => None,
        };
        SAMPLER.with(|x| x.borrow_mut().disk_ratio = ratio);
        runtime::sleep(SAMPLE_PERIOD).await;
    }
}

/// The figures shard 0 computes from its sampler.
fn sampled_figures(s0: &Shard) -> BTreeMap<String, String> {
    let now = s0.ctx.stats.sum(now_ms());
    SAMPLER.with(|x| {
        let x = x.borrow();
        let found_or_miss = |s: &Sample| s.found + s.miss;
        let transferred = x.tps3(|s| s.transferred);
        let mut t = BTreeMap::new();
        t.insert("putTps".into(), x.tps3(|s| s.put));
        t.insert("getFoundTps".into(), x.tps3(|s| s.found));
        t.insert("getMissTps".into(), x.tps3(|s| s.miss));
        t.insert("getTotalTps".into(), x.tps3(found_or_miss));
        t.insert("getTransferredTps".into(), transferred.clone());
        // The misspelling older Java brokers used, which the dashboard still reads.
        t.insert("getTransferedTps".into(), transferred);
        t.insert("putMessageTimesTotal".into(), now.put.to_string());
        t.insert("msgPutTotalTodayNow".into(), now.put.to_string());
        t.insert(
            "msgPutTotalTodayMorning".into(),
            x.put_today_morning.to_string(),
        );
        t.insert(
            "msgPutTotalYesterdayMorning".into(),
            x.put_yesterday_morning.to_string(),
        );
        t.insert("msgGetTotalTodayNow".into(), now.transferred.to_string());
        t.insert(
            "msgGetTotalTodayMorning".into(),
            x.get_today_morning.to_string(),
        );
        t.insert(
            "msgGetTotalYesterdayMorning".into(),
            x.get_yesterday_morning.to_string(),
        );
        let ratio = format!("{:?}", x.disk_ratio.unwrap_or(-1.0));
        let path = s0.ctx.cfg.store.commit_log_dir();
        t.insert(
            format!("commitLogDiskRatio_{}", path.display()),
            ratio.clone(),
        );
        t.insert("commitLogDiskRatio".into(), ratio.clone());
        t.insert("consumeQueueDiskRatio".into(), ratio);
        t
    })
}

/// Store timestamp of the first record of the commit log, -1 when there is none.
pub(crate) fn earliest_message_time(s: &Shard) -> i64 {
    let min = s.ctx.writer.min_phy_offset();
    if min >= s.ctx.writer.max_phy_offset() {
        return -1;
    }
    let mut reader = s.reader();
    let size = match reader.read(min, 4) {
        Ok(h) => u32::from_be_bytes([h[0], h[1], h[2], h[3]]),
        Err(_) => return -1,
    };
    let max = s.ctx.cfg.store.max_record_len() as u32;
    if size == 0 || size > max {
        return -1;
    }
    reader
        .read(min, size)
        .ok()
        .and_then(|b| message::decode(b, false).ok())
        .map_or(-1, |r| r.store_timestamp)
}

/// GET_BROKER_RUNTIME_INFO: `{"table":{...}}` of string figures.
pub async fn runtime_info(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    // Answered at once on shard 0 (no hop, nothing awaited), like any other small request.
    let mut t = if shard.id == 0 {
        sampled_figures(&shard)
    } else {
        shard
            .mesh
            .call(0, |s0| async move { sampled_figures(&s0) })
            .await?
    };
    let w = &shard.ctx.writer;
    let mut put = |k: &str, v: String| {
        t.insert(k.to_string(), v);
    };
    put("commitLogMaxOffset", w.max_phy_offset().to_string());
    put("commitLogMinOffset", w.min_phy_offset().to_string());
    put(
        "earliestMessageTimeStamp",
        earliest_message_time(&shard).to_string(),
    );
    put("brokerActive", "true".into());
    put("brokerVersion", "479".into());
    put("brokerVersionDesc", "V5_3_3".into());
    put("bootTimestamp", shard.ctx.started_ms.to_string());
    put("startAcceptSendRequestTimeStamp", "0".into());
    put("runtime", format_runtime(now_ms() - shard.ctx.started_ms));
    put("dispatchBehindBytes", "0".into());
    put("pageCacheLockTimeMills", "0".into());
    put("remainTransientStoreBufferNumbs", "2147483647".into());
    put("shardCount", shard.ctx.shard_count.to_string());
    put("sendfileBytes", load(&runtime::net::SENDFILE_BYTES));
    put(
        "sendfileFallbackBytes",
        load(&runtime::net::SENDFILE_FALLBACK_BYTES),
    );
    put("tlsCopiedBytes", load(&runtime::net::TLS_COPIED_BYTES));
    put("onewayDropped", load(&ONEWAY_DROPPED));
    let body = serde_json::json!({ "table": t });
    Ok(RemotingCommand::response_for(cmd, rc::SUCCESS, None)
        .with_body(serde_json::to_vec(&body).unwrap_or_default()))
}

fn load(c: &AtomicU64) -> String {
    c.load(Ordering::Relaxed).to_string()
}

/// Java's `StoreStatsService.getFormatRuntime`: `[ d days, h hours, m minutes, s seconds ]`.
fn format_runtime(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    format!(
        "[ {} days, {} hours, {} minutes, {} seconds ]",
        s / 86_400,
        s % 86_400 / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// GET_BROKER_HA_STATUS (907): a master's slaves, or a slave's link to its master.
pub fn ha_status(shard: &Shard, cmd: &RemotingCommand) -> RemotingCommand {
    let ctx = &shard.ctx;
    let body = crate::ha_status::runtime_info(
        ctx.role.is_slave(),
        ctx.writer.max_phy_offset(),
        ctx.cfg.ha.max_gap_not_in_sync,
        &ctx.slave_acks,
        &ctx.ha_client,
    );
    RemotingCommand::response_for(cmd, rc::SUCCESS, None).with_body(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's runtime text.
    #[test]
    fn runtime_format() {
        assert_eq!(
            format_runtime(90_061_000),
            "[ 1 days, 1 hours, 1 minutes, 1 seconds ]"
        );
    }
}
