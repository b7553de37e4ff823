//! Replica acknowledgement (`WAIT`) on connections of their own.
//!
//! `WAIT` holds the connection it is sent on until the replicas answer or
//! its bound passes; on the Locker's shared multiplexed connection it would
//! hold up every other lock's acquire, renewal and release for that long
//! (a held lock could then miss its renewals). So each confirmation takes
//! a connection of its own from a small pool, to the lock's master (in a
//! cluster, the master of its slot). `WAIT` counts the writes of its own
//! connection, so the confirmation first renews the lease there: that
//! write follows the acquire, and a replica that has it has the acquire
//! too.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};

use super::connection::Endpoint;
use super::slots::SlotMasters;
use super::{RedisBackend, bounded, millis, renew_invocation};
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::kind::LockKind;

/// Idle connections kept for later confirmations; more are opened while
/// more confirm at once, and closed after.
// Fewer cost U16 in reconnects (bench/README.md).
const KEEP_IDLE: usize = 64;

/// Connections for `WAIT`, apart from the shared one.
pub(super) struct WaitConnections {
    pub(super) masters: Masters,
    idle: Mutex<Vec<(Master, MultiplexedConnection)>>,
}

/// Where a lock's master is found.
pub(super) enum Masters {
    /// One server, or the master the sentinels name.
    Endpoint(Endpoint),
    /// The master of the lock's slot in a cluster (boxed: a cluster
    /// connection is large).
    Slots(Box<SlotMasters>),
}

/// The master a connection goes to.
#[derive(Clone, PartialEq, Eq)]
enum Master {
    /// The generation of the endpoint's master (see [`Endpoint`]).
    Generation(u64),
    /// A cluster node's host and port.
    Node((String, u16)),
}

impl WaitConnections {
    pub(super) fn new(masters: Masters) -> Self {
        WaitConnections {
            masters,
            idle: Mutex::default(),
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(Master, MultiplexedConnection)>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle connection to the master of `key`, or a new one within
    /// `timeout`.
    async fn take(
        &self,
        key: &str,
        timeout: Duration,
    ) -> Result<(Master, MultiplexedConnection), StoreError> {
        let node = match &self.masters {
            Masters::Endpoint(_) => None,
            Masters::Slots(slots) => Some(Master::Node(slots.locate(key).await?)),
        };
        self.take_at(node, timeout).await
    }

    /// An idle connection to `node` (the endpoint's master if `None`), or a
    /// new one within `timeout`.
    async fn take_at(
        &self,
        node: Option<Master>,
        timeout: Duration,
    ) -> Result<(Master, MultiplexedConnection), StoreError> {
        {
            let mut idle = self.idle();
            if let Masters::Endpoint(endpoint) = &self.masters {
                // Those to a former master go (after a failover).
                idle.retain(|(master, _)| match master {
                    Master::Generation(generation) => endpoint.is_current(*generation),
                    Master::Node(_) => false,
                });
            }
            let at = idle
                .iter()
                .rposition(|(master, _)| node.as_ref().is_none_or(|node| node == master));
            if let Some(at) = at {
                return Ok(idle.swap_remove(at));
            }
        }
        // No response bound here: each request below has its own.
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        let connect = async {
            let (client, master) = match (&self.masters, node) {
                (Masters::Slots(slots), Some(Master::Node(address))) => {
                    (slots.client(&address)?, Master::Node(address))
                }
                (Masters::Endpoint(endpoint), _) => {
                    let (client, generation) = endpoint.client().await?;
                    (client, Master::Generation(generation))
                }
                (Masters::Slots(_), _) => {
                    return Err(StoreError::not_applied("no cluster node to confirm on"));
                }
            };
            let connection = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .inspect_err(|err| {
                    if let (Masters::Endpoint(endpoint), Master::Generation(generation)) =
                        (&self.masters, &master)
                    {
                        endpoint.failed(*generation, err);
                    }
                })?;
            Ok::<_, StoreError>((master, connection))
        };
        bounded(timeout, connect).await
    }

    fn put_back(&self, connection: (Master, MultiplexedConnection)) {
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
    /// How many of `wanted` replicas have `owner`'s lease of `kind` on
    /// `keys` within `within` (0 if the lease is gone).
    pub(super) async fn confirm(
        &self,
        (keys, kind, owner, ttl): (&StoredKeys, LockKind, &str, Duration),
        wanted: usize,
        within: Duration,
    ) -> Result<usize, StoreError> {
        let mut wait = redis::cmd("WAIT");
        wait.arg(wanted).arg(millis(within));
        // WAIT is sent once, bounded on top of the request timeout: on a
        // fresh connection it would confirm writes it never saw.
        let Some(connections) = &self.waits else {
            // A connection given by the caller: the shared one.
            let mut shared = self.connection.clone();
            return bounded(
                self.timeout + within,
                wait.query_async::<usize>(&mut shared),
            )
            .await;
        };
        let confirmed = self
            .confirm_on(connections, (keys, kind, owner, ttl), &wait, within)
            .await;
        // A slot map that led to no answer may be out of date (a master gone
        // in a failover): asked again before the next confirmation.
        if confirmed.is_err()
            && let Masters::Slots(slots) = &connections.masters
        {
            slots.stale();
        }
        confirmed
    }

    /// The renewal and `WAIT` of [`confirm`](Self::confirm) on a connection
    /// of `connections`.
    async fn confirm_on(
        &self,
        connections: &WaitConnections,
        (keys, kind, owner, ttl): (&StoredKeys, LockKind, &str, Duration),
        wait: &redis::Cmd,
        within: Duration,
    ) -> Result<usize, StoreError> {
        let (mut master, mut connection) = connections.take(keys.lease(), self.timeout).await?;
        let renewal = renew_invocation(keys, kind, owner, ttl);
        let renewed = match renew_on(&mut connection, &renewal, self.timeout).await? {
            // The slot moved since it was located: once more, where it went
            // (not for ASK: the slot is still moving, and the error stands).
            Err(err) if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Moved) => {
                let node = err
                    .redirect_node()
                    .and_then(|(address, _)| address.rsplit_once(':'))
                    .and_then(|(host, port)| Some((host.to_owned(), port.parse().ok()?)));
                let Some(node) = node else {
                    return Err(StoreError::from(err));
                };
                if let Masters::Slots(slots) = &connections.masters {
                    slots.stale();
                }
                let node = Some(Master::Node(node));
                (master, connection) = connections.take_at(node, self.timeout).await?;
                renew_on(&mut connection, &renewal, self.timeout).await??
            }
            renewed => renewed?,
        };
        let confirmed = bounded(self.timeout + within, wait.query_async(&mut connection)).await?;
        connections.put_back((master, connection));
        // Renewed nothing: the lease is gone, and there is nothing to confirm.
        Ok(if renewed == 1 { confirmed } else { 0 })
    }
}

/// Sends `renewal` on `connection`, within `timeout` (the outer error).
async fn renew_on(
    connection: &mut MultiplexedConnection,
    renewal: &redis::ScriptInvocation<'_>,
    timeout: Duration,
) -> Result<redis::RedisResult<i64>, StoreError> {
    tokio::time::timeout(timeout, renewal.invoke_async(connection))
        .await
        .map_err(|_| StoreError::timed_out(timeout))
}
