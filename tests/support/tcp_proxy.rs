//! A TCP proxy the test controls, between brokers and a server they must not reach directly
//! (the shared Kubernetes API server, whose own process the other tests of the binary use):
//! [`TcpProxy::cut`] closes its listener and every connection it carries, so the server looks
//! gone to whoever dials the proxy (connections refused, open ones reset); [`TcpProxy::restore`]
//! listens on the same port again. Bytes pass through untouched, so TLS works end to end.
//!
//! Plain threads: one accepting, two per connection copying each way.

#![allow(dead_code)]

use std::io::ErrorKind;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The proxy: listening on `127.0.0.1:<port>` for `target`, or cut.
pub struct TcpProxy {
    /// Where clients connect.
    pub listen: SocketAddr,
    target: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

#[derive(Default)]
struct Shared {
    /// Both ends of every connection carried, so a cut can close them.
    streams: Mutex<Vec<TcpStream>>,
    /// Connections accepted since the start.
    accepted: AtomicUsize,
}

impl TcpProxy {
    /// A proxy for `target` on a free loopback port, listening.
    pub fn start(target: SocketAddr) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let listen = listener.local_addr().expect("the proxy's address");
        let mut proxy = TcpProxy {
            listen,
            target,
            shared: Arc::default(),
            acceptor: None,
        };
        proxy.accept_on(listener);
        proxy
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Closes the listener (new connections are refused) and every open connection.
    pub fn cut(&mut self) {
        if let Some((stop, acceptor)) = self.acceptor.take() {
            stop.store(true, Ordering::SeqCst);
            acceptor.join().expect("the proxy's acceptor");
        }
        let streams = std::mem::take(
            &mut *self
                .shared
                .streams
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for stream in streams {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Listens on the same port again (after [`TcpProxy::cut`]).
    pub fn restore(&mut self) {
        assert!(self.acceptor.is_none(), "the proxy is not cut");
        // std sets SO_REUSEADDR on listeners: the port's old connections in TIME_WAIT do not
        // keep it from being bound again.
        let listener = TcpListener::bind(self.listen).expect("bind the proxy's port again");
        self.accept_on(listener);
    }

    fn accept_on(&mut self, listener: TcpListener) {
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let shared = self.shared.clone();
        let target = self.target;
        let acceptor = std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        shared.accepted.fetch_add(1, Ordering::SeqCst);
                        carry(&shared, client, target);
                    }
                    Err(error) if error.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
            // The listener closes here, as the thread ends.
        });
        self.acceptor = Some((stop, acceptor));
    }
}

/// Connects `client` to `target` and copies both ways until either side closes.
fn carry(shared: &Shared, client: TcpStream, target: SocketAddr) {
    let _ = client.set_nonblocking(false);
    let Ok(server) = TcpStream::connect(target) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(client_copy), Ok(server_copy)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    if let (Ok(a), Ok(b)) = (client.try_clone(), server.try_clone()) {
        shared
            .streams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend([a, b]);
    }
    pipe(client, server_copy);
    pipe(server, client_copy);
}

/// Copies `from` into `to` on a thread of its own; closes `to` for writing at the end.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Write);
    });
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.cut();
    }
}
