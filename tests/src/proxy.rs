//! [`DelayProxy`]: a loopback TCP proxy in front of a server that can hold
//! the traffic from clients to the server, as a slow network would: bytes
//! sent while held are delivered, in order, when released.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A proxy from a free loopback port to `upstream`.
#[derive(Debug)]
pub struct DelayProxy {
    addr: SocketAddr,
    held: Arc<watch::Sender<bool>>,
    task: tokio::task::JoinHandle<()>,
}

impl DelayProxy {
    /// Starts a proxy to `127.0.0.1:upstream_port`.
    pub async fn start(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let held = Arc::new(watch::channel(false).0);
        let gate = Arc::clone(&held);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let gate = gate.subscribe();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)).await {
                        pipe(client, server, gate).await;
                    }
                });
            }
        });
        DelayProxy { addr, held, task }
    }

    /// `redis://` URL of the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Holds client-to-server bytes from now on.
    pub fn hold(&self) {
        self.held.send_replace(true);
    }

    /// Delivers what was held and lets traffic flow again.
    pub fn release(&self) {
        self.held.send_replace(false);
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pipe(client: TcpStream, server: TcpStream, mut held: watch::Receiver<bool>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upstream = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            // While held, the bytes wait here, in order.
            if held.wait_for(|h| !*h).await.is_err() {
                break;
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    };
    let downstream = async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
    };
    tokio::join!(upstream, downstream);
}
