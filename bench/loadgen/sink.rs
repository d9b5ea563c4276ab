//! `sink`: a null broker that acknowledges every send at once, to measure the load
//! generator's own ceiling and CPU cost (run `ringmq-bench sink` and point a send/batch/oneway
//! run at it with `--broker`). It stores nothing: GET_MAX_OFFSET answers 0 and pulls answer
//! PULL_NOT_FOUND after their suspend time.
//!
//! Called by main. Invariants: one thread per connection; a send is answered with a response
//! pre-encoded once and patched with the request's opaque when that opaque is in the
//! generator's fixed-width range (full encode otherwise), so the sink costs about a syscall
//! per coalesced read and write.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use bytes::BytesMut;
use ringmq::protocol::codes::{request_code, response_code};
use ringmq::protocol::RemotingCommand;

use crate::template::OPAQUE_BASE;
use crate::wire::{scan_header, FrameReader};

const OPAQUE_SENTINEL: i32 = 1_999_999_999;

/// Serves until the process is killed.
pub fn serve(listen: &str) -> Result<(), String> {
    let l = TcpListener::bind(listen).map_err(|e| format!("bind {listen}: {e}"))?;
    eprintln!("sink listening on {listen}");
    for s in l.incoming() {
        let s = s.map_err(|e| format!("accept: {e}"))?;
        std::thread::spawn(move || {
            if let Err(e) = connection(s) {
                eprintln!("sink connection ended: {e}");
            }
        });
    }
    Ok(())
}

fn encode(cmd: &RemotingCommand) -> Vec<u8> {
    let mut out = BytesMut::new();
    cmd.encode(&mut out).expect("small response encodes");
    out.to_vec()
}

fn connection(s: TcpStream) -> Result<(), String> {
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut w = s.try_clone().map_err(|e| e.to_string())?;
    // The read timeout only bounds how long a quiet connection parks in read().
    let mut rd = FrameReader::new(s, Duration::from_secs(3600)).map_err(|e| e.to_string())?;
    let mut proto = RemotingCommand::new_request(request_code::SEND_MESSAGE_V2);
    proto.opaque = OPAQUE_SENTINEL;
    let mut ack = RemotingCommand::response_for(&proto, response_code::SUCCESS, None);
    for (k, v) in [
        ("msgId", "7F00000100002A9F0000000000000000"),
        ("queueId", "0"),
        ("queueOffset", "0"),
    ] {
        ack.set_ext(k, v);
    }
    let mut ack_bytes = encode(&ack);
    let needle = format!("\"opaque\":{OPAQUE_SENTINEL}");
    let at = ack_bytes
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .expect("sentinel in the encoded ack")
        + needle.len()
        - 10;
    let mut out = Vec::with_capacity(64 * 1024);
    loop {
        // Answer everything already buffered with one write.
        let mut first = true;
        loop {
            let frame = if first {
                first = false;
                rd.next_frame()?
            } else {
                rd.next_buffered()?
            };
            let Some(frame) = frame else { break };
            let h = scan_header(frame)?;
            if h.flag & 2 != 0 {
                continue; // oneway
            }
            match h.code {
                request_code::SEND_MESSAGE_V2
                | request_code::SEND_BATCH_MESSAGE
                | request_code::SEND_MESSAGE
                    if h.opaque >= OPAQUE_BASE =>
                {
                    let digits = format!("{:010}", h.opaque);
                    ack_bytes[at..at + 10].copy_from_slice(digits.as_bytes());
                    out.extend_from_slice(&ack_bytes);
                }
                code => {
                    let mut req = RemotingCommand::new_request(code);
                    req.opaque = h.opaque;
                    let mut resp =
                        RemotingCommand::response_for(&req, response_code::SUCCESS, None);
                    resp.set_ext("offset", 0);
                    if code == request_code::PULL_MESSAGE {
                        std::thread::sleep(Duration::from_millis(100));
                        resp.code = response_code::PULL_NOT_FOUND;
                        for k in [
                            "nextBeginOffset",
                            "minOffset",
                            "maxOffset",
                            "suggestWhichBrokerId",
                        ] {
                            resp.set_ext(k, 0);
                        }
                    }
                    out.extend_from_slice(&encode(&resp));
                }
            }
        }
        if !out.is_empty() {
            w.write_all(&out).map_err(|e| format!("write: {e}"))?;
            out.clear();
        }
    }
}
