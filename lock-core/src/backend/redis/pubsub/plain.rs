//! `SUBSCRIBE` on one pub/sub connection of its own, to one server or to
//! the master the sentinels name; a reader task feeds the table.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use tokio::sync::{oneshot, watch};

use super::{HubInner, Registration, lock};
use crate::backend::redis::bounded;
use crate::backend::redis::connection::Endpoint;
use crate::error::StoreError;

pub(super) struct Plain {
    endpoint: Endpoint,
    connection: tokio::sync::Mutex<Option<LiveConnection>>,
    /// The number of the newest connection.
    generation: AtomicU64,
}

struct LiveConnection {
    sink: PubSubSink,
    /// The generation of the master it went to (see [`Endpoint`]).
    master: u64,
    alive: Arc<AtomicBool>,
    _stop_reader: oneshot::Sender<()>,
}

impl LiveConnection {
    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }
}

impl Plain {
    pub(super) fn new(endpoint: Endpoint) -> Self {
        Plain {
            endpoint,
            connection: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
        }
    }

    /// Subscribes to `channel` (connecting first if needed): the channel's
    /// receiver and the waiter's registration.
    pub(super) async fn subscribe(
        &self,
        hub: &Arc<HubInner>,
        channel: &str,
    ) -> Result<(watch::Receiver<u64>, Registration), StoreError> {
        let mut connection = self.connection.lock().await;
        // A connection to a server that is no longer the master hears
        // nothing of releases on the new one: replaced.
        let usable =
            |live: &LiveConnection| live.is_alive() && self.endpoint.is_current(live.master);
        if !connection.as_ref().is_some_and(usable) {
            *connection = None;
            *connection = Some(self.connect(hub).await?);
        }
        let live = connection.as_mut().expect("connected above");
        let generation = self.generation.load(Ordering::Relaxed);
        let (releases, registration, first) = Registration::join(hub, channel, generation);
        if first && let Err(err) = bounded(hub.timeout, live.sink.subscribe(channel)).await {
            live.alive.store(false, Ordering::Relaxed);
            return Err(err);
        }
        Ok((releases, registration))
    }

    /// Unsubscribes from `channel`, unless someone subscribed again
    /// meanwhile.
    pub(super) async fn unsubscribe(&self, hub: &HubInner, channel: &str) {
        let mut connection = self.connection.lock().await;
        if lock(&hub.table).channels.contains_key(channel) {
            return;
        }
        if let Some(live) = connection.as_mut().filter(|l| l.is_alive()) {
            let _ = tokio::time::timeout(hub.timeout, live.sink.unsubscribe(channel)).await;
        }
    }

    /// Drops the connection, which stops its reader task.
    pub(super) fn close(&self) {
        if let Ok(mut connection) = self.connection.try_lock() {
            connection.take();
        }
    }

    async fn connect(&self, hub: &HubInner) -> Result<LiveConnection, StoreError> {
        // Watched from before the master is looked up, so that no move is
        // missed.
        let mut moves = self.endpoint.moves();
        let connect = async {
            let (client, master) = self.endpoint.client().await?;
            let pubsub = client.get_async_pubsub().await;
            let pubsub = pubsub.inspect_err(|err| self.endpoint.failed(master, err))?;
            Ok::<_, StoreError>((pubsub, master))
        };
        let (pubsub, master) = bounded(hub.timeout, connect).await?;
        let (sink, mut stream) = pubsub.split();
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        // Signals of an older connection are closed here (if its reader has
        // not done so yet): their waiters re-subscribe on this one.
        lock(&hub.table)
            .channels
            .retain(|_, ch| ch.connection >= generation);
        let alive = Arc::new(AtomicBool::new(true));
        let (stop_reader, mut stopped) = oneshot::channel();
        let reader_alive = Arc::clone(&alive);
        let endpoint = self.endpoint.clone();
        let table = Arc::clone(&hub.table);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    message = stream.next() => match message {
                        Some(message) => {
                            lock(&table).released(message.get_channel_name());
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
                .retain(|_, ch| ch.connection != generation);
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
