//! [`DelayProxy`]: a loopback TCP proxy in front of a server that can hold
//! traffic, as a slow network would (bytes sent while held are delivered,
//! in order, when released), and cut connections, as a broken one would.

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
        self.gates.requests_held.send_replace(true);
    }

    /// Holds server-to-client bytes from now on: requests are served, their
    /// replies wait.
    pub fn hold_replies(&self) {
        self.gates.replies_held.send_replace(true);
    }

    /// Delivers what was held, both ways, and lets traffic flow again.
    pub fn release(&self) {
        self.gates.requests_held.send_replace(false);
        self.gates.replies_held.send_replace(false);
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
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let upstream = forward(client_read, server_write, gates.requests_held.subscribe());
    let downstream = forward(server_read, client_write, gates.replies_held.subscribe());
    // Severing drops both sockets, which closes the connection at both ends;
    // it wins over bytes released at the same time.
    tokio::select! {
        biased;
        _ = severed.changed() => {}
        _ = async { tokio::join!(upstream, downstream) } => {}
    }
}

/// Copies `from` to `to`, keeping bytes back while `held` is true.
async fn forward(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut held: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if held.wait_for(|h| !*h).await.is_err() {
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
}
