//! The signature is checked before anything that grows with the request is allocated: what
//! the connection does with a request before it is admitted (split the frame, decode the
//! header, `AuthTable::check`) allocates the same whatever the body's size, and the
//! signature check itself allocates nothing, however many fields the header has. A request
//! with a wrong signature and a 4 MiB body costs no more memory than one with a 16-byte body.
//!
//! Allocations are counted per thread by a global allocator, so tests running beside this one
//! do not disturb the count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::IpAddr;

use bytes::BytesMut;
use ringmq::auth::model::{User, UserStatus, UserType};
use ringmq::auth::signature::{sign_request, verify};
use ringmq::auth::table::{AuthSettings, AuthTable};
use ringmq::protocol::codes::request_code as req;
use ringmq::protocol::frame::split_frame;
use ringmq::protocol::RemotingCommand;

struct Counting;

thread_local! {
    static COUNT: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

// SAFETY: every call is passed to the system allocator unchanged; the thread-local counter
// is a const-initialized Cell, which neither allocates nor re-enters the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| {
            let (n, b) = c.get();
            c.set((n + 1, b + layout.size() as u64));
        });
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| {
            let (n, b) = c.get();
            c.set((n + 1, b + new_size as u64));
        });
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// (allocations, bytes) made by `f` on this thread.
fn counted<R>(f: impl FnOnce() -> R) -> ((u64, u64), R) {
    let before = COUNT.with(Cell::get);
    let r = f();
    let after = COUNT.with(Cell::get);
    ((after.0 - before.0, after.1 - before.1), r)
}

fn table() -> AuthTable {
    AuthTable::new(
        vec![User {
            username: "alice".into(),
            password: "alice-secret".into(),
            user_type: UserType::Normal,
            user_status: UserStatus::Enable,
        }],
        vec![],
    )
}

/// A SEND_MESSAGE_V2 with `extra` more header fields and a body of `body_len` bytes, signed
/// by alice with `secret`, as the bytes that arrive on the socket.
fn wire_request(body_len: usize, extra: usize, secret: &str) -> BytesMut {
    let mut cmd = RemotingCommand::new_request(req::SEND_MESSAGE_V2)
        .with_ext("a", "pg")
        .with_ext("b", "orders")
        .with_ext("e", 0)
        .with_body(vec![b'x'; body_len]);
    for i in 0..extra {
        cmd = cmd.with_ext(&format!("x{i:02}"), i);
    }
    sign_request(&mut cmd, "alice", secret).expect("sign");
    let mut wire = BytesMut::new();
    cmd.encode(&mut wire).expect("encode");
    wire
}

/// What the connection does before a request is admitted: split, decode, check.
fn admit(wire: &mut BytesMut, table: &AuthTable, settings: &AuthSettings) -> bool {
    let frame = split_frame(wire, 64 << 20).expect("frame").expect("whole");
    let cmd = RemotingCommand::decode(frame).expect("decode");
    table
        .check(settings, &cmd, IpAddr::from([127, 0, 0, 1]))
        .is_ok()
}

#[test]
fn the_signature_is_checked_before_anything_grows_with_the_request() {
    let table = table();
    let settings = AuthSettings {
        authentication: true,
        authorization: false,
        ..AuthSettings::default()
    };

    // Decode and check, a forged request with a small and with a 4 MiB body: the same
    // allocations, and none of them body-sized.
    let mut small = wire_request(16, 0, "guess");
    let mut big = wire_request(4 << 20, 0, "guess");
    let (small_cost, ok_small) = counted(|| admit(&mut small, &table, &settings));
    let (big_cost, ok_big) = counted(|| admit(&mut big, &table, &settings));
    assert!(!ok_small && !ok_big, "a wrong secret is refused");
    assert_eq!(
        small_cost, big_cost,
        "allocations do not depend on the body"
    );
    assert!(big_cost.1 < 4096, "no body-sized allocation: {big_cost:?}");

    // The signature check alone allocates nothing, with 3 or with 80 header fields.
    for extra in [0, 80] {
        let mut wire = wire_request(1 << 20, extra, "alice-secret");
        let frame = split_frame(&mut wire, 64 << 20).unwrap().unwrap();
        let cmd = RemotingCommand::decode(frame).unwrap();
        let (cost, r) = counted(|| verify("alice-secret", &cmd.ext_fields, &cmd.body, cmd.version));
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(cost, (0, 0), "verify allocated with {extra} extra fields");
        let (cost, r) = counted(|| verify("guess", &cmd.ext_fields, &cmd.body, cmd.version));
        assert!(r.is_err());
        assert_eq!(cost, (0, 0), "a failed verify allocated");
        // A correctly signed request passes the whole check without allocating.
        let (cost, ok) = counted(|| table.check(&settings, &cmd, IpAddr::from([127, 0, 0, 1])));
        assert!(ok.is_ok(), "{ok:?}");
        assert_eq!(cost, (0, 0), "an admitted request cost an allocation");
    }
}
