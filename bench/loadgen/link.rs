//! A load-generator connection, plain TCP or TLS (`--tls`): what `wire` reads frames from and
//! the send and pull writers write to. Like a `TcpStream` it is cloned into a read half and a
//! write half used by two threads; over TLS both halves share one rustls client connection.
//!
//! Invariants: the rustls state is locked only to feed or drain it, never across a socket
//! write, so a writer blocked on a full socket never stops the reader from draining the
//! broker's responses; the write lock orders every ciphertext write, so TLS records reach the
//! socket in the order rustls sealed them. Plain links go straight to the socket.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};

/// Set once by `--tls`: every connection the generator makes is TLS with this config.
static TLS: OnceLock<Arc<ClientConfig>> = OnceLock::new();

/// Turns TLS on for every later connection. The broker's certificate is not verified: the
/// generator measures encryption, not trust.
pub fn enable_tls() {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
        .with_no_client_auth();
    let _ = TLS.set(Arc::new(config));
}

struct Tls {
    conn: Mutex<ClientConnection>,
    /// Held while ciphertext is taken out of `conn` and written, so records stay in order.
    write: Mutex<()>,
}

pub struct Link {
    sock: TcpStream,
    tls: Option<Arc<Tls>>,
    /// Read half: ciphertext read from the socket that rustls has not taken yet.
    pending: Vec<u8>,
    taken: usize,
}

impl From<TcpStream> for Link {
    fn from(sock: TcpStream) -> Link {
        Link {
            sock,
            tls: None,
            pending: Vec::new(),
            taken: 0,
        }
    }
}

fn locked<T>(m: &Mutex<T>) -> io::Result<std::sync::MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| io::Error::other("a thread of this connection panicked"))
}

impl Link {
    /// Wraps a connected socket: TLS (handshake done here) when `--tls` was given.
    pub fn open(sock: TcpStream, timeout: Duration) -> io::Result<Link> {
        let Some(config) = TLS.get() else {
            return Ok(sock.into());
        };
        let ip = sock.peer_addr()?.ip();
        let mut conn = ClientConnection::new(config.clone(), ServerName::IpAddress(ip.into()))
            .map_err(io::Error::other)?;
        // Sealed records are taken out at once by `write`; no cap on what one write seals.
        conn.set_buffer_limit(None);
        let mut s = sock;
        s.set_read_timeout(Some(timeout))?;
        while conn.is_handshaking() {
            conn.complete_io(&mut s)?;
        }
        Ok(Link {
            sock: s,
            tls: Some(Arc::new(Tls {
                conn: Mutex::new(conn),
                write: Mutex::new(()),
            })),
            pending: Vec::new(),
            taken: 0,
        })
    }

    pub fn try_clone(&self) -> io::Result<Link> {
        Ok(Link {
            sock: self.sock.try_clone()?,
            tls: self.tls.clone(),
            pending: Vec::new(),
            taken: 0,
        })
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(t)
    }

    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.sock.set_write_timeout(t)
    }

    fn read_tls(&mut self, tls: &Tls, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            {
                let mut c = locked(&tls.conn)?;
                while self.taken < self.pending.len() {
                    let mut rest = &self.pending[self.taken..];
                    match c.read_tls(&mut rest) {
                        Ok(n) => {
                            self.taken += n;
                            c.process_new_packets().map_err(io::Error::other)?;
                        }
                        // Its plaintext buffer is full: drain it first.
                        Err(_) => break,
                    }
                }
                match c.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                    Err(e) => return Err(e),
                }
            }
            if self.taken == self.pending.len() {
                self.pending.clear();
                self.taken = 0;
            }
            let len = self.pending.len();
            self.pending.resize(len + 64 * 1024, 0);
            let got = self.sock.read(&mut self.pending[len..]);
            self.pending.truncate(len + *got.as_ref().unwrap_or(&0));
            if got? == 0 {
                // End of the stream: rustls answers the next read with the end, clean or not.
                let mut c = locked(&tls.conn)?;
                c.read_tls(&mut &[][..])?;
                return match c.reader().read(buf) {
                    Ok(n) => Ok(n),
                    Err(_) => Ok(0),
                };
            }
        }
    }

    fn write_tls(&mut self, tls: &Tls, buf: &[u8]) -> io::Result<usize> {
        let _order = locked(&tls.write)?;
        let mut sealed = Vec::with_capacity(buf.len() + 256);
        {
            let mut c = locked(&tls.conn)?;
            c.writer().write_all(buf)?;
            while c.wants_write() {
                c.write_tls(&mut sealed)?;
            }
        }
        self.sock.write_all(&sealed)?;
        Ok(buf.len())
    }
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.tls.clone() {
            None => self.sock.read(buf),
            Some(t) => self.read_tls(&t, buf),
        }
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.tls.clone() {
            None => self.sock.write(buf),
            Some(t) => self.write_tls(&t, buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

/// Takes any server certificate; the handshake's signatures are still checked.
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
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
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
