//! The TLS settings (`settings`) turned into rustls configurations once, at start-up: the
//! `tls.config.file` merged in, certificates, keys and trusted CAs read from their PEM files,
//! the server's client-certificate policy and the client's server-certificate policy. Every
//! failure names the key whose value caused it. What runs the handshakes and carries the bytes is
//! `runtime::net::Stream`; where a server asks for TLS, `remoting::connection`.
//!
//! The crypto is rustls' `ring` provider, chosen explicitly (no process-wide default is
//! installed or consulted).

pub mod settings;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

use crate::tls::settings::{ClientAuth, TlsMode, TlsSettings};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{key}: cannot read {path}: {source}")]
    Read {
        key: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{key}: {reason}")]
    Invalid { key: &'static str, reason: String },
}

fn invalid(key: &'static str, reason: impl ToString) -> TlsError {
    TlsError::Invalid {
        key,
        reason: reason.to_string(),
    }
}

/// What a process does with TLS: the server side of its remoting ports and the client side of
/// its own connections. Cheap to clone (the configurations are shared).
#[derive(Clone)]
pub struct TlsContext {
    pub mode: TlsMode,
    /// Present unless the mode is `disabled`.
    pub server: Option<Arc<ServerConfig>>,
    /// Present when `tls.enable` is true: the broker's connections to name servers and to its
    /// master use TLS.
    pub client: Option<Arc<ClientConfig>>,
    /// `tls.ha.enable`: the HA port and the slave's HA connection are TLS (no plain fallback).
    pub ha: bool,
}

impl std::fmt::Debug for TlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsContext")
            .field("mode", &self.mode)
            .field("client", &self.client.is_some())
            .field("ha", &self.ha)
            .finish()
    }
}

impl TlsContext {
    /// No TLS anywhere.
    pub fn plain() -> TlsContext {
        TlsContext {
            mode: TlsMode::Disabled,
            server: None,
            client: None,
            ha: false,
        }
    }

    /// Reads every file the settings name and builds the configurations.
    pub fn load(given: &TlsSettings) -> Result<TlsContext, TlsError> {
        let s = with_config_file(given)?;
        let mode = s.effective_mode();
        if s.test_mode_enable == Some(true) && mode != TlsMode::Disabled {
            return Err(invalid(
                "tls.test.mode.enable",
                "test mode's self-signed server certificate is not supported; \
                 give tls.server.certPath and tls.server.keyPath",
            ));
        }
        let server = match mode {
            TlsMode::Disabled => None,
            TlsMode::Permissive | TlsMode::Enforcing => Some(Arc::new(server_config(&s)?)),
        };
        let client = match s.enable {
            Some(true) => Some(Arc::new(client_config(&s)?)),
            _ => None,
        };
        Ok(TlsContext {
            mode,
            server,
            client,
            ha: s.ha_enable == Some(true),
        })
    }
}

/// The name a client checks a server's certificate against: its IP address (brokers and name
/// servers are configured by address).
pub fn server_name(addr: std::net::SocketAddr) -> ServerName<'static> {
    ServerName::IpAddress(addr.ip().into())
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The settings with the keys `tls.config.file` gives filled in where none was given.
fn with_config_file(given: &TlsSettings) -> Result<TlsSettings, TlsError> {
    let Some(file) = &given.config_file else {
        return Ok(given.clone());
    };
    let key = "tls.config.file";
    let text = std::fs::read_to_string(file).map_err(|source| TlsError::Read {
        key,
        path: file.clone(),
        source,
    })?;
    let mut from_file = TlsSettings::default();
    for (k, v) in crate::common::config_key::parse_properties(&text) {
        match from_file.set(&k, &v) {
            Some(Ok(())) | None => {}
            Some(Err(e)) => return Err(invalid(key, format!("{}: {e}", file.display()))),
        }
    }
    Ok(given.clone().or(from_file))
}

fn required<'a>(
    key: &'static str,
    v: &'a Option<PathBuf>,
    why: &str,
) -> Result<&'a Path, TlsError> {
    v.as_deref()
        .ok_or_else(|| invalid(key, format!("missing: {why}")))
}

fn read_pem(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        key,
        path: path.into(),
        source,
    })
}

fn certs(key: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read_pem(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(key, format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(invalid(
            key,
            format!("{}: no PEM certificate in it", path.display()),
        ));
    }
    Ok(certs)
}

fn private_key(
    key: &'static str,
    path: &Path,
    password: &Option<String>,
    password_key: &'static str,
) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read_pem(key, path)?;
    let encrypted = pem.windows(22).any(|w| w == b"ENCRYPTED PRIVATE KEY-")
        || pem.windows(16).any(|w| w == b"Proc-Type: 4,ENC");
    if encrypted || password.as_deref().is_some_and(|p| !p.is_empty()) {
        return Err(invalid(
            if encrypted { key } else { password_key },
            format!(
                "{}: encrypted private keys are not supported; decrypt it \
                 (openssl pkcs8 -topk8 -nocrypt) and leave {password_key} unset",
                path.display()
            ),
        ));
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        invalid(
            key,
            format!("{}: no usable private key: {e}", path.display()),
        )
    })
}

fn roots(key: &'static str, path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut store = RootCertStore::empty();
    for c in certs(key, path)? {
        store
            .add(c)
            .map_err(|e| invalid(key, format!("{}: {e}", path.display())))?;
    }
    Ok(Arc::new(store))
}

fn server_config(s: &TlsSettings) -> Result<ServerConfig, TlsError> {
    let why = "the server's certificate and key are needed unless tls.server.mode=disabled";
    let cert_path = required("tls.server.certPath", &s.server_cert_path, why)?;
    let key_path = required("tls.server.keyPath", &s.server_key_path, why)?;
    let chain = certs("tls.server.certPath", cert_path)?;
    let key = private_key(
        "tls.server.keyPath",
        key_path,
        &s.server_key_password,
        "tls.server.keyPassword",
    )?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("tls.server.mode", e))?;
    let auth = s.server_need_client_auth.unwrap_or(ClientAuth::None);
    let builder = match auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Optional | ClientAuth::Require => {
            let key = "tls.server.trustCertPath";
            let trust = required(
                key,
                &s.server_trust_cert_path,
                "client certificates are verified against it when \
                 tls.server.need.client.auth is optional or require",
            )?;
            let mut v = WebPkiClientVerifier::builder_with_provider(roots(key, trust)?, provider());
            if auth == ClientAuth::Optional {
                v = v.allow_unauthenticated();
            }
            builder.with_client_cert_verifier(v.build().map_err(|e| invalid(key, e))?)
        }
    };
    builder.with_single_cert(chain, key).map_err(|e| {
        invalid(
            "tls.server.keyPath",
            format!("does not fit the certificate: {e}"),
        )
    })
}

fn client_config(s: &TlsSettings) -> Result<ClientConfig, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("tls.enable", e))?;
    let verify = s.client_auth_server == Some(true) && s.test_mode_enable != Some(true);
    let builder = if verify {
        let key = "tls.client.trustCertPath";
        let trust = required(
            key,
            &s.client_trust_cert_path,
            "server certificates are verified against it when tls.client.authServer=true",
        )?;
        builder.with_root_certificates(roots(key, trust)?)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCert(provider())))
    };
    match (&s.client_cert_path, &s.client_key_path) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(c), Some(k)) => {
            let chain = certs("tls.client.certPath", c)?;
            let key = private_key(
                "tls.client.keyPath",
                k,
                &s.client_key_password,
                "tls.client.keyPassword",
            )?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                invalid(
                    "tls.client.keyPath",
                    format!("does not fit the certificate: {e}"),
                )
            })
        }
        (Some(_), None) => Err(invalid(
            "tls.client.keyPath",
            "missing: tls.client.certPath is given",
        )),
        (None, Some(_)) => Err(invalid(
            "tls.client.certPath",
            "missing: tls.client.keyPath is given",
        )),
    }
}

/// Java's default client (`tls.client.authServer=false`): any server certificate is taken, the
/// handshake's signatures are still checked (the connection is encrypted, the server not authenticated).
#[derive(Debug)]
struct AnyServerCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> TlsSettings {
        let mut s = TlsSettings::default();
        for (k, v) in pairs {
            s.set(k, v).unwrap().unwrap();
        }
        s
    }

    /// No keys: nothing to load, no TLS.
    #[test]
    fn nothing_given_is_plain() {
        let c = TlsContext::load(&TlsSettings::default()).unwrap();
        assert_eq!(c.mode, TlsMode::Disabled);
        assert!(c.server.is_none() && c.client.is_none());
    }

    /// A mode that needs certificates without them, a missing file and an encrypted key each
    /// name the key to fix.
    #[test]
    fn failures_name_their_key() {
        let err = TlsContext::load(&settings(&[("tls.server.mode", "enforcing")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("tls.server.certPath"), "{err}");
        let err = TlsContext::load(&settings(&[
            ("tls.server.certPath", "/nonexistent/c.pem"),
            ("tls.server.keyPath", "/nonexistent/k.pem"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("tls.server.certPath"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("enc.pem");
        std::fs::write(
            &key,
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .unwrap();
        let err = private_key("tls.server.keyPath", &key, &None, "tls.server.keyPassword")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tls.server.keyPath") && err.contains("encrypted"),
            "{err}"
        );
    }

    /// The client side without verification still builds (Java's default), and with it needs
    /// its trust file.
    #[test]
    fn client_side() {
        let c = TlsContext::load(&settings(&[("tls.enable", "true")])).unwrap();
        assert!(c.client.is_some() && c.server.is_none());
        let err = TlsContext::load(&settings(&[
            ("tls.enable", "true"),
            ("tls.client.authServer", "true"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("tls.client.trustCertPath"), "{err}");
    }
}
