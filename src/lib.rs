//! ringmq: a message broker and name server that speaks Apache RocketMQ's remoting protocol.
//!
//! The code lives in the workspace's crates, one per layer, each depending only on the layers
//! below it (ARCHITECTURE.md draws the graph):
//! - `ringmq-protocol`: the pure codec (frames, RemotingCommand, headers, bodies, stored
//!   records), the reserved topic names, every limit (`constants`), the SQL92 `filter` and the
//!   helpers below everything (`common`).
//! - `ringmq-runtime`: the only crate that names glommio: executors, the thread plan, the mesh,
//!   mailboxes, sockets.
//! - `ringmq-store`: the on-disk store and its single `writer` thread.
//! - `ringmq-auth`: access control (request signatures, ACL 1.0 and 2.0), pure.
//! - `ringmq-remoting`: the connection loop shared by broker and name server, and `tls`.
//! - `ringmq-namesrv`: the name server's core and its `server`.
//! - `ringmq-controller`: RocketMQ 5's controller on openraft.
//! - `ringmq-broker`: request handlers and broker state, and the broker's `config`.
//! - `ringmq-admin`: the admin client library, `ringmq admin` (`cli`) and the web `console`.
//! - `ringmq-grpc`: the RocketMQ 5 gRPC endpoint (tonic on its own thread), over the broker.
//!
//! This crate is the `ringmq` binary; its library re-exports the crates under the module names
//! the binary, the benches and the integration tests use.

pub use ringmq_admin as admin;
pub use ringmq_admin::cli as admin_cli;
pub use ringmq_admin::console;
pub use ringmq_auth as auth;
pub use ringmq_broker as broker;
pub use ringmq_broker::config;
pub use ringmq_controller as controller;
pub use ringmq_grpc as grpc;
pub use ringmq_namesrv as namesrv;
pub use ringmq_namesrv::server as namesrv_server;
pub use ringmq_protocol as protocol;
pub use ringmq_protocol::{common, constants, filter};
pub use ringmq_remoting as remoting;
pub use ringmq_remoting::tls;
pub use ringmq_runtime as runtime;
pub use ringmq_store as store;
pub use ringmq_store::writer;
