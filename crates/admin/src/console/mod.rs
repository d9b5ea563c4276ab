//! The web console: a small HTTP server that shows a RocketMQ cluster in a browser, as
//! RocketMQ's dashboard does, and owns nothing of the broker. It is an admin client: every
//! page's data comes from the remoting admin protocol, asked of the name servers it is given
//! and of the brokers they list, so it works the same inside `ringmq serve` (started by
//! default, `--console-listen`) and as `ringmq console --namesrv-addr` beside any cluster.
//!
//! - `server`: the listener and its fixed set of worker threads (the thread plan's
//!   `Role::Console`), one request per connection, bounded in size and time (`http`).
//! - `routes`: pages, embedded assets (`assets`, the files under `assets/` beside it), the
//!   error answers (`pages`) and the JSON API (`api`, built on the admin client) by path;
//!   `error`: the API's one error type and its HTTP statuses.
//!
//! Invariants: a console request never runs on a broker shard and never blocks one (it reaches
//! the broker only through its admin requests over TCP); at most `CONSOLE_WORKERS` requests
//! are served at once, each holding fixed-size buffers; every API error is a JSON message the
//! page shows.

mod api;
mod assets;
mod error;
mod guard;
mod http;
mod pages;
mod routes;
mod server;

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

pub use server::ConsoleServer;

use crate::constants::CONSOLE_ADMIN_TIMEOUT_MS;
use crate::runtime::placement::ThreadPlan;
use crate::AdminClient;

/// What the console is a console of: the admin client of its name servers, and the host
/// names (besides IP literals and `localhost`) browsers may reach it by (`guard`).
#[derive(Clone, Debug)]
pub struct Console {
    pub admin: AdminClient,
    pub allowed_hosts: Vec<String>,
}

impl Console {
    /// The console of the cluster behind the name servers `namesrv` (at least one).
    pub fn new(namesrv: &[SocketAddr]) -> io::Result<Console> {
        let list: Vec<String> = namesrv.iter().map(SocketAddr::to_string).collect();
        let admin = AdminClient::new(&list.join(";"))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?
            .with_timeout(Duration::from_millis(CONSOLE_ADMIN_TIMEOUT_MS));
        Ok(Console {
            admin,
            allowed_hosts: Vec::new(),
        })
    }
}

/// Starts a console on `listen` (port 0: any free port; `ConsoleServer::addr` says which) for
/// the cluster whose name servers are `namesrv`, reachable by IP address, `localhost` and the
/// `allowed_hosts` names; its workers are placed by `plan`.
pub fn start_console(
    plan: &ThreadPlan,
    listen: SocketAddr,
    namesrv: Vec<SocketAddr>,
    allowed_hosts: Vec<String>,
) -> io::Result<ConsoleServer> {
    let console = Console {
        allowed_hosts,
        ..Console::new(&namesrv)?
    };
    let server = server::start(plan, listen, console)?;
    tracing::info!(addr = %server.addr, "web console listening");
    if !server.addr.ip().is_loopback() {
        tracing::warn!(
            addr = %server.addr,
            "the web console listens beyond this host and has no login: anyone who can reach \
             it can create and delete topics and groups and reset offsets; bind it to \
             127.0.0.1 (--console-listen) or put it behind an authenticating proxy"
        );
    }
    Ok(server)
}
