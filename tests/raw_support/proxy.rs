//! A TCP proxy a test controls: it forwards to one target, can hold every chunk for a while (a
//! slow link), and can be cut: while cut it drops every connection (and what it holds) and
//! refuses new ones.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Proxy {
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    live: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    /// A proxy on an ephemeral loopback port.
    pub fn start(target: SocketAddr, delay: Duration) -> Proxy {
        Self::start_on("127.0.0.1:0".parse().unwrap(), target, delay)
    }

    /// A proxy listening on `bind`.
    pub fn start_on(bind: SocketAddr, target: SocketAddr, delay: Duration) -> Proxy {
        let listener = TcpListener::bind(bind).unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let live: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (c, l) = (cut.clone(), live.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(down) = conn else { return };
                if c.load(Ordering::SeqCst) {
                    let _ = down.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(up) = TcpStream::connect(target) else {
                    let _ = down.shutdown(Shutdown::Both);
                    continue;
                };
                {
                    let mut live = l.lock().unwrap();
                    live.push(down.try_clone().unwrap());
                    live.push(up.try_clone().unwrap());
                }
                pump(down.try_clone().unwrap(), up.try_clone().unwrap(), delay);
                pump(up, down, delay);
            }
        });
        Proxy { addr, cut, live }
    }

    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for s in self.live.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    std::thread::sleep(delay);
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}
