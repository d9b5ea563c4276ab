//! The broker's metrics: what shards record (`record`), what a scrape gathers from every shard
//! (`snapshot`), its OpenMetrics text with RocketMQ 5's names (`exposition`, through the
//! `prometheus_client` crate), the label names of request and response codes (`code_names`),
//! and the Prometheus endpoint (`metricsExporterType=PROM`), served here.
//!
//! The endpoint is a task on shard 0's executor (no thread of its own): it accepts on
//! `metricsPromExporterHost:metricsPromExporterPort`, reads one HTTP/1.1 request per connection
//! (parsed by `httparse`, at most `REQUEST_MAX` bytes, within `READ_TIMEOUT`), answers
//! `GET /metrics` with the scrape, any other path with 404, another method with 405, and a
//! malformed or oversized request with 400, then closes the connection. At most
//! `CONNECTIONS_MAX` connections are served at once; more are closed on accept. A scrape asks
//! every shard for its figures with one `Mesh::call` each (see `snapshot` for why), so
//! Prometheus's scrape interval is the only load it adds.

pub mod code_names;
pub mod exposition;
pub mod pulled;
pub mod record;
pub mod snapshot;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::completion::CompletionQueues;
use crate::error::BrokerError;
use crate::metrics::exposition::{BrokerFigures, Exposition};
use crate::metrics::record::{RpcKey, RpcResult};
use crate::protocol::RemotingCommand;
use crate::remoting::Outbound;
use crate::runtime;
use crate::runtime::net::{Listener, Stream};
use crate::shard::Shard;
use crate::writer::batch_stats::BatchStats;
use crate::writer::GroupCommitStats;

/// The largest request accepted (request line and headers).
const REQUEST_MAX: usize = 8 * 1024;
/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once.
const CONNECTIONS_MAX: usize = 16;
/// After a 400, how much more of the request is read and dropped, and for how long, so that
/// closing does not reset the connection before the client has read the answer.
const DRAIN_MAX: usize = 64 * 1024;
const DRAIN_IDLE: Duration = Duration::from_millis(200);
/// Headers parsed per request.
const HEADERS_MAX: usize = 32;
/// Java's `brokerPermission` default: read and write.
const BROKER_PERMISSION: i64 = 6;

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What shard 0's endpoint is started with.
pub struct MetricsParts {
    /// Bound at start-up (so a taken port stops it); adopted by shard 0.
    pub listener: std::net::TcpListener,
    /// The writer's SYNC_FLUSH group-commit counters (None under ASYNC_FLUSH).
    pub group_commit: Option<Arc<GroupCommitStats>>,
    /// The writer's batches.
    pub batches: Arc<BatchStats>,
    /// Every shard's completion queue, for their depths.
    pub completion_queues: CompletionQueues,
}

/// The labels every point carries: Java's common labels, then `metricsLabel`'s.
fn common_labels(s0: &Shard) -> Vec<(String, String)> {
    let cfg = &s0.ctx.cfg;
    let mut l = vec![
        ("cluster".to_string(), cfg.broker_cluster_name.clone()),
        ("node_type".to_string(), "broker".to_string()),
        ("node_id".to_string(), cfg.broker_name.clone()),
    ];
    l.extend(cfg.metrics.labels.iter().cloned());
    l
}

async fn broker_figures(s0: &Rc<Shard>, sources: &Sources) -> BrokerFigures {
    use std::sync::atomic::Ordering::Relaxed;
    let ctx = &s0.ctx;
    let root = ctx.cfg.store.store_path_root_dir.clone();
    let disk = runtime::spawn_blocking(move || crate::store::retention::disk_usage(&root)).await;
    let earliest = crate::runtime_info::earliest_message_time(s0);
    BrokerFigures {
        permission: BROKER_PERMISSION,
        storage_size_bytes: disk.ok().map(|d| d.used_bytes),
        flush_behind_bytes: Some(ctx.writer.flush_behind_bytes()),
        // A record is published only with its consume-queue units (ARCHITECTURE's data flow).
        dispatch_behind_bytes: 0,
        reserve_time_ms: (earliest >= 0).then(|| crate::common::now_ms() - earliest),
        put_messages: ctx.stats.sum(0).put,
        zero_copy_bytes: runtime::net::SENDFILE_BYTES.load(Relaxed),
        zero_copy_fallback_bytes: runtime::net::SENDFILE_FALLBACK_BYTES.load(Relaxed),
        tls_copied_bytes: runtime::net::TLS_COPIED_BYTES.load(Relaxed),
        oneway_dropped: crate::stats::ONEWAY_DROPPED.load(Relaxed),
        group_commit: sources.group_commit.as_ref().map(|g| {
            [
                g.group_commits.load(Relaxed),
                g.records.load(Relaxed),
                g.bytes.load(Relaxed),
                g.sync_us_total.load(Relaxed),
            ]
        }),
        writer_batches: sources.batches.read(),
        completion_depths: sources
            .completion_queues
            .iter()
            .map(|q| q.depth() as u64)
            .collect(),
        mesh_depths: (0..s0.mesh.len())
            .map(|i| s0.mesh.queued(i) as u64)
            .collect(),
    }
}

/// What a scrape reads besides the shards.
struct Sources {
    group_commit: Option<Arc<GroupCommitStats>>,
    batches: Arc<BatchStats>,
    completion_queues: CompletionQueues,
}

/// Times one request for `rocketmq_rpc_latency`: started when the request is handed to the
/// handler, done when its response is ready (or, oneway, when it has been served).
pub struct RpcTimer {
    request_code: i32,
    oneway: bool,
    started: Instant,
}

impl RpcTimer {
    pub fn start(request_code: i32, oneway: bool) -> RpcTimer {
        RpcTimer {
            request_code,
            oneway,
            started: Instant::now(),
        }
    }

    /// Records the request with the response code read from its encoded response.
    pub fn done(self, out: Option<&Outbound>) {
        let elapsed_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let response_code = out.and_then(response_code_of);
        let result = match (self.oneway, response_code) {
            (true, _) => RpcResult::Oneway,
            (false, Some(_)) => RpcResult::Success,
            (false, None) => RpcResult::ProcessRequestFailed,
        };
        let key = RpcKey {
            request_code: self.request_code,
            response_code: response_code.unwrap_or(crate::protocol::codes::response_code::SUCCESS),
            long_polling: record::take_long_polled(),
            result,
        };
        record::rpc(key, elapsed_ms);
    }
}

/// Runs a topic's or subscription group's creation, recording how long it took and whether it
/// succeeded (Java's `rocketmq_topic_create_execution_time` and
/// `rocketmq_consumer_group_create_execution_time`).
pub async fn timed_creation(
    what: record::Creation,
    create: impl std::future::Future<Output = Result<RemotingCommand, BrokerError>>,
) -> Result<RemotingCommand, BrokerError> {
    let started = Instant::now();
    let r = create.await;
    let succeeded = matches!(&r, Ok(c) if c.code == crate::protocol::codes::response_code::SUCCESS);
    record::created(what, succeeded, started.elapsed().as_secs_f64() * 1000.0);
    r
}

/// The response code of an encoded response: the first field of ringmq's JSON header, or the
/// first two bytes of a ROCKETMQ (binary) header.
pub fn response_code_of(out: &Outbound) -> Option<i32> {
    let frame = match out {
        Outbound::Frame(b) => b,
        Outbound::ZeroCopy { prefix, .. } => prefix,
        Outbound::Close => return None,
    };
    let word = u32::from_be_bytes(frame.get(4..8)?.try_into().ok()?);
    let header = frame.get(8..)?;
    match word >> 24 {
        0 => {
            let rest = header.strip_prefix(b"{\"code\":")?;
            let end = rest
                .iter()
                .position(|c| !(c.is_ascii_digit() || *c == b'-'))?;
            std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
        }
        1 => Some(i16::from_be_bytes(header.get(..2)?.try_into().ok()?) as i32),
        _ => None,
    }
}

/// One scrape's OpenMetrics text.
async fn scrape(s0: &Rc<Shard>, sources: &Sources) -> Result<String, BrokerError> {
    let snap = snapshot::gather(s0).await?;
    let broker = broker_figures(s0, sources).await;
    Ok(exposition::render(
        common_labels(s0),
        Exposition { snap, broker },
    ))
}

/// Shard 0: serves the endpoint until the broker stops.
pub async fn serve(s0: Rc<Shard>, parts: MetricsParts) {
    let listener = Listener::from_std(parts.listener);
    let sources = Rc::new(Sources {
        group_commit: parts.group_commit,
        batches: parts.batches,
        completion_queues: parts.completion_queues,
    });
    let active = Rc::new(Cell::new(0usize));
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "metrics endpoint: accept failed");
                runtime::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if s0.is_stopping() {
            return;
        }
        if active.get() >= CONNECTIONS_MAX {
            tracing::debug!("metrics endpoint: too many connections, closing one");
            continue;
        }
        active.set(active.get() + 1);
        let (s0, active, sources) = (s0.clone(), active.clone(), sources.clone());
        runtime::spawn(async move {
            if let Err(e) = connection(&s0, &sources, stream).await {
                tracing::debug!(error = %e, "metrics endpoint: connection ended");
            }
            active.set(active.get() - 1);
        });
    }
}

/// What a request asks for, once parsed.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Metrics { head: bool },
    NotFound,
    MethodNotAllowed,
    BadRequest,
}

/// Parses `buf`; `None` while the request is incomplete and may still fit.
fn route(buf: &[u8], full: bool) -> Option<Route> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) if !full => return None,
        Ok(httparse::Status::Partial) | Err(_) => return Some(Route::BadRequest),
    }
    let path = req.path.unwrap_or("");
    let path = path.split_once('?').map_or(path, |p| p.0);
    Some(match (req.method.unwrap_or(""), path) {
        (_, p) if p != "/metrics" => Route::NotFound,
        ("GET", _) => Route::Metrics { head: false },
        ("HEAD", _) => Route::Metrics { head: true },
        _ => Route::MethodNotAllowed,
    })
}

fn response(status: &str, content_type: &str, extra: &str, body: &str, head: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

async fn connection(s0: &Rc<Shard>, sources: &Sources, mut stream: Stream) -> std::io::Result<()> {
    let mut buf = vec![0u8; REQUEST_MAX];
    let mut len = 0;
    let route = loop {
        let n = match runtime::timeout(READ_TIMEOUT, stream.read(&mut buf[len..])).await {
            Some(r) => r?,
            None => return Ok(()),
        };
        if n == 0 {
            return Ok(());
        }
        len += n;
        if let Some(r) = route(&buf[..len], len == buf.len()) {
            break r;
        }
    };
    const TEXT: &str = "text/plain; charset=utf-8";
    let bad = route == Route::BadRequest;
    let out = match route {
        Route::Metrics { head } => match scrape(s0, sources).await {
            Ok(text) => response("200 OK", CONTENT_TYPE, "", &text, head),
            Err(e) => response("503 Service Unavailable", TEXT, "", &format!("{e}\n"), head),
        },
        Route::NotFound => response(
            "404 Not Found",
            TEXT,
            "",
            "not found: the metrics are at /metrics\n",
            false,
        ),
        Route::MethodNotAllowed => response(
            "405 Method Not Allowed",
            TEXT,
            "Allow: GET, HEAD\r\n",
            "method not allowed\n",
            false,
        ),
        Route::BadRequest => response("400 Bad Request", TEXT, "", "bad request\n", false),
    };
    stream.write_all(&out).await?;
    stream.flush().await?;
    if bad {
        let mut left = DRAIN_MAX;
        while left > 0 {
            let want = left.min(buf.len());
            match runtime::timeout(DRAIN_IDLE, stream.read(&mut buf[..want])).await {
                Some(Ok(n)) if n > 0 => left -= n.min(left),
                _ => break,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GET and HEAD of /metrics (with or without a query) are scrapes; other paths are 404,
    /// other methods 405, garbage 400, and a partial request waits unless the buffer is full.
    #[test]
    fn routes() {
        let r = |s: &str| route(s.as_bytes(), false);
        assert_eq!(
            r("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Some(Route::Metrics { head: false })
        );
        assert_eq!(
            r("HEAD /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Some(Route::Metrics { head: true })
        );
        assert_eq!(r("GET / HTTP/1.1\r\n\r\n"), Some(Route::NotFound));
        assert_eq!(
            r("POST /metrics HTTP/1.1\r\n\r\n"),
            Some(Route::MethodNotAllowed)
        );
        assert_eq!(r("\x01\x02 nonsense\r\n\r\n"), Some(Route::BadRequest));
        assert_eq!(r("GET /metrics HTTP/1.1\r\nHost"), None);
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nHost", true),
            Some(Route::BadRequest)
        );
    }

    /// The response code is read back from both header encodings of an encoded response.
    #[test]
    fn response_code_from_frames() {
        use crate::protocol::{RemotingCommand, SerializeType};
        for ser in [SerializeType::Json, SerializeType::RocketMq] {
            for code in [0, 19, 2001, -3] {
                let mut c =
                    RemotingCommand::response_for(&RemotingCommand::new_request(10), code, None);
                c.serialize_type = ser;
                let out = crate::remoting::encode_frame(&c).unwrap();
                assert_eq!(response_code_of(&out), Some(code), "{ser:?} {code}");
            }
        }
        assert_eq!(response_code_of(&Outbound::Close), None);
        assert_eq!(
            response_code_of(&Outbound::Frame(bytes::Bytes::from_static(b"\0\0"))),
            None
        );
    }

    /// A response states its length and closes; HEAD sends the headers only.
    #[test]
    fn response_shape() {
        let r = String::from_utf8(response("200 OK", "text/plain", "", "abc", false)).unwrap();
        assert_eq!(
            r,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"
        );
        let h = String::from_utf8(response("200 OK", "text/plain", "", "abc", true)).unwrap();
        assert!(
            h.ends_with("Content-Length: 3\r\nConnection: close\r\n\r\n"),
            "{h}"
        );
    }
}
