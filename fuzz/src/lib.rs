//! Bodies of ringmq's fuzz targets, one `pub fn(&[u8])` per decoder that reads network or disk
//! input. The libFuzzer targets in `fuzz_targets/` call these; `tests/house/fuzz_smoke.rs` in the
//! main crate includes this same file (`#[path]`) and runs every body over seeded random and
//! mutated valid inputs, so CI checks the same properties on stable Rust.
//!
//! Invariants each body asserts, beyond "never panics": a decoded value re-encodes to bytes that
//! decode to the same value (frames, both header encodings, batches, properties, stored
//! records); a decoder never claims more bytes than it was given; a SQL92 filter that compiles
//! evaluates to a plain bool for any property lookup.

use bytes::{Bytes, BytesMut};
use ringmq::protocol::message::{self, MessageToStore};
use ringmq::protocol::{
    batch, codes, frame, headers, pop, properties, RemotingCommand, SerializeType,
};

/// Largest frame the bodies accept: small so a fuzzer does not waste time on huge lengths.
const FUZZ_MAX_FRAME_LEN: usize = 1 << 20;

/// A byte stream split into frames, each decoded as a command: the read loop of a connection.
pub fn frame_stream(data: &[u8]) {
    let mut buf = BytesMut::from(data);
    loop {
        let before = buf.len();
        match frame::split_frame(&mut buf, FUZZ_MAX_FRAME_LEN) {
            Ok(Some(f)) => {
                assert_eq!(
                    before - buf.len(),
                    4 + f.len(),
                    "split_frame consumed wrongly"
                );
                if let Ok(cmd) = RemotingCommand::decode(f) {
                    assert_round_trip(&cmd);
                }
            }
            Ok(None) => {
                assert_eq!(buf.len(), before, "split_frame consumed a partial frame");
                return;
            }
            Err(_) => return,
        }
    }
}

/// A frame body whose header-length word says JSON (serialize type 0).
pub fn command_json(data: &[u8]) {
    command_with_type(data, 0);
}

/// A frame body whose header-length word says ROCKETMQ binary (serialize type 1).
pub fn command_binary(data: &[u8]) {
    command_with_type(data, 1);
}

fn command_with_type(data: &[u8], serialize_type: u8) {
    // First two bytes pick how much of the rest is header; the remainder is the body.
    let (split, rest) = match data {
        [a, b, rest @ ..] => (u16::from_be_bytes([*a, *b]) as usize, rest),
        _ => (0, data),
    };
    let header_len = split.min(rest.len()) as u32;
    let mut f = Vec::with_capacity(4 + rest.len());
    f.extend_from_slice(&(header_len | (u32::from(serialize_type) << 24)).to_be_bytes());
    f.extend_from_slice(rest);
    if let Ok(cmd) = RemotingCommand::decode(Bytes::from(f)) {
        assert_round_trip(&cmd);
        headers_of(&cmd);
    }
}

/// encode(cmd) splits into exactly one frame that decodes back to `cmd`.
fn assert_round_trip(cmd: &RemotingCommand) {
    let mut out = BytesMut::new();
    if cmd.encode(&mut out).is_err() {
        return;
    }
    let f = frame::split_frame(&mut out, usize::MAX >> 1)
        .expect("re-encoded frame invalid")
        .expect("re-encoded frame incomplete");
    assert!(out.is_empty(), "encode wrote bytes past its frame");
    let again = RemotingCommand::decode(f).expect("re-encoded command does not decode");
    // A JSON header may carry the language as a number past the table; it is kept as read
    // but rendered by name, so it comes back as OTHER (found by this target; harmless).
    let mut want = cmd.clone();
    if want.serialize_type == SerializeType::Json {
        want.language = codes::language_code(codes::language_name(want.language));
    }
    assert_eq!(again, want, "command changed through encode/decode");
}

/// Wire names the typed headers read; the typed-header body builds extFields from them.
const WIRE_NAMES: &[&str] = &[
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
    "i",
    "j",
    "k",
    "l",
    "m",
    "n",
    "topic",
    "queueId",
    "queueOffset",
    "consumerGroup",
    "maxMsgNums",
    "sysFlag",
    "commitOffset",
    "suspendTimeoutMillis",
    "subscription",
    "subVersion",
    "expressionType",
    "maxMsgBytes",
    "offset",
    "brokerName",
    "brokerAddr",
    "clusterName",
    "brokerId",
    "haServerAddr",
    "producerGroup",
    "defaultTopic",
    "readQueueNums",
    "writeQueueNums",
    "perm",
    "order",
    "timestamp",
    "key",
    "maxNum",
    "beginTimestamp",
    "endTimestamp",
    "msgId",
    "transactionId",
    "commitLogOffset",
    "tranStateTableOffset",
    "commitOrRollback",
    "fromTransactionCheck",
    "delayLevel",
    "originMsgId",
    "originTopic",
    "maxReconsumeTimes",
    "unitMode",
    "namespace",
    "value",
    "compressed",
    "group",
    "clientID",
    "topicFilterType",
    "topicSysFlag",
    "heartbeatTimeoutMillis",
    "epoch",
    "nextBeginOffset",
    "minOffset",
    "maxOffset",
    "extraInfo",
    "invisibleTime",
    "pollTime",
    "bornTime",
    "initMode",
    "expType",
    "exp",
    "attemptId",
    "popTime",
    "reviveQid",
    "restNum",
    "startOffsetInfo",
    "msgOffsetInfo",
];

/// extFields made of (name index, value) pairs from the input, read by every typed header.
pub fn typed_headers(data: &[u8]) {
    let mut cmd = RemotingCommand::new_request(0);
    for chunk in data.split(|&b| b == 0xff) {
        let Some((&idx, value)) = chunk.split_first() else {
            continue;
        };
        let name = WIRE_NAMES[idx as usize % WIRE_NAMES.len()];
        cmd.set_ext(name, String::from_utf8_lossy(value));
    }
    headers_of(&cmd);
}

/// Runs every request header's `from_command`; each must return, never panic.
fn headers_of(cmd: &RemotingCommand) {
    macro_rules! all {
        ($($h:ident),* $(,)?) => { $( let _ = headers::$h::from_command(cmd); )* };
    }
    all!(
        SendMessageRequestHeader,
        PullMessageRequestHeader,
        PullMessageResponseHeader,
        SendMessageResponseHeader,
        QueryConsumerOffsetRequestHeader,
        UpdateConsumerOffsetRequestHeader,
        GetMaxOffsetRequestHeader,
        GetMinOffsetRequestHeader,
        GetEarliestMsgStoretimeRequestHeader,
        SearchOffsetRequestHeader,
        UnregisterClientRequestHeader,
        GetConsumerListByGroupRequestHeader,
        NotifyConsumerIdsChangedRequestHeader,
        ConsumerSendMsgBackRequestHeader,
        QueryMessageRequestHeader,
        ViewMessageByIdRequestHeader,
        EndTransactionRequestHeader,
        CheckTransactionStateRequestHeader,
        CreateTopicRequestHeader,
        DeleteTopicRequestHeader,
        DeleteSubscriptionGroupRequestHeader,
        RegisterBrokerRequestHeader,
        UnregisterBrokerRequestHeader,
        GetRouteInfoRequestHeader,
        QueryDataVersionRequestHeader,
        BrokerHeartbeatRequestHeader,
        PutKvConfigRequestHeader,
        GetKvConfigRequestHeader,
        DeleteKvConfigRequestHeader,
        GetKvListByNamespaceRequestHeader,
        RegisterTopicRequestHeader,
        DeleteTopicFromNamesrvRequestHeader,
        PopMessageRequestHeader,
        PopMessageResponseHeader,
        PeekMessageRequestHeader,
        AckMessageRequestHeader,
        ChangeInvisibleTimeRequestHeader,
        NotificationRequestHeader,
        PollingInfoRequestHeader,
    );
    // The POP formats carried in header values: a handle that parses prints as one that parses
    // back to it (numbers such as `+5` or `007` print in their plain form).
    if let Some(raw) = cmd.ext("extraInfo") {
        if let Ok(h) = pop::ExtraInfo::parse(raw) {
            let again = pop::ExtraInfo::parse(&h.to_string());
            assert_eq!(again.ok(), Some(h), "a receipt handle round-trips");
        }
    }
    if let Some(raw) = cmd.ext("startOffsetInfo") {
        let _ = pop::parse_start_offset_info(raw);
    }
    if let Some(raw) = cmd.ext("msgOffsetInfo") {
        let _ = pop::parse_msg_offset_info(raw);
    }
}

/// A SEND_BATCH_MESSAGE body: decoded entries re-encode to bytes that decode the same.
pub fn batch_body(data: &[u8]) {
    let body = Bytes::copy_from_slice(data);
    let Ok(entries) = batch::decode_batch(&body, ringmq::constants::MAX_BATCH_MESSAGES) else {
        return;
    };
    assert!(
        !entries.is_empty(),
        "a decoded batch has at least one entry"
    );
    let total: usize = entries.iter().map(|e| e.body.len()).sum();
    assert!(total <= data.len(), "batch bodies longer than the input");
    let mut out = BytesMut::new();
    batch::encode_batch(entries.iter(), &mut out).expect("re-encode decoded batch");
    let again = batch::decode_batch(&out.freeze(), usize::MAX).expect("re-decode batch");
    assert_eq!(again.len(), entries.len());
    for (a, b) in again.iter().zip(&entries) {
        assert_eq!(
            (a.flag, &a.body, &a.properties),
            (b.flag, &b.body, &b.properties)
        );
    }
}

/// The properties string: parse is idempotent through encode, get agrees with parse, and
/// remove_keys removes exactly the named keys.
pub fn properties_string(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    let parsed = properties::parse(&s);
    let encoded = properties::encode(parsed.iter().map(|(k, v)| (k, v)));
    assert_eq!(
        properties::parse(&encoded),
        parsed,
        "parse(encode(parse(s))) != parse(s)"
    );
    // Only the first keys: `get` scans the whole string, so checking all would make this body
    // quadratic and the fuzzer slow (parse itself is quadratic in the pair count; see report).
    for (k, v) in parsed.iter().take(16) {
        assert_eq!(
            properties::get(&s, k),
            Some(v.as_str()),
            "get disagrees with parse"
        );
    }
    if let Some((k, _)) = parsed.first() {
        let removed = properties::remove_keys(&s, &[k.as_str()]);
        let left = properties::parse(&removed);
        assert_eq!(left.len() + 1, parsed.len());
        assert!(left.iter().all(|(lk, _)| lk != k));
    }
}

/// A stored record as recovery and the pull path read it from a commit-log segment.
pub fn stored_record(data: &[u8]) {
    let _ = message::peek_total_size(data);
    for check_crc in [false, true] {
        let Ok(rec) = message::decode(data, check_crc) else {
            continue;
        };
        assert!(
            rec.total_size as usize <= data.len(),
            "record longer than the input"
        );
        if rec.properties.len() > ringmq::constants::MAX_PROPERTIES_LEN {
            continue;
        }
        // Re-encoding the decoded fields gives back the same record (offsets and store
        // timestamp are patched in by the writer, so patch them the same way).
        let msg = MessageToStore {
            topic: rec.topic,
            queue_id: rec.queue_id,
            flag: rec.flag,
            sys_flag: rec.sys_flag,
            born_timestamp: rec.born_timestamp,
            born_host: rec.born_host,
            store_host: rec.store_host,
            reconsume_times: rec.reconsume_times,
            prepared_transaction_offset: rec.prepared_transaction_offset,
            body: rec.body,
            properties: rec.properties,
        };
        let mut out = BytesMut::new();
        if message::encode(&msg, &mut out).is_err() {
            continue;
        }
        message::patch(
            &mut out,
            rec.queue_offset,
            rec.phy_offset,
            rec.store_timestamp,
        );
        let again = message::decode(&out, true).expect("re-encoded record does not decode");
        assert_eq!(again.body, rec.body);
        assert_eq!(again.topic, rec.topic);
        assert_eq!(again.properties, rec.properties);
        assert_eq!(again.queue_offset, rec.queue_offset);
        assert_eq!(again.phy_offset, rec.phy_offset);
    }
}

/// A SQL92 selector: compile never panics, and a compiled filter evaluates (to a bool) against
/// properties taken from the same input.
pub fn sql92(data: &[u8]) {
    let (expr, props) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let expr = String::from_utf8_lossy(expr);
    let Ok(filter) = ringmq::filter::Sql92Filter::compile(&expr) else {
        return;
    };
    let props = String::from_utf8_lossy(props).into_owned();
    let parsed = properties::parse(&props);
    let get = |k: &str| {
        parsed
            .iter()
            .find(|(pk, _)| pk == k)
            .map(|(_, v)| v.as_str())
    };
    let _ = filter.matches(&get);
    let _ = filter.matches(&|_| None);
    // Compiling the same text again gives the same filter.
    assert_eq!(
        ringmq::filter::Sql92Filter::compile(&expr).as_ref(),
        Ok(&filter)
    );
}

/// A request checked for access (the signature path): decoding and checking never panic; a
/// request that passes authentication for a user carries that user's signature; and the same
/// request signed with the right key passes authentication while a wrong key fails. The input
/// is that of `command_json`.
pub fn auth_check(data: &[u8]) {
    use ringmq::auth::model::{User, UserStatus, UserType};
    use ringmq::auth::signature::{self, ACCESS_KEY, SIGNATURE};
    use ringmq::auth::table::{AuthSettings, AuthTable};

    let (split, rest) = match data {
        [a, b, rest @ ..] => (u16::from_be_bytes([*a, *b]) as usize, rest),
        _ => (0, data),
    };
    let mut f = Vec::with_capacity(4 + rest.len());
    f.extend_from_slice(&(split.min(rest.len()) as u32).to_be_bytes());
    f.extend_from_slice(rest);
    let Ok(mut cmd) = RemotingCommand::decode(Bytes::from(f)) else {
        return;
    };
    let table = AuthTable::new(
        vec![User {
            username: "alice".into(),
            password: "alice-secret".into(),
            user_type: UserType::Normal,
            user_status: UserStatus::Enable,
        }],
        vec![],
    );
    let both = AuthSettings {
        authentication: true,
        authorization: true,
        cluster: "DefaultCluster".into(),
        ..AuthSettings::default()
    };
    let authn = AuthSettings {
        authorization: false,
        ..both.clone()
    };
    let peer = std::net::IpAddr::from([127, 0, 0, 1]);
    let _ = table.check(&both, &cmd, peer);
    if table.check(&authn, &cmd, peer).is_ok() {
        assert!(
            signature::verify("alice-secret", &cmd.ext_fields, &cmd.body, cmd.version).is_ok(),
            "authenticated without alice's signature"
        );
    }
    cmd.set_ext(ACCESS_KEY, "alice");
    let Ok(sig) = signature::sign("alice-secret", &cmd.ext_fields, &cmd.body) else {
        return;
    };
    // The version decides whether `_UNIQUE_KEY_QUERY` is signed; sign as a current client.
    cmd.version = codes::CURRENT_VERSION;
    cmd.set_ext(SIGNATURE, &sig);
    assert!(
        table.check(&authn, &cmd, peer).is_ok(),
        "a correctly signed request was refused"
    );
    let _ = table.check(&both, &cmd, peer);
    let wrong = signature::sign("not-alice", &cmd.ext_fields, &cmd.body).unwrap_or_default();
    cmd.set_ext(SIGNATURE, &wrong);
    assert!(
        table.check(&authn, &cmd, peer).is_err(),
        "a request signed with another key passed"
    );
}
