//! The gRPC port's TLS: the broker's own server certificate when one is configured (with
//! ALPN `h2`, which gRPC clients require), otherwise a self-signed certificate made at start,
//! as Java's proxy does with `tlsTestModeEnable`: the Java SDK connects with TLS by default
//! and trusts any certificate, so its defaults work out of the box, while SDKs that verify
//! certificates connect in plaintext on the same port.

use std::sync::Arc;

use tokio_rustls::rustls::crypto::ring::default_provider;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::ServerConfig;

use ringmq_remoting::tls::settings::TlsMode;
use ringmq_remoting::tls::TlsContext;

use crate::server::TlsPolicy;

/// The protocol gRPC clients ask for in the TLS handshake.
const ALPN_H2: &[u8] = b"h2";

/// The port's policy for the broker's TLS set-up.
pub fn policy(tls: &TlsContext) -> Result<TlsPolicy, String> {
    let with_h2 = |c: &Arc<ServerConfig>| {
        let mut c = (**c).clone();
        c.alpn_protocols = vec![ALPN_H2.to_vec()];
        Arc::new(c)
    };
    Ok(match (&tls.mode, &tls.server) {
        (TlsMode::Enforcing, Some(c)) => TlsPolicy::Enforcing(with_h2(c)),
        (TlsMode::Permissive, Some(c)) => TlsPolicy::Permissive(with_h2(c)),
        _ => TlsPolicy::Permissive(self_signed()?),
    })
}

/// A server configuration with a certificate made now, for `localhost` and loopback.
pub fn self_signed() -> Result<Arc<ServerConfig>, String> {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| format!("self-signed certificate: {e}"))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
    let mut c = ServerConfig::builder_with_provider(Arc::new(default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?
        .with_no_client_auth()
        .with_single_cert(vec![made.cert.der().clone()], key)
        .map_err(|e| format!("self-signed certificate: {e}"))?;
    c.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(c))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_self_signed_config_offers_h2() {
        let c = super::self_signed().unwrap();
        assert_eq!(c.alpn_protocols, vec![b"h2".to_vec()]);
    }
}
