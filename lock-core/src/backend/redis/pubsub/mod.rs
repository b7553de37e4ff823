//! One shared subscription per channel per Locker, fanning release messages
//! out to the waiters of this process.
//!
//! Each channel is subscribed once however many waiters it has (they share
//! a `watch` counter) and unsubscribed when its last waiter goes. When the
//! subscription may have missed messages (its connection dropped, or a
//! cluster node gave up the channel's slot), the channel's signal reports
//! closure: its waiters try again at once and subscribe anew, and meanwhile
//! fall back on the holder's remaining TTL.
//!
//! Two transports: [`plain`] (`SUBSCRIBE` on a connection of its own to one
//! server, or to the master the sentinels name) and [`shard`]
//! (`SSUBSCRIBE` on the node that owns the channel's slot, in a cluster).

mod plain;
mod shard;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::connection::Endpoint;
use crate::backend::ReleaseSignal;
use crate::error::StoreError;

/// Most stale shard channels kept to unsubscribe from.
const MAX_STALE: usize = 4096;

/// The subscriptions of one backend.
pub(super) struct Hub {
    inner: Arc<HubInner>,
}

struct HubInner {
    transport: Transport,
    timeout: Duration,
    table: Arc<Mutex<Table>>,
}

enum Transport {
    Plain(plain::Plain),
    /// Boxed: a cluster client is large.
    Shard(Box<shard::Shard>),
}

/// The channels subscribed to, by name.
#[derive(Default)]
struct Table {
    channels: HashMap<String, Channel>,
    /// The id the next channel entry gets.
    next_id: u64,
    /// Shard channels closed while still subscribed (a node's connection
    /// dropped, and the cluster connection subscribes them again): the
    /// next subscription change unsubscribes those nobody came back to.
    stale: Vec<String>,
}

struct Channel {
    releases: watch::Sender<u64>,
    subscribers: usize,
    /// Which entry this is: a channel closed and subscribed again is a new
    /// one, which the registrations of the old one leave alone.
    id: u64,
    /// The plain connection it was subscribed on (0 for a shard channel).
    connection: u64,
}

impl Table {
    /// Adds a waiter to `channel` (subscribed on `connection`): its
    /// receiver, the entry's id, and whether it is the first waiter (the
    /// caller then subscribes).
    fn join(&mut self, channel: &str, connection: u64) -> (watch::Receiver<u64>, u64, bool) {
        let next_id = &mut self.next_id;
        let entry = self.channels.entry(channel.to_owned()).or_insert_with(|| {
            *next_id += 1;
            Channel {
                releases: watch::channel(0).0,
                subscribers: 0,
                id: *next_id,
                connection,
            }
        });
        entry.subscribers += 1;
        (entry.releases.subscribe(), entry.id, entry.subscribers == 1)
    }

    /// Removes a waiter from entry `id` of `channel`; whether it was the
    /// last (the caller then unsubscribes).
    fn leave(&mut self, channel: &str, id: u64) -> bool {
        match self.channels.get_mut(channel) {
            Some(ch) if ch.id == id => {
                ch.subscribers -= 1;
                let last = ch.subscribers == 0;
                if last {
                    self.channels.remove(channel);
                }
                last
            }
            _ => false,
        }
    }

    /// Notes shard channels to unsubscribe from at the next subscription
    /// change, at most [`MAX_STALE`] (beyond, a subscription is left to
    /// its connection's end).
    fn forget_later(&mut self, channels: impl IntoIterator<Item = String>) {
        let room = MAX_STALE.saturating_sub(self.stale.len());
        self.stale.extend(channels.into_iter().take(room));
    }

    /// Wakes the waiters of `channel`.
    fn released(&self, channel: &str) {
        if let Some(ch) = self.channels.get(channel) {
            ch.releases.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

fn lock(table: &Mutex<Table>) -> MutexGuard<'_, Table> {
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Hub {
    /// Subscriptions on connections of their own to `endpoint`.
    pub(super) fn plain(endpoint: Endpoint, timeout: Duration) -> Self {
        Hub::with(
            Transport::Plain(plain::Plain::new(endpoint)),
            timeout,
            Arc::default(),
        )
    }

    /// Shard subscriptions in the cluster that `nodes` (`redis://` URLs)
    /// belong to.
    pub(super) fn shard(nodes: &[String], timeout: Duration) -> Result<Self, StoreError> {
        let table = Arc::default();
        let shard = shard::Shard::new(nodes, timeout, Arc::clone(&table))?;
        Ok(Hub::with(Transport::Shard(Box::new(shard)), timeout, table))
    }

    fn with(transport: Transport, timeout: Duration, table: Arc<Mutex<Table>>) -> Self {
        Hub {
            inner: Arc::new(HubInner {
                transport,
                timeout,
                table,
            }),
        }
    }

    /// Subscribes to `channel`; the subscription is confirmed by the server
    /// when this returns.
    pub(super) async fn subscribe(&self, channel: &str) -> Result<ReleaseSignal, StoreError> {
        let inner = &self.inner;
        let (releases, registration) = match &inner.transport {
            Transport::Plain(plain) => plain.subscribe(inner, channel).await?,
            Transport::Shard(shard) => shard.subscribe(inner, channel).await?,
        };
        Ok(ReleaseSignal::new(releases, registration))
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        if let Transport::Plain(plain) = &self.inner.transport {
            plain.close();
        }
    }
}

/// Drops a waiter's interest in a channel; the last one unsubscribes.
struct Registration {
    hub: Weak<HubInner>,
    channel: String,
    id: u64,
}

impl Registration {
    /// Joins `channel` (subscribed on `connection`): the receiver, this
    /// waiter's registration, and whether it is the first (the caller then
    /// subscribes). Made before anything is sent, so that a subscription
    /// cancelled or failed midway is left again, and unsubscribed.
    fn join(
        hub: &Arc<HubInner>,
        channel: &str,
        connection: u64,
    ) -> (watch::Receiver<u64>, Registration, bool) {
        let (releases, id, first) = lock(&hub.table).join(channel, connection);
        let registration = Registration {
            hub: Arc::downgrade(hub),
            channel: channel.to_owned(),
            id,
        };
        (releases, registration, first)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(hub) = self.hub.upgrade() else {
            return;
        };
        if !lock(&hub.table).leave(&self.channel, self.id) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // the connection is going away with the runtime anyway
        };
        let channel = std::mem::take(&mut self.channel);
        runtime.spawn(async move {
            match &hub.transport {
                Transport::Plain(plain) => plain.unsubscribe(&hub, &channel).await,
                Transport::Shard(shard) => shard.unsubscribe(&hub, &channel).await,
            }
        });
    }
}
