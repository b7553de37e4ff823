//! The master of a lock's slot in a Redis Cluster, for the requests that
//! must reach it on a connection of their own (`WAIT`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo, Slot};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Value};

use super::bounded;
use crate::error::{Refusal, StoreError};

/// Finds slot masters with `CLUSTER SLOTS` (the endpoints the nodes
/// announce) and connects to them with the credentials of the nodes given.
pub(super) struct SlotMasters {
    connection: ClusterConnection,
    /// The first node's connection settings (credentials, protocol).
    node: ConnectionInfo,
    timeout: Duration,
    /// The slot map as last asked, if it was.
    map: Mutex<Option<Arc<SlotMap>>>,
    /// The map is to be asked again (a request met `MOVED`).
    stale: AtomicBool,
}

/// Which master served each slot when the cluster was last asked: its
/// announced host and port.
struct SlotMap(HashMap<Slot, (String, u16)>);

impl SlotMasters {
    pub(super) fn new(
        connection: ClusterConnection,
        first_node: &str,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        let node = first_node
            .into_connection_info()
            .map_err(|err| StoreError::refused(Refusal::InvalidUrl, err))?;
        Ok(SlotMasters {
            connection,
            node,
            timeout,
            map: Mutex::new(None),
            stale: AtomicBool::new(true),
        })
    }

    /// The address (host and port) of the master that serves `key`'s
    /// slot, as the slot map says (asked again first if it is stale).
    pub(super) async fn locate(&self, key: &str) -> Result<(String, u16), StoreError> {
        let known = self
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let map = match known {
            Some(map) if !self.stale.load(Ordering::Relaxed) => map,
            _ => self.ask().await?,
        };
        map.0.get(&Slot::for_key(key)).cloned().ok_or_else(|| {
            StoreError::not_applied("no master serves the lock's slot (the cluster is down)")
        })
    }

    /// Every master's address, as the cluster says now.
    pub(super) async fn masters(&self) -> Result<Vec<(String, u16)>, StoreError> {
        let map = self.ask().await?;
        let mut masters: Vec<(String, u16)> = map.0.values().cloned().collect();
        masters.sort();
        masters.dedup();
        Ok(masters)
    }

    /// Has the slot map asked again before its next use.
    pub(super) fn stale(&self) {
        self.stale.store(true, Ordering::Relaxed);
    }

    async fn ask(&self) -> Result<Arc<SlotMap>, StoreError> {
        self.stale.store(false, Ordering::Relaxed);
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        let mut connection = self.connection.clone();
        let asked = connection.route_command(redis::cmd("CLUSTER").arg("SLOTS").clone(), routing);
        let map = bounded(self.timeout, asked).await.and_then(|reply| {
            slot_map(reply)
                .ok_or_else(|| StoreError::not_applied("an unexpected CLUSTER SLOTS reply"))
        });
        let map = Arc::new(map.inspect_err(|_| self.stale())?);
        *self.map.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&map));
        Ok(map)
    }

    /// A client for the node at `host:port`.
    pub(super) fn client(&self, (host, port): &(String, u16)) -> Result<redis::Client, StoreError> {
        let info = self
            .node
            .clone()
            .set_addr(ConnectionAddr::Tcp(host.clone(), *port));
        redis::Client::open(info).map_err(|err| StoreError::refused(Refusal::InvalidUrl, err))
    }
}

/// The map in a `CLUSTER SLOTS` reply: `[[start, end, [host, port, ..],
/// replicas..], ..]` (`None` if it is not one).
fn slot_map(reply: Value) -> Option<SlotMap> {
    let Value::Array(ranges) = reply else {
        return None;
    };
    let mut map = HashMap::new();
    for range in ranges {
        let Value::Array(parts) = range else {
            return None;
        };
        let [start, end, Value::Array(master), ..] = parts.as_slice() else {
            return None;
        };
        let start: u16 = redis::from_redis_value_ref(start).ok()?;
        let end: u16 = redis::from_redis_value_ref(end).ok()?;
        // A node that announces no usable endpoint (`?`, empty, NULL) has
        // its slots left out: confirming there is an error, not a guess.
        let host: Option<String> = master
            .first()
            .and_then(|host| redis::from_redis_value_ref(host).ok())
            .filter(|host: &String| !host.is_empty() && host != "?");
        let port: u16 = redis::from_redis_value_ref(master.get(1)?).ok()?;
        let Some(host) = host else {
            continue;
        };
        for slot in start..=end {
            map.insert(Slot::new(slot)?, (host.clone(), port));
        }
    }
    Some(SlotMap(map))
}
