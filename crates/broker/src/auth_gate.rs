//! The access check every request passes before it is handled: the connection calls
//! [`admit`] for each request it decodes, before it spawns the request's task, so a refused
//! request costs its header decode and the signature's MAC, and nothing of its body is parsed
//! or stored. A refusal answers NO_PERMISSION (16) with the reason (nothing for a oneway
//! request) and is logged with the client's address, at most [`REFUSAL_LOG_BURST`] lines per
//! shard per [`REFUSAL_LOG_WINDOW`]; the rest are counted and the count logged.
//!
//! After each change to the users and ACLs shard 0 owns (`auth_state::AuthOwner`), it builds
//! a new immutable `AuthTable` and [`publish`]es it to every shard, which checks requests
//! against its copy without a lock. [`watch_plain_acl`] reads `plain_acl.yml` again when the
//! file changes, as Java 1.0 does; a file that no longer parses keeps the accounts in force and
//! is logged.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::auth::table::{AuthRefusal, Proof};
use crate::auth_state::{file_stamp, reread_plain_acl};
use crate::protocol::codes::response_code as rc;
use crate::protocol::RemotingCommand;
use crate::remoting::{encode_frame, Outbound};
use crate::runtime;
use crate::shard::Shard;

/// At most this many refusals are logged per shard per window; the others are counted.
pub const REFUSAL_LOG_BURST: u32 = 20;
pub const REFUSAL_LOG_WINDOW: Duration = Duration::from_secs(10);
/// How often shard 0 looks at `plain_acl.yml`'s modification time.
pub const PLAIN_ACL_CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// Checks one request from `peer`: `Ok` lets it through; `Err` carries the refusal to send
/// (`None` for a oneway request, which gets no answer).
pub fn admit(
    shard: &Shard,
    peer: SocketAddr,
    cmd: &RemotingCommand,
) -> Result<(), Option<Outbound>> {
    let settings = &shard.ctx.auth;
    if !settings.authentication && !settings.authorization {
        return Ok(());
    }
    let refusal = match shard.with_auth_table(|t| t.check(settings, cmd, peer.ip())) {
        Ok(()) => return Ok(()),
        Err(r) => r,
    };
    log_refusal(shard.id, peer, cmd, &refusal);
    if cmd.is_oneway() {
        return Err(None);
    }
    let resp = RemotingCommand::response_for(cmd, rc::NO_PERMISSION, Some(refusal.to_string()));
    Err(encode_frame(&resp))
}

/// The check of a request made in process for a gRPC call (`local::invoke`), its user proved
/// by the call's own signature; a refusal is logged as a connection's is.
pub fn admit_proved(
    shard: &Shard,
    peer: SocketAddr,
    cmd: &RemotingCommand,
    proof: Proof<'_>,
) -> Result<(), AuthRefusal> {
    let settings = &shard.ctx.auth;
    if !settings.authentication && !settings.authorization {
        return Ok(());
    }
    let checked = shard.with_auth_table(|t| t.check_proved(settings, cmd, peer.ip(), proof));
    if let Err(r) = &checked {
        log_refusal(shard.id, peer, cmd, r);
    }
    checked
}

thread_local! {
    /// This shard thread's refusal log window: its start, the lines logged in it, and the
    /// refusals not logged.
    static REFUSAL_LOG: Cell<(Option<Instant>, u32, u64)> = const { Cell::new((None, 0, 0)) };
}

fn log_refusal(shard: usize, peer: SocketAddr, cmd: &RemotingCommand, why: &AuthRefusal) {
    REFUSAL_LOG.with(|log| {
        let (start, logged, dropped) = log.get();
        let now = Instant::now();
        let (start, logged, dropped) = match start {
            Some(s) if now.duration_since(s) < REFUSAL_LOG_WINDOW => (s, logged, dropped),
            _ => {
                if dropped > 0 {
                    tracing::warn!(
                        shard,
                        refusals = dropped,
                        "more requests refused by access control (not logged one by one)"
                    );
                }
                (now, 0, 0)
            }
        };
        if logged < REFUSAL_LOG_BURST {
            let kind = match why {
                AuthRefusal::Authentication(_) => "authentication",
                AuthRefusal::Authorization(_) => "authorization",
            };
            tracing::warn!(
                shard,
                peer = %peer,
                code = cmd.code,
                check = kind,
                reason = %why,
                "request refused by access control"
            );
            log.set((Some(start), logged + 1, dropped));
        } else {
            log.set((Some(start), logged, dropped + 1));
        }
    });
}

/// Builds the table from shard 0's present users and ACLs and gives it to every shard; done
/// when every shard has it, so an admin's next request sees the change wherever it goes.
pub async fn publish(s0: &Rc<Shard>) {
    let Some((version, table)) = s0.with_auth_owner(|o| {
        o.version += 1;
        (o.version, Arc::new(o.table()))
    }) else {
        return;
    };
    for i in 0..s0.mesh.len() {
        let t = table.clone();
        if i == s0.id {
            s0.set_auth_table(version, t);
        } else if let Err(e) = s0
            .mesh
            .call(i, move |s| async move { s.set_auth_table(version, t) })
            .await
        {
            tracing::error!(shard = i, error = %e, "cannot publish the auth table");
        }
    }
}

/// Shard 0's task: reads `plain_acl.yml` again whenever its modification time or length
/// changes, and publishes the new accounts. Runs only when the file is read at all.
pub async fn watch_plain_acl(s0: Rc<Shard>) {
    let Some(Some(path)) = s0.with_auth_owner(|o| o.plain_path.clone()) else {
        return;
    };
    loop {
        runtime::sleep(PLAIN_ACL_CHECK_INTERVAL).await;
        if s0.is_stopping() {
            return;
        }
        let known = s0.with_auth_owner(|o| o.plain_stamp).flatten();
        let p = path.clone();
        let read = runtime::spawn_blocking(move || {
            let now = file_stamp(&p);
            if now.is_none() || now == known {
                return (now, None);
            }
            (now, Some(reread_plain_acl(&p)))
        })
        .await;
        let (stamp, reread) = read;
        match reread {
            None => {}
            Some(Ok(plain)) => {
                let accounts = plain.accounts.len();
                s0.with_auth_owner(|o| {
                    o.plain = Some(plain);
                    o.plain_stamp = stamp;
                });
                publish(&s0).await;
                tracing::info!(path = %path.display(), accounts, "plain ACL file changed: read again");
            }
            Some(Err(e)) => {
                // Logged once per version of the file; the accounts read before stay in force.
                s0.with_auth_owner(|o| o.plain_stamp = stamp);
                tracing::error!(error = %e, "plain ACL file changed but cannot be used; the previous accounts stay in force");
            }
        }
    }
}
