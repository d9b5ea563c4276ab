//! The scrape's text: a `prometheus_client` [`Collector`] over one [`Snapshot`] and the broker's
//! shared figures, encoded as OpenMetrics text with RocketMQ 5's metric names and labels
//! (Java's `BrokerMetricsConstant`, `RemotingMetricsConstant`, `DefaultStoreMetricsConstant`)
//! plus ringmq's own `ringmq_` figures.
//!
//! Names: Java 5 registers its instruments with OpenTelemetry, whose Prometheus exporter adds
//! `_total` to counters and appends an instrument's unit to its name when the name lacks it.
//! ringmq exposes the names that exporter produces: counters keep their `_total` name
//! (`prometheus_client` appends it, so counters are described without it), and the
//! millisecond instruments carry the suffix, e.g. `rocketmq_rpc_latency_milliseconds_bucket`.
//! Every point carries the common labels `cluster`, `node_type="broker"`, `node_id` (the broker
//! name) and the `metricsLabel` pairs.

use std::borrow::Cow;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::metadata::topic_validator::is_system_topic;
use crate::metrics::code_names::{request_code_name, response_code_name};
use crate::metrics::record::{
    Hist, MessageType, CREATE_TIME_BOUNDS_MS, HIST_SLOTS, MESSAGE_SIZE_BOUNDS,
    RPC_LATENCY_BOUNDS_MS,
};
use crate::metrics::snapshot::{is_retry, is_system, is_system_group, Snapshot};
use crate::writer::batch_stats::{BatchFigures, BATCH_RECORD_BOUNDS};

// The writer's records-per-batch buckets fit a `Hist`.
const _: () = assert!(BATCH_RECORD_BOUNDS.len() < HIST_SLOTS);

/// Figures the broker keeps outside the shards' maps (atomics, the writer's published offsets,
/// the store's filesystem).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BrokerFigures {
    /// Java's `brokerPermission` (6: read and write).
    pub permission: i64,
    /// Used bytes of the store's filesystem (Java: total space − free space of the store dir).
    pub storage_size_bytes: Option<u64>,
    /// Commit-log bytes written but not yet fdatasynced; None when the writer does not say.
    pub flush_behind_bytes: Option<u64>,
    /// Commit-log bytes written but not yet dispatched to consume queues.
    pub dispatch_behind_bytes: u64,
    /// now − store time of the oldest message kept, ms; None when the log is empty.
    pub reserve_time_ms: Option<i64>,
    /// Messages stored (every shard's put counter).
    pub put_messages: u64,
    /// Bytes served by sendfile/splice, and bytes that fell back to a user-space copy.
    pub zero_copy_bytes: u64,
    pub zero_copy_fallback_bytes: u64,
    /// Bytes that would have gone zero-copy but were encrypted for a TLS connection (no kTLS).
    pub tls_copied_bytes: u64,
    /// Oneway sends the broker could not store.
    pub oneway_dropped: u64,
    /// SYNC_FLUSH group commits: rounds, records, bytes, total fdatasync time (µs).
    pub group_commit: Option<[u64; 4]>,
    /// Items waiting in each shard's completion queue, by shard.
    pub completion_depths: Vec<u64>,
    /// Jobs other shards posted to each shard and it has not taken up yet, by shard.
    pub mesh_depths: Vec<u64>,
    /// The writer's batches.
    pub writer_batches: BatchFigures,
}

/// One scrape's data, handed to `prometheus_client` as a collector.
#[derive(Debug)]
pub struct Exposition {
    pub snap: Snapshot,
    pub broker: BrokerFigures,
}

type Labels<'a> = Vec<(&'static str, Cow<'a, str>)>;

fn b(v: bool) -> Cow<'static, str> {
    Cow::Borrowed(if v { "true" } else { "false" })
}

fn counter(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    points: &[(Labels<'_>, u64)],
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in points {
        ConstCounter::new(*v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

fn gauge(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    points: &[(Labels<'_>, i64)],
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    for (labels, v) in points {
        ConstGauge::new(*v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

fn histogram_point(
    m: &mut MetricEncoder,
    labels: &Labels<'_>,
    bounds: &[f64],
    h: &Hist,
) -> Result<(), std::fmt::Error> {
    let mut buckets: Vec<(f64, u64)> = bounds
        .iter()
        .zip(h.counts.iter())
        .map(|(b, c)| (*b, *c))
        .collect();
    buckets.push((f64::INFINITY, h.counts[bounds.len()]));
    m.encode_family(labels)?
        .encode_histogram::<NoLabelSet>(h.sum, h.count(), &buckets, None)
}

impl Exposition {
    fn encode_messages(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.snap;
        let mut msgs_in = Vec::new();
        let mut bytes_in = Vec::new();
        let mut sizes = Vec::new();
        for (topic, t) in &s.topics_in {
            for kind in MessageType::ALL {
                let f = t.flow[kind as usize];
                if f.msgs == 0 {
                    continue;
                }
                let labels: Labels = vec![
                    ("topic", Cow::Borrowed(topic.as_str())),
                    ("message_type", Cow::Borrowed(kind.label())),
                    ("is_system", b(is_system_topic(topic))),
                ];
                msgs_in.push((labels.clone(), f.msgs));
                bytes_in.push((labels.clone(), f.bytes));
                sizes.push((labels, t.sizes[kind as usize]));
            }
        }
        counter(e, "rocketmq_messages_in", "Messages stored", &msgs_in)?;
        counter(
            e,
            "rocketmq_throughput_in",
            "Message body bytes stored",
            &bytes_in,
        )?;
        let mut m = e.encode_descriptor(
            "rocketmq_message_size",
            "Sizes of stored message bodies",
            None,
            MetricType::Histogram,
        )?;
        for (labels, h) in &sizes {
            histogram_point(&mut m, labels, &MESSAGE_SIZE_BOUNDS, h)?;
        }
        let mut msgs_out = Vec::new();
        let mut bytes_out = Vec::new();
        for ((topic, group), f) in &s.out {
            let labels: Labels = vec![
                ("topic", Cow::Borrowed(topic.as_str())),
                ("consumer_group", Cow::Borrowed(group.as_str())),
                ("is_retry", b(is_retry(topic))),
                ("is_system", b(is_system(topic, group))),
            ];
            msgs_out.push((labels.clone(), f.msgs));
            bytes_out.push((labels, f.bytes));
        }
        counter(e, "rocketmq_messages_out", "Messages pulled", &msgs_out)?;
        counter(
            e,
            "rocketmq_throughput_out",
            "Message bytes pulled",
            &bytes_out,
        )?;
        let dlq: Vec<_> = s
            .dlq
            .iter()
            .map(|(g, n)| {
                let labels: Labels = vec![
                    ("consumer_group", Cow::Borrowed(g.as_str())),
                    ("is_system", b(is_system_group(g))),
                ];
                (labels, *n)
            })
            .collect();
        counter(
            e,
            "rocketmq_send_to_dlq_messages",
            "Messages moved to a dead-letter queue",
            &dlq,
        )?;
        let retried: Vec<_> = (s.pop_retried.iter())
            .filter_map(|(k, n)| Some((pop_labels(k.split_once('@')?), *n)))
            .collect();
        let help = "POP messages redelivered to a retry topic";
        counter(e, "rocketmq_pop_revive_retry_messages", help, &retried)?;
        let (mut commits, mut rollbacks) = (Vec::new(), Vec::new());
        for (topic, (c, r)) in &s.decisions {
            let labels: Labels = vec![("topic", Cow::Borrowed(topic.as_str()))];
            commits.push((labels.clone(), *c));
            rollbacks.push((labels, *r));
        }
        counter(
            e,
            "rocketmq_commit_messages",
            "Transactional messages committed",
            &commits,
        )?;
        counter(
            e,
            "rocketmq_rollback_messages",
            "Transactional messages rolled back",
            &rollbacks,
        )?;
        let half: Vec<_> = s
            .half_messages()
            .into_iter()
            .map(|(topic, n)| (vec![("topic", Cow::Borrowed(topic))], n as i64))
            .collect();
        gauge(
            e,
            "rocketmq_half_messages",
            "Transactional half messages not yet decided",
            None,
            &half,
        )
    }

    fn encode_rpc(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let unit = Unit::Other("milliseconds".into());
        let mut m = e.encode_descriptor(
            "rocketmq_rpc_latency",
            "Time from a request's decoding to its response",
            Some(&unit),
            MetricType::Histogram,
        )?;
        for (k, h) in &self.snap.rpc {
            let req = request_code_name(k.request_code)
                .map_or_else(|| Cow::Owned(k.request_code.to_string()), Cow::Borrowed);
            let resp = response_code_name(k.response_code)
                .map_or_else(|| Cow::Owned(k.response_code.to_string()), Cow::Borrowed);
            let labels: Labels = vec![
                ("protocol_type", Cow::Borrowed("remoting")),
                ("request_code", req),
                ("response_code", resp),
                ("is_long_polling", b(k.long_polling)),
                ("result", Cow::Borrowed(k.result.label())),
            ];
            histogram_point(&mut m, &labels, &RPC_LATENCY_BOUNDS_MS, h)?;
        }
        Ok(())
    }

    /// The creation-time histograms, a point for each outcome seen.
    fn encode_creations(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let unit = Unit::Other("milliseconds".into());
        let status = |ok: usize| Cow::Borrowed(if ok == 1 { "success" } else { "failure" });
        let mut m = e.encode_descriptor(
            "rocketmq_topic_create_execution_time",
            "Time to create or update a topic",
            Some(&unit),
            MetricType::Histogram,
        )?;
        for (ok, by_system) in self.snap.topic_creates.iter().enumerate() {
            for (system, h) in by_system.iter().enumerate() {
                if h.count() > 0 {
                    let labels: Labels = vec![
                        ("invocation_status", status(ok)),
                        ("is_system", b(system == 1)),
                    ];
                    histogram_point(&mut m, &labels, &CREATE_TIME_BOUNDS_MS, h)?;
                }
            }
        }
        let mut m = e.encode_descriptor(
            "rocketmq_consumer_group_create_execution_time",
            "Time to create or update a subscription group",
            Some(&unit),
            MetricType::Histogram,
        )?;
        for (ok, h) in self.snap.group_creates.iter().enumerate() {
            if h.count() > 0 {
                let labels: Labels = vec![("invocation_status", status(ok))];
                histogram_point(&mut m, &labels, &CREATE_TIME_BOUNDS_MS, h)?;
            }
        }
        Ok(())
    }

    fn encode_consumers(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.snap;
        let ms = Unit::Other("milliseconds".into());
        // lag, lag latency, inflight, queueing latency, ready: one series each, same labels.
        let mut series: [Vec<(Labels, i64)>; 5] = Default::default();
        for ((group, topic), l) in &s.lag {
            let labels: Labels = vec![
                ("consumer_group", Cow::Borrowed(group.as_str())),
                ("topic", Cow::Borrowed(topic.as_str())),
                ("is_retry", b(is_retry(topic))),
                ("is_system", b(is_system(topic, group))),
            ];
            let values = [
                l.messages as i64,
                l.latency_ms,
                l.inflight as i64,
                l.queueing_ms,
                l.ready as i64,
            ];
            for (points, v) in series.iter_mut().zip(values) {
                points.push((labels.clone(), v));
            }
        }
        let described = [
            (
                "rocketmq_consumer_lag_messages",
                "Messages stored but not yet consumed (committed) by the group",
                None,
            ),
            (
                "rocketmq_consumer_lag_latency",
                "Age of the group's oldest unconsumed message",
                Some(&ms),
            ),
            (
                "rocketmq_consumer_inflight_messages",
                "Messages pulled by the group but not yet committed",
                None,
            ),
            (
                "rocketmq_consumer_queueing_latency",
                "Age of the group's oldest message not yet pulled",
                Some(&ms),
            ),
            (
                "rocketmq_consumer_ready_messages",
                "Messages stored but not yet pulled by the group",
                None,
            ),
        ];
        for ((name, help, unit), points) in described.into_iter().zip(&series) {
            gauge(e, name, help, unit, points)?;
        }
        let producers: Vec<_> = s
            .meta
            .producers
            .iter()
            .map(|((lang, ver), n)| {
                let labels: Labels = vec![
                    ("language", Cow::Borrowed(lang.as_str())),
                    ("version", Cow::Borrowed(ver.as_str())),
                    ("protocol_type", Cow::Borrowed("remoting")),
                ];
                (labels, *n as i64)
            })
            .collect();
        gauge(
            e,
            "rocketmq_producer_connections",
            "Registered producer clients",
            None,
            &producers,
        )?;
        let consumers: Vec<_> = s
            .meta
            .consumers
            .iter()
            .map(|((group, lang, ver, mode), n)| {
                let labels: Labels = vec![
                    ("consumer_group", Cow::Borrowed(group.as_str())),
                    ("language", Cow::Borrowed(lang.as_str())),
                    ("version", Cow::Borrowed(ver.as_str())),
                    ("consume_mode", Cow::Borrowed(mode)),
                    ("protocol_type", Cow::Borrowed("remoting")),
                    ("is_system", b(is_system_group(group))),
                ];
                (labels, *n as i64)
            })
            .collect();
        gauge(
            e,
            "rocketmq_consumer_connections",
            "Registered consumer clients",
            None,
            &consumers,
        )
    }

    fn encode_broker(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let none: Labels = Vec::new();
        let f = &self.broker;
        let one = |v: i64| [(none.clone(), v)];
        gauge(
            e,
            "rocketmq_broker_permission",
            "Broker permission",
            None,
            &one(f.permission),
        )?;
        let meta = &self.snap.meta;
        gauge(
            e,
            "rocketmq_topic_number",
            "Topics",
            None,
            &one(meta.topics as i64),
        )?;
        gauge(
            e,
            "rocketmq_consumer_group_number",
            "Subscription groups",
            None,
            &one(meta.groups as i64),
        )?;
        let storage: Labels = vec![
            ("storage_type", Cow::Borrowed("local")),
            ("storage_medium", Cow::Borrowed("disk")),
        ];
        let st = |v: i64| [(storage.clone(), v)];
        if let Some(used) = f.storage_size_bytes {
            gauge(
                e,
                "rocketmq_storage_size",
                "Used bytes of the store's filesystem",
                Some(&Unit::Bytes),
                &st(used as i64),
            )?;
        }
        if let Some(behind) = f.flush_behind_bytes {
            gauge(
                e,
                "rocketmq_storage_flush_behind",
                "Commit-log bytes not yet flushed",
                Some(&Unit::Bytes),
                &st(behind as i64),
            )?;
        }
        gauge(
            e,
            "rocketmq_storage_dispatch_behind",
            "Commit-log bytes not yet dispatched",
            Some(&Unit::Bytes),
            &st(f.dispatch_behind_bytes as i64),
        )?;
        if let Some(ms) = f.reserve_time_ms {
            gauge(
                e,
                "rocketmq_storage_message_reserve_time",
                "Age of the oldest message kept",
                Some(&Unit::Other("milliseconds".into())),
                &st(ms),
            )?;
        }
        self.encode_ringmq(e)
    }

    fn encode_ringmq(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let none: Labels = Vec::new();
        let f = &self.broker;
        let one = |v: u64| [(none.clone(), v)];
        counter(
            e,
            "ringmq_zero_copy_bytes",
            "Message bytes served by sendfile or splice",
            &one(f.zero_copy_bytes),
        )?;
        counter(
            e,
            "ringmq_zero_copy_fallback_bytes",
            "Message bytes served through a user-space copy",
            &one(f.zero_copy_fallback_bytes),
        )?;
        counter(
            e,
            "ringmq_tls_copied_bytes",
            "Message bytes encrypted for TLS connections instead of sent zero-copy (no kTLS)",
            &one(f.tls_copied_bytes),
        )?;
        counter(
            e,
            "ringmq_oneway_dropped",
            "Oneway sends not stored",
            &one(f.oneway_dropped),
        )?;
        counter(
            e,
            "ringmq_metrics_dropped",
            "Records not kept because a shard's metrics map was full",
            &one(self.snap.dropped),
        )?;
        let by_shard = |depths: &[u64]| -> Vec<(Labels, i64)> {
            depths
                .iter()
                .enumerate()
                .map(|(i, d)| (vec![("shard", Cow::Owned(i.to_string()))], *d as i64))
                .collect()
        };
        gauge(
            e,
            "ringmq_completion_queue_depth",
            "Writer completions waiting for their shard",
            None,
            &by_shard(&f.completion_depths),
        )?;
        gauge(
            e,
            "ringmq_mesh_queue_depth",
            "Jobs other shards posted to the shard, not yet taken up",
            None,
            &by_shard(&f.mesh_depths),
        )?;
        let w = &f.writer_batches;
        counter(
            e,
            "ringmq_writer_batches",
            "Batches the writer wrote",
            &one(w.batches),
        )?;
        counter(
            e,
            "ringmq_writer_appends",
            "Appends (send requests) in the writer's batches",
            &one(w.appends),
        )?;
        counter(
            e,
            "ringmq_writer_records",
            "Records in the writer's batches",
            &one(w.records),
        )?;
        counter(
            e,
            "ringmq_writer_bytes",
            "Commit-log bytes in the writer's batches",
            &one(w.bytes),
        )?;
        let bounds: Vec<f64> = BATCH_RECORD_BOUNDS.iter().map(|b| *b as f64).collect();
        let mut sizes = Hist {
            sum: w.records as f64,
            ..Hist::default()
        };
        sizes.counts[..w.by_records.len()].copy_from_slice(&w.by_records);
        let mut m = e.encode_descriptor(
            "ringmq_writer_batch_records",
            "Records per batch the writer wrote",
            None,
            MetricType::Histogram,
        )?;
        histogram_point(&mut m, &none, &bounds, &sizes)?;
        if let Some([rounds, records, bytes, sync_us]) = f.group_commit {
            counter(
                e,
                "ringmq_group_commit_rounds",
                "SYNC_FLUSH fdatasync rounds",
                &one(rounds),
            )?;
            counter(
                e,
                "ringmq_group_commit_records",
                "Records made durable by group commits",
                &one(records),
            )?;
            counter(
                e,
                "ringmq_group_commit_bytes",
                "Commit-log bytes made durable by group commits",
                &one(bytes),
            )?;
            counter(
                e,
                "ringmq_group_commit_sync_microseconds",
                "Time in group-commit fdatasync rounds",
                &one(sync_us),
            )?;
        }
        Ok(())
    }
}

impl Collector for Exposition {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.encode_messages(&mut e)?;
        self.encode_rpc(&mut e)?;
        self.encode_creations(&mut e)?;
        self.encode_consumers(&mut e)?;
        self.encode_broker(&mut e)
    }
}

/// The OpenMetrics text of one scrape, every point with `common` labels.
pub fn render(common: Vec<(String, String)>, exp: Exposition) -> String {
    let mut registry = Registry::with_labels(
        common
            .into_iter()
            .map(|(k, v)| (Cow::Owned(k), Cow::Owned(v))),
    );
    registry.register_collector(Box::new(exp));
    let mut out = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
        // Writing into a String cannot fail; say so in the body rather than serve half a scrape.
        return format!("# encoding failed: {e}\n# EOF\n");
    }
    out
}

/// The labels of a POP redelivery count: (topic, group) and Java's put status.
fn pop_labels<'a>((topic, group): (&'a str, &'a str)) -> Labels<'a> {
    let put = ("put_status", Cow::Borrowed("PUT_OK"));
    vec![
        ("consumer_group", Cow::Borrowed(group)),
        ("topic", Cow::Borrowed(topic)),
        put,
    ]
}

#[cfg(test)]
mod tests;
