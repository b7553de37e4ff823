//! [`DelayProxy`]: a loopback TCP proxy in front of a server that can hold
//! traffic, as a slow network would (bytes sent while held are delivered,
//! in order, when released), cut connections, as a broken one would, and
//! strand them: the client is cut off while what it sent still reaches the
//! server later, as a request that outlived its sender.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A proxy from a free loopback port to `upstream`.
#[derive(Debug)]
pub struct DelayProxy {
    addr: SocketAddr,
    gates: Arc<Gates>,
    task: tokio::task::JoinHandle<()>,
}

/// What the proxy's connections obey.
#[derive(Debug)]
struct Gates {
    /// Client-to-server bytes wait while true.
    requests_held: watch::Sender<bool>,
    /// Server-to-client bytes wait while true.
    replies_held: watch::Sender<bool>,
    /// Every bump closes the connections open at the time.
    severed: watch::Sender<u64>,
    /// New connections are closed at once while true.
    refusing: watch::Sender<bool>,
    /// Every bump strands the connections open at the time.
    stranded: watch::Sender<u64>,
    /// What stranded connections hold waits while true.
    stranded_held: watch::Sender<bool>,
    /// Client-to-server bytes held since the last hold, over all connections.
    held_bytes: watch::Sender<Vec<u8>>,
    /// A hold armed by [`DelayProxy::hold_from`]: the needle, and how many
    /// reads naming it still pass.
    armed: std::sync::Mutex<Option<(Vec<u8>, usize)>>,
}

impl Gates {
    /// Holds client-to-server bytes from `read` on, if it trips the armed
    /// hold.
    fn trip(&self, read: &[u8]) {
        let mut armed = self
            .armed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some((needle, passing)) = armed.as_mut() else {
            return;
        };
        if !read.windows(needle.len()).any(|w| w == needle.as_slice()) {
            return;
        }
        if *passing > 0 {
            *passing -= 1;
            return;
        }
        *armed = None;
        self.held_bytes.send_replace(Vec::new());
        self.requests_held.send_replace(true);
    }
}

impl DelayProxy {
    /// Starts a proxy to `127.0.0.1:upstream_port`.
    pub async fn start(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let gates = Arc::new(Gates {
            requests_held: watch::channel(false).0,
            replies_held: watch::channel(false).0,
            severed: watch::channel(0).0,
            refusing: watch::channel(false).0,
            stranded: watch::channel(0).0,
            stranded_held: watch::channel(false).0,
            held_bytes: watch::channel(Vec::new()).0,
            armed: std::sync::Mutex::new(None),
        });
        let task = tokio::spawn(serve(listener, upstream_port, Arc::clone(&gates)));
        DelayProxy { addr, gates, task }
    }

    /// `redis://` URL of the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// The proxy's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Holds client-to-server bytes from now on.
    pub fn hold(&self) {
        self.gates.held_bytes.send_replace(Vec::new());
        self.gates.requests_held.send_replace(true);
    }

    /// Lets the first `passing` reads from clients that name `needle` through,
    /// and holds client-to-server bytes from the next one that names it on
    /// (that read included), as [`hold`](Self::hold) would then: a slow
    /// network met by one request of a conversation, not the ones before.
    pub fn hold_from(&self, needle: &str, passing: usize) {
        let mut armed = self
            .gates
            .armed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *armed = Some((needle.as_bytes().to_vec(), passing));
    }

    /// Holds server-to-client bytes from now on: requests are served, their
    /// replies wait.
    pub fn hold_replies(&self) {
        self.gates.replies_held.send_replace(true);
    }

    /// Delivers what was held, both ways (stranded connections' too), and
    /// lets traffic flow again.
    pub fn release(&self) {
        self.gates.requests_held.send_replace(false);
        self.gates.replies_held.send_replace(false);
        self.gates.stranded_held.send_replace(false);
    }

    /// Waits until the client-to-server bytes held since the last
    /// [`hold`](Self::hold) contain `needle` (an event: the proxy keeps a
    /// copy as it reads them).
    pub async fn requests_hold(&self, needle: &str) {
        let mut held = self.gates.held_bytes.subscribe();
        let found = |held: &Vec<u8>| held.windows(needle.len()).any(|w| w == needle.as_bytes());
        held.wait_for(found).await.expect("proxy alive");
    }

    /// Cuts the clients of the connections open now off, as a network
    /// that loses them would, while their server sides stay open: what those
    /// clients sent and the proxy holds reaches the server at
    /// [`release`](Self::release), after whatever the clients send on new
    /// connections meanwhile (which flow, not held). Call it while requests
    /// are held, from the runtime thread the proxy runs on (a test's
    /// current-thread runtime), so that nothing held flows before the cut.
    pub fn strand(&self) {
        self.gates.stranded_held.send_replace(true);
        self.gates.stranded.send_modify(|n| *n += 1);
        self.gates.requests_held.send_replace(false);
    }

    /// Closes every connection through the proxy (what is held is lost);
    /// new ones are let through.
    pub fn sever(&self) {
        self.gates.severed.send_modify(|n| *n += 1);
    }

    /// Closes every connection through the proxy and refuses new ones (its
    /// port is closed, as a server that is down), until [`heal`](Self::heal).
    pub fn cut(&self) {
        self.gates.refusing.send_replace(true);
        self.sever();
    }

    /// Lets new connections through again.
    pub fn heal(&self) {
        self.gates.refusing.send_replace(false);
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Accepts clients on `listener` and pipes each to the upstream port;
/// while refusing, the port is closed and opened again after.
async fn serve(mut listener: TcpListener, upstream_port: u16, gates: Arc<Gates>) {
    let addr = listener.local_addr().expect("proxy addr");
    let mut refusing = gates.refusing.subscribe();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = refusing.wait_for(|r| *r) => None,
            accepted = listener.accept() => Some(accepted),
        };
        let Some(accepted) = accepted else {
            drop(listener);
            if refusing.wait_for(|r| !*r).await.is_err() {
                return;
            }
            // The port was ours a moment ago; nothing else binds it.
            listener = TcpListener::bind(addr)
                .await
                .expect("bind the proxy port again");
            continue;
        };
        let Ok((client, _)) = accepted else { return };
        // Subscribed before the check: a `cut()` (refuse, then sever) is
        // either seen here or severs this connection later. A client
        // accepted as the cut began goes with it.
        let severed = gates.severed.subscribe();
        if *gates.refusing.borrow() {
            drop(client);
            continue;
        }
        let gates = Arc::clone(&gates);
        tokio::spawn(async move {
            if let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)).await {
                pipe(client, server, &gates, severed).await;
            }
        });
    }
}

async fn pipe(
    client: TcpStream,
    server: TcpStream,
    gates: &Gates,
    mut severed: watch::Receiver<u64>,
) {
    let mut stranded = gates.stranded.subscribe();
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // Bytes read and not yet written, kept here so that a stranded
    // connection still has them.
    let mut requests = Vec::new();
    let mut replies = Vec::new();
    let upstream = forward(
        &mut client_read,
        &mut server_write,
        gates.requests_held.subscribe(),
        &mut requests,
        Some(gates),
    );
    let downstream = forward(
        &mut server_read,
        &mut client_write,
        gates.replies_held.subscribe(),
        &mut replies,
        None,
    );
    // Severing drops both sockets, which closes the connection at both ends;
    // it wins over bytes released at the same time.
    tokio::select! {
        biased;
        _ = severed.changed() => return,
        _ = stranded.changed() => {}
        _ = async { tokio::join!(upstream, downstream) } => return,
    }
    drop((client_read, client_write));
    // Stranded: the held requests go out at release, and the connection
    // stays open (a server may drop a request whose connection closed)
    // until the server closes it or the proxy severs it.
    let stranded = async {
        let mut released = gates.stranded_held.subscribe();
        if released.wait_for(|h| !*h).await.is_err()
            || !flush(&mut server_write, &mut requests).await
        {
            return;
        }
        let mut sink = vec![0u8; 16 * 1024];
        while let Ok(1..) = server_read.read(&mut sink).await {}
    };
    tokio::select! {
        biased;
        _ = severed.changed() => {}
        () = stranded => {}
    }
}

/// Copies `from` to `to`, keeping bytes back in `pending` while `held` is
/// true; for requests (`gates`), trips an armed hold and adds a copy of the
/// bytes it holds to the gates' `held_bytes`. Reads go on while held, and
/// every write is cancel safe, so `pending` is whole when dropped.
async fn forward(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut held: watch::Receiver<bool>,
    pending: &mut Vec<u8>,
    gates: Option<&Gates>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !*held.borrow_and_update() && !pending.is_empty() {
            if !flush(&mut to, pending).await {
                return;
            }
            continue;
        }
        tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    pending.extend_from_slice(&buf[..n]);
                    if let Some(gates) = gates {
                        gates.trip(&buf[..n]);
                        if *held.borrow() {
                            gates.held_bytes.send_modify(|held| held.extend_from_slice(&buf[..n]));
                        }
                    }
                }
            },
            changed = held.changed() => if changed.is_err() { break },
        }
    }
    // What was read before the end still goes out, once released; then
    // the end itself.
    if held.wait_for(|h| !*h).await.is_ok() && flush(&mut to, pending).await {
        let _ = to.shutdown().await;
    }
}

/// Writes out `pending`, taking out each part as it is written: cancelled,
/// what is left in `pending` was not sent. `false` if `to` failed.
async fn flush(mut to: impl AsyncWrite + Unpin, pending: &mut Vec<u8>) -> bool {
    while !pending.is_empty() {
        match to.write(pending).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => drop(pending.drain(..n)),
        }
    }
    true
}
