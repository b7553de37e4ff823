//! `SSUBSCRIBE` in a Redis Cluster: each shard channel on the node that
//! owns its slot (the lock's slot, as the channel carries the lock's hash
//! tag), through a RESP3 cluster connection of its own whose pushes feed
//! the table.
//!
//! A node that gives up a slot (a migration, a failover) ends its
//! subscriptions to the slot's channels with a `sunsubscribe` push: their
//! signals close, and their waiters subscribe again, on the slot's new
//! owner. A dropped node connection closes every signal the same way.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::{OnceCell, watch};

use super::{HubInner, Registration, Table, lock};
use crate::backend::redis::bounded;
use crate::error::{Refusal, StoreError};

pub(super) struct Shard {
    client: ClusterClient,
    connection: OnceCell<ClusterConnection>,
    /// Held while subscribing or unsubscribing, so that an unsubscription
    /// never overtakes a subscription made again meanwhile.
    changing: tokio::sync::Mutex<()>,
}

impl Shard {
    pub(super) fn new(
        nodes: &[String],
        timeout: Duration,
        table: Arc<Mutex<Table>>,
    ) -> Result<Self, StoreError> {
        let client = ClusterClient::builder(nodes.to_vec())
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(move |push: PushInfo| {
                pushed(&table, push);
                Ok::<(), ()>(())
            })
            .connection_timeout(timeout)
            .build()
            .map_err(|err| StoreError::refused(Refusal::InvalidUrl, err))?;
        Ok(Shard {
            client,
            connection: OnceCell::new(),
            changing: tokio::sync::Mutex::new(()),
        })
    }

    /// The cluster connection, made on first use.
    async fn connection(&self, timeout: Duration) -> Result<ClusterConnection, StoreError> {
        let connect = self
            .connection
            .get_or_try_init(|| self.client.get_async_connection());
        let connection = bounded(timeout, connect).await?;
        Ok(connection.clone())
    }

    /// Subscribes to `channel` on its slot's node: the channel's receiver
    /// and the waiter's registration.
    pub(super) async fn subscribe(
        &self,
        hub: &Arc<HubInner>,
        channel: &str,
    ) -> Result<(watch::Receiver<u64>, Registration), StoreError> {
        let mut connection = self.connection(hub.timeout).await?;
        let _changing = self.changing.lock().await;
        self.forget_stale(hub, &connection).await;
        // Dropped on an error (a subscription that ran out of time may still
        // be made), the registration unsubscribes.
        let (releases, registration, first) = Registration::join(hub, channel, 0);
        if first && let Err(err) = bounded(hub.timeout, connection.ssubscribe(channel)).await {
            return Err(err);
        }
        Ok((releases, registration))
    }

    /// Unsubscribes from `channel`, unless someone subscribed again
    /// meanwhile.
    pub(super) async fn unsubscribe(&self, hub: &HubInner, channel: &str) {
        let Some(connection) = self.connection.get() else {
            return;
        };
        let mut connection = connection.clone();
        let _changing = self.changing.lock().await;
        self.forget_stale(hub, &connection).await;
        if lock(&hub.table).channels.contains_key(channel) {
            return;
        }
        let done = tokio::time::timeout(hub.timeout, connection.sunsubscribe(channel)).await;
        if !matches!(done, Ok(Ok(()))) {
            lock(&hub.table).forget_later([channel.to_owned()]);
        }
    }

    /// Unsubscribes from the stale channels nobody subscribed to again,
    /// all at once within one request bound, each once (one that fails is
    /// left to its connection's end: retried, it would hold up every
    /// subscription while a node is down).
    async fn forget_stale(&self, hub: &HubInner, connection: &ClusterConnection) {
        let stale: Vec<String> = {
            let mut table = lock(&hub.table);
            let stale = std::mem::take(&mut table.stale);
            stale
                .into_iter()
                .filter(|channel| !table.channels.contains_key(channel))
                .collect()
        };
        let unsubscribes = stale.into_iter().map(|channel| {
            let mut connection = connection.clone();
            async move {
                let _ = tokio::time::timeout(hub.timeout, connection.sunsubscribe(&channel)).await;
            }
        });
        join_all(unsubscribes).await;
    }
}

/// Applies a push of the cluster connection to the table.
fn pushed(table: &Mutex<Table>, push: PushInfo) {
    let channel = match push.data.first() {
        Some(Value::BulkString(name)) => std::str::from_utf8(name).ok(),
        _ => None,
    };
    let mut table = lock(table);
    match (push.kind, channel) {
        (PushKind::SMessage, Some(channel)) => table.released(channel),
        // The node gave the channel up (its slot moved), or confirms an
        // unsubscription (the channel is no longer in the table then).
        (PushKind::SUnsubscribe, Some(channel)) => {
            table.channels.remove(channel);
        }
        // Messages may have been missed: every waiter tries again and
        // subscribes anew (the cluster connection also subscribes the old
        // channels again on its own: the stale ones are let go later).
        (PushKind::Disconnection, _) => {
            let closed: Vec<String> = table.channels.drain().map(|(name, _)| name).collect();
            table.forget_later(closed);
        }
        _ => {}
    }
}
