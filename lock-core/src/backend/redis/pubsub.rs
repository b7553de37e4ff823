//! One shared pub/sub connection per Locker that fans release messages out
//! to the waiters of this process.
//!
//! Each channel is subscribed once however many waiters it has (they share
//! a `watch` counter) and unsubscribed when its last waiter goes. If the
//! connection drops, every signal reports closure; waiters re-subscribe on a
//! fresh connection and meanwhile fall back on the holder's remaining TTL.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use tokio::sync::{oneshot, watch};

use super::connection::Endpoint;
use crate::backend::ReleaseSignal;
use crate::store_error::StoreError;

pub(super) struct Hub {
    inner: Arc<HubInner>,
}

struct HubInner {
    endpoint: Endpoint,
    timeout: Duration,
    connection: tokio::sync::Mutex<Option<LiveConnection>>,
    table: Arc<Mutex<Table>>,
    generation: AtomicU64,
}

#[derive(Default)]
struct Table {
    channels: HashMap<String, Channel>,
}

struct Channel {
    releases: watch::Sender<u64>,
    subscribers: usize,
    generation: u64,
}

struct LiveConnection {
    sink: PubSubSink,
    /// The generation of the master it went to (see [`Endpoint`]).
    master: u64,
    alive: Arc<AtomicBool>,
    _stop_reader: oneshot::Sender<()>,
}

fn lock(table: &Mutex<Table>) -> MutexGuard<'_, Table> {
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Hub {
    pub(super) fn new(endpoint: Endpoint, timeout: Duration) -> Self {
        Hub {
            inner: Arc::new(HubInner {
                endpoint,
                timeout,
                connection: tokio::sync::Mutex::new(None),
                table: Arc::default(),
                generation: AtomicU64::new(0),
            }),
        }
    }

    /// Subscribes to `channel`; the subscription is confirmed by the server
    /// when this returns.
    pub(super) async fn subscribe(&self, channel: &str) -> Result<ReleaseSignal, StoreError> {
        let inner = &self.inner;
        let mut connection = inner.connection.lock().await;
        // A connection to a server that is no longer the master hears
        // nothing of releases on the new one: replaced.
        let usable =
            |live: &LiveConnection| live.is_alive() && inner.endpoint.is_current(live.master);
        if !connection.as_ref().is_some_and(usable) {
            *connection = None;
            *connection = Some(inner.connect().await?);
        }
        let live = connection.as_mut().expect("connected above");
        let generation = inner.generation.load(Ordering::Relaxed);
        let (releases, first) = {
            let mut table = lock(&inner.table);
            let entry = table
                .channels
                .entry(channel.to_owned())
                .or_insert_with(|| Channel {
                    releases: watch::channel(0).0,
                    subscribers: 0,
                    generation,
                });
            entry.subscribers += 1;
            (entry.releases.subscribe(), entry.subscribers == 1)
        };
        let registration = Registration {
            hub: Arc::downgrade(inner),
            channel: channel.to_owned(),
            generation,
        };
        if first {
            let confirmed = tokio::time::timeout(inner.timeout, live.sink.subscribe(channel)).await;
            let failure = match confirmed {
                Ok(Ok(())) => None,
                Ok(Err(err)) => Some(StoreError::from(err)),
                Err(_) => Some(StoreError::timed_out(inner.timeout)),
            };
            if let Some(err) = failure {
                live.alive.store(false, Ordering::Relaxed);
                drop(registration);
                return Err(err);
            }
        }
        Ok(ReleaseSignal::new(releases, registration))
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        // Dropping the connection stops its reader task.
        if let Ok(mut connection) = self.inner.connection.try_lock() {
            connection.take();
        }
    }
}

impl LiveConnection {
    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }
}

impl HubInner {
    async fn connect(&self) -> Result<LiveConnection, StoreError> {
        // Watched from before the master is looked up, so that no move is
        // missed.
        let mut moves = self.endpoint.moves();
        let connect = async {
            let (client, master) = self.endpoint.client().await?;
            let pubsub = client.get_async_pubsub().await;
            let pubsub = pubsub.inspect_err(|err| self.endpoint.failed(master, err))?;
            Ok::<_, StoreError>((pubsub, master))
        };
        let (pubsub, master) = tokio::time::timeout(self.timeout, connect)
            .await
            .map_err(|_| StoreError::timed_out(self.timeout))??;
        let (sink, mut stream) = pubsub.split();
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        // Signals of an older connection are closed here (if its reader has
        // not done so yet): their waiters re-subscribe on this one.
        lock(&self.table)
            .channels
            .retain(|_, ch| ch.generation >= generation);
        let alive = Arc::new(AtomicBool::new(true));
        let (stop_reader, mut stopped) = oneshot::channel();
        let table = Arc::clone(&self.table);
        let reader_alive = Arc::clone(&alive);
        let endpoint = self.endpoint.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    message = stream.next() => match message {
                        Some(message) => {
                            let table = lock(&table);
                            if let Some(ch) = table.channels.get(message.get_channel_name()) {
                                ch.releases.send_modify(|n| *n = n.wrapping_add(1));
                            }
                        }
                        None => break,
                    },
                    _ = &mut stopped => break,
                    // Releases are published on the master: a connection
                    // to a former master ends, and its waiters subscribe
                    // again.
                    () = moved(moves.as_mut(), &endpoint, master) => break,
                }
            }
            reader_alive.store(false, Ordering::Relaxed);
            // Closing this connection's signals tells their waiters to
            // re-subscribe (on a new connection) or fall back on the TTL.
            lock(&table)
                .channels
                .retain(|_, ch| ch.generation != generation);
        });
        Ok(LiveConnection {
            sink,
            master,
            alive,
            _stop_reader: stop_reader,
        })
    }
}

/// Resolves once the master of generation `master` is no longer the one
/// in use (never for a single server).
async fn moved(moves: Option<&mut watch::Receiver<u64>>, endpoint: &Endpoint, master: u64) {
    let Some(moves) = moves else {
        return std::future::pending().await;
    };
    while moves.changed().await.is_ok() {
        if !endpoint.is_current(master) {
            return;
        }
    }
    std::future::pending().await
}

/// Drops a waiter's interest in a channel; the last one unsubscribes.
struct Registration {
    hub: Weak<HubInner>,
    channel: String,
    generation: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(hub) = self.hub.upgrade() else {
            return;
        };
        let last = {
            let mut table = lock(&hub.table);
            match table.channels.get_mut(&self.channel) {
                Some(ch) if ch.generation == self.generation => {
                    ch.subscribers -= 1;
                    let last = ch.subscribers == 0;
                    if last {
                        table.channels.remove(&self.channel);
                    }
                    last
                }
                _ => false,
            }
        };
        if !last {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // the connection is going away with the runtime anyway
        };
        let channel = std::mem::take(&mut self.channel);
        runtime.spawn(async move {
            let mut connection = hub.connection.lock().await;
            // Someone may have subscribed again meanwhile: keep it then.
            if lock(&hub.table).channels.contains_key(&channel) {
                return;
            }
            if let Some(live) = connection.as_mut().filter(|l| l.is_alive()) {
                let _ = tokio::time::timeout(hub.timeout, live.sink.unsubscribe(&channel)).await;
            }
        });
    }
}
