//! The Redis backend: leases as `SET PX` keys, owner-checked scripts, tokens
//! from the server clock, releases published on a per-lock channel.

mod batch;
mod connect;
mod connection;
mod errors;
mod inspect;
mod keys;
mod pubsub;
mod raise_token;
mod replies;
mod scripts;
mod send;
mod sentinel;
mod slots;
mod wait;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;

use self::batch::{Batcher, LeaseCall};
use self::connection::Endpoint;
pub use self::connection::RedisConnection;
use self::keys::{channel, fence};
use self::pubsub::Hub;
use self::replies::{acquire_outcome, other_format, shared_outcome};
use self::scripts::{
    ENTRY_RENEW_SCRIPT, FAIR_ACQUIRE_SCRIPT, FAIR_RELEASE_SCRIPT, PERMIT_ACQUIRE_SCRIPT,
    PERMIT_RELEASE_SCRIPT, RW_ACQUIRE_SCRIPT, RW_RELEASE_SCRIPT,
};
pub(crate) use self::send::{Sent, bounded, send_or_resend};
use self::wait::WaitConnections;
use super::{Attempt, LockStore, Pattern, ReleaseSignal, StoreFuture};
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::inspect::{ForceReleased, Inspection};
use crate::kind::LockKind;

/// Leases in Redis: one server, the master a set of sentinels names
/// ([`connect_sentinel`](Self::connect_sentinel), `redis+sentinel://`), a
/// Redis Cluster ([`connect_cluster`](Self::connect_cluster),
/// `redis+cluster://`), or any connection that implements redis-rs' async
/// `ConnectionLike`.
///
/// Commands go over one multiplexed connection ([`RedisConnection`]: it
/// reconnects on its own, under Sentinel moves to the new master on a
/// failover, and in a cluster reaches the master of each key's slot);
/// release notifications over one shared pub/sub connection (shard
/// subscriptions in a cluster). Every request is bounded by the timeout: a
/// request that runs out of it may have been applied, and the error says
/// so.
///
/// On a connection made by [`connect`](Self::connect), acquires and releases
/// that arrive while another call is on its way go together in the next
/// script call (in order), which saves the server and the client work per
/// lock under load; [`with_connection`](Self::with_connection) (which may be
/// a cluster connection, where one call cannot span slots) sends each alone.
///
/// Most services reach it through a URL ([`Locker::connect`](crate::Locker::connect),
/// [`LockerBuilder::redis`](crate::LockerBuilder::redis)); built by hand, it
/// is given to [`LockerBuilder::backend`](crate::LockerBuilder::backend):
///
/// ```no_run
/// use std::time::Duration;
///
/// use lock_core::Locker;
/// use lock_core::backend::RedisBackend;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let backend = RedisBackend::connect("redis://10.0.0.5:6379", Duration::from_secs(2)).await?;
/// let locker = Locker::builder().backend(backend)?;
/// let guard = locker.lock("order:42").await?;
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
pub struct RedisBackend<C = RedisConnection> {
    connection: C,
    batcher: Option<Arc<Batcher<C>>>,
    hub: Option<Hub>,
    /// Connections for `WAIT` (with [`connect`](Self::connect)).
    waits: Option<WaitConnections>,
    timeout: Duration,
    description: String,
    /// How releases are published.
    publish: Publish,
}

impl<C> std::fmt::Debug for RedisBackend<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("store", &self.description)
            .finish_non_exhaustive()
    }
}

/// How releases are published: `PUBLISH`, or `SPUBLISH` in a cluster,
/// where a plain message would go to every node and the channel's slot
/// node alone needs it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Publish {
    Plain,
    Sharded,
}

impl Publish {
    fn command(self) -> &'static str {
        match self {
            Publish::Plain => "PUBLISH",
            Publish::Sharded => "SPUBLISH",
        }
    }
}

impl<C> RedisBackend<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A backend over an existing connection. `pubsub` is the client that
    /// opens the release-notification connection; without it waiters poll
    /// at the holder's remaining TTL.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use lock_core::Locker;
    /// use lock_core::backend::RedisBackend;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::Client::open("redis://10.0.0.5:6379")?;
    /// let connection = client.get_multiplexed_async_connection().await?;
    /// let backend = RedisBackend::with_connection(connection, Some(client), Duration::from_secs(2));
    /// let locker = Locker::builder().backend(backend)?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_connection(
        connection: C,
        pubsub: Option<redis::Client>,
        timeout: Duration,
    ) -> Self {
        RedisBackend {
            connection,
            batcher: None,
            hub: pubsub.map(|client| Hub::plain(Endpoint::Server(Box::new(client)), timeout)),
            waits: None,
            timeout,
            description: "redis".to_owned(),
            publish: Publish::Plain,
        }
    }

    /// Runs `request` on a clone of the connection within the timeout,
    /// sending it again once if the connection broke (see [`send_or_resend`]).
    async fn send<T, F, Fut>(&self, mut request: F) -> Result<Sent<T>, StoreError>
    where
        F: FnMut(C) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        send_or_resend(self.timeout, || request(self.connection.clone())).await
    }
}

impl<C> RedisBackend<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Runs `call` within the request bound (sent once more on a broken
    /// connection, as [`send_or_resend`] says).
    async fn script<T: redis::FromRedisValue>(
        &self,
        call: &redis::ScriptInvocation<'_>,
    ) -> Result<Sent<T>, StoreError> {
        self.send(|mut conn| async move { call.invoke_async(&mut conn).await })
            .await
    }

    /// Takes, renews or gives back a lease: in a shared call when this backend
    /// batches, else in a call of its own.
    async fn lock_operation(
        &self,
        operation: LeaseCall,
        keys: &StoredKeys,
        owner: &str,
    ) -> Result<Sent<redis::Value>, StoreError> {
        match &self.batcher {
            Some(batcher) => batcher.run(operation, keys, owner).await,
            None => {
                let invocation = &operation.invocation(keys, owner);
                self.send(|mut conn| async move { invocation.invoke_async(&mut conn).await })
                    .await
            }
        }
    }
}

/// A call of a lock script on the lease and token keys of `keys`, with
/// `owner` and `extra` as its arguments.
fn lock_invocation<'s>(
    script: &'s redis::Script,
    keys: &StoredKeys,
    owner: &str,
    extra: impl redis::ToRedisArgs,
) -> redis::ScriptInvocation<'s> {
    let mut invocation = script.key(keys.lease());
    invocation.key(fence(keys)).arg(owner).arg(extra);
    invocation
}

/// A call of the script that renews `owner`'s lease of `kind`.
fn renew_invocation(
    keys: &StoredKeys,
    kind: LockKind,
    owner: &str,
    ttl: Duration,
) -> redis::ScriptInvocation<'static> {
    if kind == LockKind::Exclusive {
        return LeaseCall::Renew(millis(ttl)).invocation(keys, owner);
    }
    let mut call = ENTRY_RENEW_SCRIPT.key(keys.of_kind(kind));
    call.arg(owner).arg(millis(ttl));
    call
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl<C> LockStore for RedisBackend<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Every kind of lock the crate has.
    fn supports(&self, _: LockKind) -> bool {
        true
    }

    fn acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<Attempt, StoreError>> {
        StoreFuture::new(async move {
            let reply = match kind {
                LockKind::Exclusive => {
                    let operation = LeaseCall::Acquire(millis(ttl));
                    self.lock_operation(operation, keys, owner).await?.reply
                }
                LockKind::Permit { of } | LockKind::Segment { of } => {
                    let (what, answer) = match kind {
                        LockKind::Permit { .. } => ("permits", "t"),
                        _ => ("segments", "s"),
                    };
                    let mut call = PERMIT_ACQUIRE_SCRIPT.key(keys.of_kind(kind));
                    call.key(fence(keys)).key(keys.lease());
                    call.arg(owner).arg(millis(ttl)).arg(of).arg(answer);
                    let reply = self.script(&call).await?.reply;
                    return shared_outcome(reply, ttl, what, of);
                }
                LockKind::Fair | LockKind::Read | LockKind::Write => {
                    let script = match kind {
                        LockKind::Fair => &FAIR_ACQUIRE_SCRIPT,
                        _ => &RW_ACQUIRE_SCRIPT,
                    };
                    let mut call = script.key(keys.of_kind(kind));
                    call.key(fence(keys)).key(keys.lease());
                    call.arg(owner).arg(millis(ttl));
                    if kind != LockKind::Fair {
                        call.arg(if kind == LockKind::Write { "w" } else { "r" });
                    }
                    self.script(&call).await?.reply
                }
            };
            acquire_outcome(reply, ttl)
        })
    }

    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        StoreFuture::new(async move {
            let reply: redis::Value = match kind {
                LockKind::Exclusive => {
                    let operation = LeaseCall::Renew(millis(ttl));
                    self.lock_operation(operation, keys, owner).await?.reply
                }
                other => {
                    let call = renew_invocation(keys, other, owner, ttl);
                    self.script(&call).await?.reply
                }
            };
            if let Some(err) = other_format(&reply) {
                return Err(err);
            }
            let renewed: i64 = redis::from_redis_value(reply).map_err(StoreError::in_doubt)?;
            Ok(renewed == 1)
        })
    }

    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        StoreFuture::new(async move {
            let sent = match kind {
                LockKind::Exclusive => {
                    let release = LeaseCall::Release(self.publish);
                    self.lock_operation(release, keys, owner).await?
                }
                LockKind::Permit { .. } | LockKind::Segment { .. } => {
                    let mut call = PERMIT_RELEASE_SCRIPT.key(keys.of_kind(kind));
                    call.key(fence(keys)).arg(owner).arg(channel(keys));
                    call.arg(self.publish.command());
                    self.script(&call).await?
                }
                other => {
                    let script = match other {
                        LockKind::Fair => &FAIR_RELEASE_SCRIPT,
                        _ => &RW_RELEASE_SCRIPT,
                    };
                    let mut call = script.key(keys.of_kind(other));
                    call.arg(owner).arg(channel(keys));
                    call.arg(self.publish.command());
                    self.script(&call).await?
                }
            };
            if let Some(err) = other_format(&sent.reply) {
                return Err(err);
            }
            let released: i64 =
                redis::from_redis_value(sent.reply).map_err(StoreError::in_doubt)?;
            match (released, sent.maybe_twice) {
                (1, _) => Ok(true),
                (_, false) => Ok(false),
                // Neither released nor lost for sure: say so.
                (_, true) => Err(StoreError::permanent(
                    "the lease was gone when the release was sent again: its first send \
                     may have removed it, or it had been lost",
                )
                .unknown(true)),
            }
        })
    }

    /// A waiter with a queue entry (a fair lock's place, a writer's mark) hears
    /// only of when it may go, on a channel of its own (`<channel>:<owner>`),
    /// so that a release wakes the one waiter that may go on.
    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        _: LockKind,
        queued_owner: Option<&'a str>,
    ) -> StoreFuture<'a, Result<ReleaseSignal, StoreError>> {
        StoreFuture::new(async move {
            match (&self.hub, queued_owner) {
                (Some(hub), Some(owner)) => {
                    hub.subscribe(&format!("{}:{owner}", channel(keys))).await
                }
                (Some(hub), None) => hub.subscribe(&channel(keys).to_string()).await,
                (None, _) => Err(StoreError::permanent(
                    "no pub/sub client configured; waiting falls back on the lease TTL",
                )),
            }
        })
    }

    /// A message on the lock's release channel, as a release sends.
    fn announce<'a>(
        &'a self,
        keys: &'a StoredKeys,
        _: LockKind,
    ) -> StoreFuture<'a, Result<(), StoreError>> {
        StoreFuture::new(async move {
            let mut publish = redis::cmd(self.publish.command());
            publish.arg(channel(keys)).arg("1");
            let publish = &publish;
            self.send(|mut conn| async move { publish.query_async::<i64>(&mut conn).await })
                .await
                .map(drop)
        })
    }

    /// `WAIT` on a connection of its own, after a renewal of the lease
    /// there, so that no other lock of the Locker waits behind it (see
    /// `wait.rs`).
    fn confirm_replicas<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
        wanted: usize,
        within: Duration,
    ) -> StoreFuture<'a, Result<usize, StoreError>> {
        StoreFuture::new(
            async move { self.confirm((keys, kind, owner, ttl), wanted, within).await },
        )
    }

    fn inspect<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<Inspection, StoreError>> {
        StoreFuture::new(self.inspection_of(keys))
    }

    fn held_keys<'a>(
        &'a self,
        namespace: &'a str,
        pattern: &'a Pattern,
    ) -> StoreFuture<'a, Result<Vec<String>, StoreError>> {
        StoreFuture::new(self.held_keys_matching(namespace, pattern))
    }

    fn force_release<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<ForceReleased, StoreError>> {
        StoreFuture::new(self.force_release_all(keys))
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}
