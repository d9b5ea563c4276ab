//! Proves, on stable Rust and in every CI run, the properties the cargo-fuzz targets assert:
//! each target body (fuzz/src/lib.rs, included here verbatim) runs over 20k seeded inputs,
//! half random bytes and half mutations of valid seeds, without a panic or a failed property.
//! Inputs a fuzzer once failed on are kept in fuzz/regressions/<target>/ and replayed here.
//! `RINGMQ_WRITE_FUZZ_CORPUS=1 cargo test --test fuzz_smoke write_corpus` regenerates the seed
//! corpora in fuzz/corpus/<target>/ from the same valid seeds.

#[path = "../../fuzz/src/lib.rs"]
mod bodies;

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use ringmq::protocol::batch::{encode_batch, BatchEntry};
use ringmq::protocol::message::{self, MessageToStore};
use ringmq::protocol::{RemotingCommand, SerializeType};

/// Inputs per target and run.
const RUNS: usize = 20_000;

type Body = fn(&[u8]);

fn targets() -> Vec<(&'static str, Body, Vec<Vec<u8>>)> {
    vec![
        ("frame_stream", bodies::frame_stream as Body, frame_seeds()),
        (
            "command_json",
            bodies::command_json,
            command_seeds(SerializeType::Json),
        ),
        (
            "command_binary",
            bodies::command_binary,
            command_seeds(SerializeType::RocketMq),
        ),
        ("typed_headers", bodies::typed_headers, typed_header_seeds()),
        ("batch_body", bodies::batch_body, batch_seeds()),
        (
            "properties_string",
            bodies::properties_string,
            property_seeds(),
        ),
        ("stored_record", bodies::stored_record, record_seeds()),
        ("sql92", bodies::sql92, sql_seeds()),
        (
            "auth_check",
            bodies::auth_check,
            command_seeds(SerializeType::Json),
        ),
    ]
}

fn sample_commands() -> Vec<RemotingCommand> {
    let send = RemotingCommand::new_request(310)
        .with_ext("a", "pg")
        .with_ext("b", "TopicA")
        .with_ext("c", "TBW102")
        .with_ext("d", 4)
        .with_ext("e", 1)
        .with_ext("f", 0)
        .with_ext("g", 1_700_000_000_000i64)
        .with_ext("h", 0)
        .with_ext("i", "TAGS\u{1}t\u{2}")
        .with_ext("j", 0)
        .with_ext("k", false)
        .with_body(b"hello".to_vec());
    let pull = RemotingCommand::new_request(11)
        .with_ext("consumerGroup", "cg")
        .with_ext("topic", "TopicA")
        .with_ext("queueId", 0)
        .with_ext("queueOffset", 7)
        .with_ext("maxMsgNums", 32)
        .with_ext("sysFlag", 6)
        .with_ext("commitOffset", 0)
        .with_ext("suspendTimeoutMillis", 15000)
        .with_ext("subscription", "*")
        .with_ext("subVersion", 0);
    let mut resp = RemotingCommand::response_for(&pull, 19, Some("not found".into()));
    resp.set_ext("nextBeginOffset", 7);
    vec![send, pull, resp]
}

fn encoded(cmd: &RemotingCommand, st: SerializeType) -> Vec<u8> {
    let mut c = cmd.clone();
    c.serialize_type = st;
    let mut b = BytesMut::new();
    c.encode(&mut b).unwrap();
    b.to_vec()
}

fn frame_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for c in sample_commands() {
        out.push(encoded(&c, SerializeType::Json));
        out.push(encoded(&c, SerializeType::RocketMq));
    }
    let two = [out[0].clone(), out[3].clone()].concat();
    out.push(two);
    out
}

/// The fuzz input of command_json/command_binary: u16 header length, header, body.
fn command_seeds(st: SerializeType) -> Vec<Vec<u8>> {
    sample_commands()
        .iter()
        .map(|c| {
            let f = encoded(c, st);
            let header_len = u32::from_be_bytes([0, f[5], f[6], f[7]]) as u16;
            let mut v = header_len.to_be_bytes().to_vec();
            v.extend_from_slice(&f[8..]);
            v
        })
        .collect()
}

fn typed_header_seeds() -> Vec<Vec<u8>> {
    // (index into WIRE_NAMES, value) pairs separated by 0xff.
    let pairs: &[&[(u8, &str)]] = &[
        &[
            (0, "pg"),
            (1, "TopicA"),
            (3, "4"),
            (4, "1"),
            (6, "1700000000000"),
            (10, "false"),
        ],
        &[
            (14, "TopicA"),
            (15, "0"),
            (16, "7"),
            (17, "cg"),
            (18, "32"),
            (19, "6"),
        ],
        &[
            (14, "T"),
            (15, "-1"),
            (16, "99999999999999999999"),
            (19, "x"),
        ],
    ];
    pairs
        .iter()
        .map(|ps| {
            let mut v = Vec::new();
            for (i, val) in ps.iter() {
                v.push(*i);
                v.extend_from_slice(val.as_bytes());
                v.push(0xff);
            }
            v
        })
        .collect()
}

fn batch_seeds() -> Vec<Vec<u8>> {
    let entries = [
        BatchEntry {
            flag: 0,
            body: Bytes::from_static(b"one"),
            properties: "TAGS\u{1}a\u{2}".into(),
        },
        BatchEntry {
            flag: 3,
            body: Bytes::from_static(b"second body"),
            properties: String::new(),
        },
    ];
    let mut one = BytesMut::new();
    encode_batch(entries[..1].iter(), &mut one).unwrap();
    let mut two = BytesMut::new();
    encode_batch(entries.iter(), &mut two).unwrap();
    vec![one.to_vec(), two.to_vec()]
}

fn property_seeds() -> Vec<Vec<u8>> {
    [
        "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}",
        "UNIQ_KEY\u{1}0A0B\u{2}a\u{1}b\u{1}c\u{2}a\u{1}z",
        "\u{1}x\u{2}k\u{1}\u{2}\u{2}",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

fn record_seeds() -> Vec<Vec<u8>> {
    let v4: SocketAddr = "10.0.0.1:1234".parse().unwrap();
    let v6: SocketAddr = "[::1]:10911".parse().unwrap();
    let mut out = Vec::new();
    for (sys_flag, host) in [(0, v4), (0x10 | 0x20, v6)] {
        let msg = MessageToStore {
            topic: "TopicA",
            queue_id: 2,
            flag: 0,
            sys_flag,
            born_timestamp: 1_700_000_000_000,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"stored body",
            properties: "TAGS\u{1}a\u{2}",
        };
        let mut b = BytesMut::new();
        message::encode(&msg, &mut b).unwrap();
        message::patch(&mut b, 5, 4096, 1_700_000_000_001);
        out.push(b.to_vec());
    }
    out
}

fn sql_seeds() -> Vec<Vec<u8>> {
    [
        "a > 3 AND b = 'x'\0a\u{1}5\u{2}b\u{1}x\u{2}",
        "TAGS IN ('A', 'B') OR (c BETWEEN 1 AND 10 AND d IS NOT NULL)\0TAGS\u{1}A\u{2}",
        "NOT (x <> -2.5e3) AND y = 'ab' AND z IS NULL\0x\u{1}1\u{2}",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

/// xorshift64*: deterministic, so a failure reproduces from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A libFuzzer-like mutation: flips, overwrites with interesting bytes, inserts, deletes,
/// truncates, or splices in another seed.
fn mutate(rng: &mut Rng, seed: &[u8], others: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        let last = v.len().saturating_sub(1);
        match rng.below(7) {
            0 if !v.is_empty() => v[at.min(last)] ^= 1 << rng.below(8),
            1 if !v.is_empty() => {
                const SPECIAL: [u8; 8] = [0, 1, 2, 0x7f, 0x80, 0xff, b'{', b'\''];
                v[at.min(last)] = SPECIAL[rng.below(SPECIAL.len())];
            }
            2 => v.insert(at, rng.next() as u8),
            3 if at < v.len() => {
                v.remove(at);
            }
            4 => v.truncate(at),
            5 => {
                let o = &others[rng.below(others.len())];
                let from = rng.below(o.len());
                v.splice(at..at, o[from..].iter().copied().take(64));
            }
            _ if at + 4 <= v.len() => {
                let word = [0u32, 1, 0x7fff_ffff, 0xffff_ffff, 1 << 24][rng.below(5)];
                v[at..at + 4].copy_from_slice(&word.to_be_bytes());
            }
            _ => {}
        }
    }
    v
}

#[test]
fn every_fuzz_body_survives_seeded_inputs() {
    for (name, body, seeds) in targets() {
        let mut rng = Rng(name.bytes().fold(0x5EED_0000_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
        }));
        for s in &seeds {
            body(s);
        }
        for i in 0..RUNS {
            let input = if i % 2 == 0 {
                let len = rng.below(300);
                (0..len).map(|_| rng.next() as u8).collect()
            } else {
                let seed = &seeds[rng.below(seeds.len())];
                mutate(&mut rng, seed, &seeds)
            };
            let outcome = std::panic::catch_unwind(|| body(&input));
            assert!(
                outcome.is_ok(),
                "{name} failed on run {i}, input {:02x?}",
                input
            );
        }
    }
}

/// Inputs the fuzzers once failed on (fuzz/regressions/<target>/) stay fixed.
#[test]
fn past_fuzz_findings_pass() {
    let root = std::path::Path::new(&manifest_dir()).join("fuzz/regressions");
    let mut ran = 0;
    for (name, body, _) in targets() {
        let Ok(dir) = std::fs::read_dir(root.join(name)) else {
            continue;
        };
        for entry in dir {
            let path = entry.unwrap().path();
            body(&std::fs::read(&path).unwrap());
            ran += 1;
        }
    }
    assert!(
        ran > 0,
        "no regression inputs found under {}",
        root.display()
    );
}

/// The seeds are valid inputs: each decodes (so a decoder change that rejects them shows up).
#[test]
fn seeds_are_valid() {
    for f in frame_seeds() {
        let mut b = BytesMut::from(&f[..]);
        let frame = ringmq::protocol::frame::split_frame(&mut b, 1 << 20)
            .unwrap()
            .unwrap();
        RemotingCommand::decode(frame).unwrap();
    }
    for r in record_seeds() {
        message::decode(&r, true).unwrap();
    }
    for b in batch_seeds() {
        ringmq::protocol::batch::decode_batch(&Bytes::from(b), 16).unwrap();
    }
    for s in sql_seeds() {
        let expr = s.split(|&b| b == 0).next().unwrap();
        ringmq::filter::Sql92Filter::compile(std::str::from_utf8(expr).unwrap()).unwrap();
    }
}

#[test]
fn write_corpus() {
    if std::env::var_os("RINGMQ_WRITE_FUZZ_CORPUS").is_none() {
        return;
    }
    let root = std::path::Path::new(&manifest_dir()).join("fuzz/corpus");
    for (name, _, seeds) in targets() {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for (i, s) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}")), s).unwrap();
        }
    }
}

/// The checkout being tested, read at run time: the compile-time value names whichever checkout
/// last built this binary in a shared target dir.
fn manifest_dir() -> std::ffi::OsString {
    std::env::var_os("CARGO_MANIFEST_DIR").expect("run by cargo test")
}
