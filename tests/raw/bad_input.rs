//! Proves that hostile or broken input gets an error response or a closed connection, never a
//! crash: after each case the same broker still serves a normal client.

use crate::raw_support;

use raw_support::{send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::response_code;
use ringmq::protocol::RemotingCommand;

fn still_serves(b: &RawBroker) {
    let mut c = Conn::connect(b.broker);
    let r = c.call(send_cmd("HealthT", 0, b"ok", ""));
    assert_eq!(r.code, 0, "broker stopped serving: {:?}", r.remark);
}

#[test]
fn huge_length_prefix_closes_the_connection() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    // 2 GiB - 1 length prefix followed by a little junk.
    c.write_raw(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 10]).unwrap();
    assert!(c.read().is_none(), "the connection should be closed");
    still_serves(&b);
}

#[test]
fn header_length_beyond_frame_closes_the_connection() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    // Frame of 8 bytes claiming a 1000-byte JSON header.
    let mut f = vec![0, 0, 0, 8, 0, 0, 0x03, 0xe8];
    f.extend_from_slice(b"{}{}");
    c.write_raw(&f).unwrap();
    assert!(c.read().is_none());
    still_serves(&b);
}

#[test]
fn invalid_json_header_closes_the_connection() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let header = b"{\"code\":10,\"opaque\":";
    let mut f = Vec::new();
    f.extend_from_slice(&((4 + header.len()) as u32).to_be_bytes());
    f.extend_from_slice(&(header.len() as u32).to_be_bytes());
    f.extend_from_slice(header);
    c.write_raw(&f).unwrap();
    assert!(c.read().is_none());
    still_serves(&b);
}

#[test]
fn truncated_frame_then_close_is_harmless() {
    let b = RawBroker::start(&[]);
    {
        let mut c = Conn::connect(b.broker);
        c.write_raw(&[0, 0, 1, 0, 0, 0]).unwrap();
    }
    still_serves(&b);
}

#[test]
fn unknown_code_is_not_supported() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(RemotingCommand::new_request(9999));
    assert_eq!(r.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    assert!(r.remark.unwrap().contains("9999"));
    still_serves(&b);
}

#[test]
fn missing_required_field_is_an_error_response() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let mut cmd = send_cmd("T", 0, b"x", "");
    cmd.ext_fields.remove("b");
    let r = c.call(cmd);
    assert_ne!(r.code, 0);
    assert!(r.remark.unwrap_or_default().contains('b'));
    // A pull without its topic.
    let mut pull = raw_support::pull_cmd("T", 0, 0, 0);
    pull.ext_fields.remove("topic");
    let r = c.call(pull);
    assert_ne!(r.code, 0);
    // The connection is still usable after error responses.
    let r = c.call(send_cmd("T", 0, b"x", ""));
    assert_eq!(r.code, 0);
}

#[test]
fn illegal_topic_and_queue_are_rejected() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(send_cmd("bad topic!", 0, b"x", ""));
    assert_eq!(r.code, response_code::INVALID_PARAMETER);
    let r = c.call(send_cmd("QT", 77, b"x", ""));
    assert_eq!(r.code, response_code::INVALID_PARAMETER);
    still_serves(&b);
}

#[test]
fn random_bytes_never_crash_the_broker() {
    let b = RawBroker::start(&[]);
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..50 {
        let mut c = Conn::connect(b.broker);
        let mut junk = vec![0u8; 300];
        for x in junk.iter_mut() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *x = seed as u8;
        }
        // Keep lengths small so a junk prefix cannot make the broker wait for a huge frame.
        junk[0] = 0;
        let _ = c.write_raw(&junk);
        let _ = c.stream.shutdown(std::net::Shutdown::Write);
        while c.read_lenient() {}
    }
    still_serves(&b);
}
