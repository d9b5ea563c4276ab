//! The remoting codec's share of a send, in nanoseconds per request, in one process: decode a
//! SEND_MESSAGE_V2 request frame as a Java client writes it (JSON header, 14 short-named
//! extFields, 1 KiB body), read its send header, then build and encode the response (one
//! message id, or 32 for a batch). No sockets and no store: this is the per-request CPU that
//! W2 and W3 pay on a shard before the writer sees anything, and it is steady enough to
//! compare two builds on a noisy host where the end-to-end rates swing by a third.
//!
//! Run: `cargo bench -p ringmq-bench --bench remoting_codec` (env RINGMQ_BENCH_ITERS, default
//! 300000; the best of 5 rounds is printed, since noise only ever adds time).

use std::hint::black_box;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use ringmq::protocol::codes::request_code;
use ringmq::protocol::headers::{SendMessageRequestHeader, SendMessageResponseHeader};
use ringmq::protocol::msg_id::push_offset_msg_ids;
use ringmq::protocol::RemotingCommand;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn request_frame() -> Bytes {
    let mut cmd = RemotingCommand::new_request(request_code::SEND_MESSAGE_V2);
    SendMessageRequestHeader {
        producer_group: "BenchProducerGroup".into(),
        topic: "BenchTopic".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 3,
        sys_flag: 0,
        born_timestamp: 1_764_000_000_000,
        flag: 0,
        properties:
            "UNIQ_KEY\u{1}7F0000010F2A18B4AAC25D1E3B2C0000\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA\u{2}"
                .into(),
        reconsume_times: 0,
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: Some("broker-a".into()),
    }
    .write_to(&mut cmd);
    cmd.body = Bytes::from(vec![b'x'; 1024]);
    let mut buf = BytesMut::new();
    cmd.encode(&mut buf).expect("request encodes");
    buf.advance(4); // decode takes the frame after its length prefix
    buf.freeze()
}

/// One request's codec work; returns the response frame's length.
fn one(frame: &Bytes, ids: usize) -> usize {
    let cmd = RemotingCommand::decode(frame.clone()).expect("request decodes");
    let h = SendMessageRequestHeader::from_command(&cmd).expect("send header");
    let host = "127.0.0.1:10911".parse().expect("literal address");
    let phys: Vec<u64> = (0..ids as u64).map(|i| i << 20).collect();
    let mut msg_id = String::new();
    push_offset_msg_ids(&mut msg_id, host, &phys);
    let mut resp = RemotingCommand::response_for(&cmd, 0, None);
    SendMessageResponseHeader {
        msg_id,
        queue_id: h.queue_id,
        queue_offset: 42,
        transaction_id: Some(h.properties[9..41].to_owned()),
    }
    .write_to(&mut resp);
    let mut out = BytesMut::with_capacity(256);
    resp.encode(&mut out).expect("response encodes");
    out.len()
}

fn main() {
    let iters: usize = std::env::var("RINGMQ_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    let frame = request_frame();
    for (label, ids) in [("single send, 1 id", 1), ("batch response, 32 ids", 32)] {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t0 = Instant::now();
            let mut sink = 0;
            for _ in 0..iters {
                sink += one(black_box(&frame), ids);
            }
            black_box(sink);
            best = best.min(t0.elapsed().as_nanos() as f64 / iters as f64);
        }
        println!("{label}: {best:.0} ns per request (best of 5 x {iters})");
    }
}
