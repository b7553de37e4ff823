//! The master of a lock's slot in a Redis Cluster, for the requests that
//! must reach it on a connection of their own (`WAIT`).

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

use super::once;
use crate::store_error::{Refusal, StoreError};

/// Finds slot masters through the cluster connection and connects to them
/// with the credentials of the nodes given.
pub(super) struct SlotMasters {
    connection: ClusterConnection,
    /// The first node's connection settings (credentials, protocol).
    node: ConnectionInfo,
    timeout: std::time::Duration,
}

impl SlotMasters {
    pub(super) fn new(
        connection: ClusterConnection,
        first_node: &str,
        timeout: std::time::Duration,
    ) -> Result<Self, StoreError> {
        let node = first_node
            .into_connection_info()
            .map_err(|err| StoreError::refused(Refusal::InvalidUrl, err))?;
        Ok(SlotMasters {
            connection,
            node,
            timeout,
        })
    }

    /// The address (`host:port`) of the master that serves `key`'s slot, as
    /// the cluster connection knows it: `CLIENT INFO` sent there tells the
    /// address it was reached at (`laddr`).
    pub(super) async fn locate(&self, key: &str) -> Result<String, StoreError> {
        let route = Route::with_key(key, SlotAddr::Master);
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
        let mut connection = self.connection.clone();
        let info: String = {
            let reply = connection.route_command(redis::cmd("CLIENT").arg("INFO").clone(), routing);
            redis::from_redis_value(once(self.timeout, reply).await?)
                .map_err(|err| StoreError::new(err, false))?
        };
        info.split_ascii_whitespace()
            .find_map(|field| field.strip_prefix("laddr="))
            .map(str::to_owned)
            .ok_or_else(|| StoreError::new(format!("no laddr in CLIENT INFO: {info}"), false))
    }

    /// A client for the node at `address` (`host:port`).
    pub(super) fn client(&self, address: &str) -> Result<redis::Client, StoreError> {
        let (host, port) = address
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host, port.parse().ok()?)))
            .ok_or_else(|| StoreError::new(format!("not a node address: {address}"), false))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let info = self.node.clone().set_addr(ConnectionAddr::Tcp(host, port));
        redis::Client::open(info).map_err(|err| StoreError::refused(Refusal::InvalidUrl, err))
    }
}
