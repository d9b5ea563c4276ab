//! `GET /api/cluster`: every broker the name servers know, by cluster, each with its runtime
//! figures from GET_BROKER_RUNTIME_INFO (version, send and pull rates, today's totals), or the
//! reason it did not answer.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use super::super::error::ConsoleError;
use super::super::Console;
use super::to_value;

/// One broker's row.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct BrokerRow {
    broker_name: String,
    broker_id: i64,
    addr: String,
    version: Option<String>,
    /// Messages stored per second (the first of putTps's windows).
    put_tps: Option<f64>,
    /// Messages sent to consumers per second (getTransferredTps's first window).
    get_transferred_tps: Option<f64>,
    msg_put_total_today_now: Option<i64>,
    msg_get_total_today_now: Option<i64>,
    boot_timestamp: Option<i64>,
    /// Why the broker gave no runtime figures.
    error: Option<String>,
}

pub fn cluster(c: &Console) -> Result<Value, ConsoleError> {
    let mut clusters: BTreeMap<String, Vec<BrokerRow>> = BTreeMap::new();
    for b in c.admin.brokers(None)? {
        let mut row = BrokerRow {
            broker_name: b.broker_name.clone(),
            broker_id: b.broker_id,
            addr: b.addr.clone(),
            ..BrokerRow::default()
        };
        match c.admin.broker_runtime_info(&b.addr) {
            Ok(kv) => {
                let t = &kv.table;
                let num = |k: &str| t.get(k).and_then(|v| v.trim().parse::<i64>().ok());
                row.version = t.get("brokerVersionDesc").cloned();
                row.put_tps = t.get("putTps").and_then(|v| first_rate(v));
                row.get_transferred_tps = t
                    .get("getTransferredTps")
                    .or_else(|| t.get("getTransferedTps"))
                    .and_then(|v| first_rate(v));
                row.msg_put_total_today_now = num("msgPutTotalTodayNow");
                row.msg_get_total_today_now = num("msgGetTotalTodayNow");
                row.boot_timestamp = num("bootTimestamp");
            }
            Err(e) => row.error = Some(e.to_string()),
        }
        clusters.entry(b.cluster).or_default().push(row);
    }
    let clusters: Vec<Value> = clusters
        .into_iter()
        .map(|(name, brokers)| json!({ "name": name, "brokers": to_value(&brokers) }))
        .collect();
    Ok(json!({ "namesrv": c.admin.namesrv_addrs(), "clusters": clusters }))
}

/// The first figure of a rate as RocketMQ writes it: `"12.50 11.00 9.87"` (its windows, the
/// shortest first).
fn first_rate(v: &str) -> Option<f64> {
    v.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    /// A rate's first window is read, whatever follows; no figure is no rate.
    #[test]
    fn first_rate() {
        assert_eq!(super::first_rate("12.50 11.00 9.87"), Some(12.5));
        assert_eq!(super::first_rate("3"), Some(3.0));
        assert_eq!(super::first_rate(" "), None);
        assert_eq!(super::first_rate("x 1"), None);
    }
}
