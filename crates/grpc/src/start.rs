//! Starting the endpoint beside a running broker, as `ringmq serve` and `ringmq broker` do:
//! where it listens (`--grpc-listen`, else `grpcServerPort` on the broker's listening address;
//! a taken default port is skipped with a warning), what routes advertise (the broker's
//! advertised host and the endpoint's port, or `grpcAdvertisedAddress`), and its TLS.

use std::net::SocketAddr;
use std::time::Duration;

use ringmq_broker::config::BrokerConfig;
use ringmq_broker::BrokerHandle;
use ringmq_remoting::tls::TlsContext;

use crate::convert::SendLimits;
use crate::endpoint::{Endpoint, EndpointConfig, RenewConfig};
use crate::gateway::Gateway;
use crate::server::{serve, GrpcServer};

/// Where `--grpc-listen` puts the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listen {
    /// Not given: `grpcServerPort` on the broker's address.
    Default,
    /// `off`.
    Off,
    At(SocketAddr),
}

impl std::str::FromStr for Listen {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("off") {
            return Ok(Listen::Off);
        }
        s.parse()
            .map(Listen::At)
            .map_err(|e| format!("{s:?} is neither `off` nor an address (ip:port): {e}"))
    }
}

/// Starts the endpoint for `broker` (none when turned off, or when its default port is taken).
pub fn start(
    cfg: &BrokerConfig,
    listen: Listen,
    broker: &BrokerHandle,
) -> Result<Option<GrpcServer>, String> {
    let (addr, explicit) = match listen {
        Listen::Off => return Ok(None),
        _ if !cfg.grpc.enable => return Ok(None),
        Listen::At(a) => (a, true),
        Listen::Default => (
            SocketAddr::new(cfg.listen_addr.ip(), cfg.grpc.port),
            cfg.grpc.port_explicit,
        ),
    };
    let listener = match std::net::TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) if !explicit => {
            tracing::warn!(%addr, error = %e, "no gRPC endpoint: its default port is taken (--grpc-listen or grpcServerPort moves it)");
            return Ok(None);
        }
        Err(e) => return Err(format!("gRPC endpoint on {addr}: {e}")),
    };
    let bound = listener
        .local_addr()
        .map_err(|e| format!("gRPC endpoint on {addr}: {e}"))?;
    let tls = TlsContext::load(&cfg.tls).map_err(|e| format!("tls: {e}"))?;
    let policy = crate::tls::policy(&tls)?;
    let advertised = cfg
        .grpc
        .advertised
        .unwrap_or_else(|| SocketAddr::new(broker.store_host.ip(), bound.port()));
    tracing::info!(%bound, %advertised, "gRPC clients are sent to {advertised}");
    let ep = Endpoint::new(
        Gateway::new(broker.mesh()),
        EndpointConfig {
            broker_name: cfg.broker_name.clone(),
            advertised,
            limits: SendLimits {
                max_body: cfg
                    .store
                    .max_message_size
                    .min(SendLimits::default().max_body),
                ..SendLimits::default()
            },
            max_clients: cfg.grpc.max_clients,
            client_idle: Duration::from_secs(120),
            outbox_capacity: 256,
            check_message_type: cfg.grpc.check_message_type,
            renew: RenewConfig {
                invisible_ms: cfg.grpc.default_invisible_ms,
                ahead_ms: cfg.grpc.renew_ahead_ms,
                period_ms: cfg.grpc.renew_period_ms,
                max_ms: cfg.grpc.renew_max_ms,
            },
        },
    );
    serve(listener, ep, policy)
        .map(Some)
        .map_err(|e| format!("gRPC endpoint on {addr}: {e}"))
}
