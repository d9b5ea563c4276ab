//! Support for the TLS tests: certificates made at test time (a CA, a server certificate for
//! 127.0.0.1, a client certificate, and a client certificate from another CA) written as PEM
//! files into a temporary directory, and a blocking TLS client speaking frames over rustls'
//! `StreamOwned`.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use ringmq::protocol::frame::split_frame;
use ringmq::protocol::RemotingCommand;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// PEM files of one test's certificates; removed with the directory.
pub struct Certs {
    pub dir: tempfile::TempDir,
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// Signed by a CA the broker does not trust.
    pub foreign_cert: PathBuf,
    pub foreign_key: PathBuf,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

fn leaf(
    dir: &Path,
    name: &str,
    sans: &[&str],
    issuer: &CertifiedIssuer<'static, KeyPair>,
) -> (PathBuf, PathBuf) {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    let cert = params.signed_by(&key, issuer).unwrap();
    let (c, k) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    (c, k)
}

impl Certs {
    pub fn make() -> Certs {
        let dir = tempfile::tempdir().unwrap();
        let ca1 = ca("ringmq test CA");
        let other = ca("another CA");
        let ca_path = dir.path().join("ca.crt");
        std::fs::write(&ca_path, ca1.pem()).unwrap();
        let (server_cert, server_key) = leaf(dir.path(), "server", &["127.0.0.1"], &ca1);
        let (client_cert, client_key) = leaf(dir.path(), "client", &["client.test"], &ca1);
        let (foreign_cert, foreign_key) = leaf(dir.path(), "foreign", &["foreign.test"], &other);
        Certs {
            ca: ca_path,
            server_cert,
            server_key,
            client_cert,
            client_key,
            foreign_cert,
            foreign_key,
            dir,
        }
    }

    /// `-o` options for a broker serving TLS in `mode` with this server certificate.
    pub fn server_opts(&self, mode: &str) -> Vec<String> {
        vec![
            format!("tls.server.mode={mode}"),
            format!("tls.server.certPath={}", self.server_cert.display()),
            format!("tls.server.keyPath={}", self.server_key.display()),
        ]
    }

    /// A client trusting this CA, with the given certificate and key (or none).
    pub fn client(&self, identity: Option<(&Path, &Path)>) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(&self.ca).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let b = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        Arc::new(match identity {
            None => b.with_no_client_auth(),
            Some((c, k)) => {
                let chain = CertificateDer::pem_file_iter(c)
                    .unwrap()
                    .map(|c| c.unwrap())
                    .collect();
                b.with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(k).unwrap())
                    .unwrap()
            }
        })
    }
}

pub fn as_str(opts: &[String]) -> Vec<&str> {
    opts.iter().map(String::as_str).collect()
}

/// A blocking TLS connection speaking frames.
pub struct TlsConn {
    s: StreamOwned<ClientConnection, TcpStream>,
    buf: BytesMut,
    opaque: i32,
}

impl TlsConn {
    /// Connects and completes the handshake; the error is the handshake's.
    pub fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> std::io::Result<TlsConn> {
        let sock = TcpStream::connect(addr)?;
        sock.set_nodelay(true)?;
        sock.set_read_timeout(Some(Duration::from_secs(30)))?;
        let name = ServerName::IpAddress(addr.ip().into());
        let conn = ClientConnection::new(config, name).map_err(std::io::Error::other)?;
        let mut s = StreamOwned::new(conn, sock);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock)?;
        }
        Ok(TlsConn {
            s,
            buf: BytesMut::new(),
            opaque: 5000,
        })
    }

    pub fn send(&mut self, cmd: RemotingCommand) -> i32 {
        self.try_send(cmd).expect("write")
    }

    fn try_send(&mut self, mut cmd: RemotingCommand) -> std::io::Result<i32> {
        self.opaque += 1;
        cmd.opaque = self.opaque;
        let mut b = BytesMut::new();
        cmd.encode(&mut b).unwrap();
        self.s.write_all(&b)?;
        self.s.flush()?;
        Ok(self.opaque)
    }

    /// The next frame; None once the broker closed the connection (or failed it).
    pub fn read(&mut self) -> Option<RemotingCommand> {
        let mut chunk = [0u8; 65536];
        loop {
            if let Some(f) = split_frame(&mut self.buf, 64 << 20).expect("frame") {
                return Some(RemotingCommand::decode(f).expect("decode"));
            }
            match self.s.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    pub fn call(&mut self, cmd: RemotingCommand) -> RemotingCommand {
        let op = self.send(cmd);
        loop {
            let r = self
                .read()
                .expect("connection closed while waiting for a response");
            if r.is_response() && r.opaque == op {
                return r;
            }
        }
    }

    /// Whether the server still answers after the handshake: TLS 1.3 reports a refused client
    /// certificate only on the first read.
    pub fn answers(&mut self, cmd: RemotingCommand) -> bool {
        let Ok(op) = self.try_send(cmd) else {
            return false;
        };
        while let Some(r) = self.read() {
            if r.is_response() && r.opaque == op {
                return true;
            }
        }
        false
    }
}
