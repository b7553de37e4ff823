//! Replica acknowledgement (`WAIT`) on connections of its own.
//!
//! `WAIT` holds the connection it is sent on until the replicas answer or
//! its bound passes; on the Locker's shared multiplexed connection it would
//! hold up every other lock's acquire, renewal and release for that long
//! (a held lock could then miss its renewals). So each confirmation takes
//! a connection of its own from a small pool. `WAIT` counts the writes of
//! its own connection, so the confirmation first renews the lease there:
//! that write follows the acquire, and a replica that has it has the
//! acquire too.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};

use super::connection::Endpoint;
use super::{RedisBackend, millis, once, renew_invocation};
use crate::backend::Claim;
use crate::keys::StoredKeys;
use crate::store_error::StoreError;

/// Idle connections kept for later confirmations; more are opened while
/// more confirm at once, and closed after. Keeping 8 cost U16 a third of
/// its rate in reconnects (bench/README.md).
const KEEP_IDLE: usize = 64;

/// Connections for `WAIT`, apart from the shared one.
pub(super) struct WaitConnections {
    endpoint: Endpoint,
    /// With the generation of the master each went to.
    idle: Mutex<Vec<(u64, MultiplexedConnection)>>,
}

impl WaitConnections {
    pub(super) fn new(endpoint: Endpoint) -> Self {
        WaitConnections {
            endpoint,
            idle: Mutex::default(),
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(u64, MultiplexedConnection)>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle connection to the master, or a new one within `timeout`.
    async fn take(&self, timeout: Duration) -> Result<(u64, MultiplexedConnection), StoreError> {
        {
            let mut idle = self.idle();
            // Those to a former master go (after a failover).
            idle.retain(|(master, _)| self.endpoint.is_current(*master));
            if let Some(connection) = idle.pop() {
                return Ok(connection);
            }
        }
        // No response bound here: each request below has its own.
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        let connect = async {
            let (client, master) = self.endpoint.client().await?;
            let connection = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .inspect_err(|err| self.endpoint.failed(master, err))?;
            Ok::<_, StoreError>((master, connection))
        };
        once(timeout, connect).await
    }

    fn put_back(&self, connection: (u64, MultiplexedConnection)) {
        let mut idle = self.idle();
        if idle.len() < KEEP_IDLE {
            idle.push(connection);
        }
    }
}

impl<C> RedisBackend<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// How many of `wanted` replicas have `owner`'s lease of `claim` on
    /// `keys` within `within` (0 if the lease is gone).
    pub(super) async fn confirm(
        &self,
        (keys, claim, owner, ttl): (&StoredKeys, Claim, &str, Duration),
        wanted: usize,
        within: Duration,
    ) -> Result<usize, StoreError> {
        if self.cluster {
            return Err(StoreError::permanent(
                "replica confirmation (`replicas`) is not supported on Redis Cluster yet",
            ));
        }
        let mut wait = redis::cmd("WAIT");
        wait.arg(wanted).arg(millis(within));
        // WAIT is sent once, bounded on top of the request timeout: on a
        // fresh connection it would confirm writes it never saw.
        let Some(connections) = &self.waits else {
            // A connection given by the caller (a cluster's): the shared one.
            let mut shared = self.connection.clone();
            return once(
                self.timeout + within,
                wait.query_async::<usize>(&mut shared),
            )
            .await;
        };
        let (master, mut connection) = connections.take(self.timeout).await?;
        let renewal = renew_invocation(keys, claim, owner, ttl);
        let renewed: i64 = once(self.timeout, renewal.invoke_async(&mut connection)).await?;
        let confirmed = once(self.timeout + within, wait.query_async(&mut connection)).await?;
        connections.put_back((master, connection));
        // Renewed nothing: the lease is gone, and there is nothing to confirm.
        Ok(if renewed == 1 { confirmed } else { 0 })
    }
}
