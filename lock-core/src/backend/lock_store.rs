//! [`LockStore`]: the one trait between the Locker and a store.

use std::time::Duration;

use super::{Attempt, Pattern, ReleaseSignal, StoreFuture, StoredKeys};
use crate::error::StoreError;
use crate::inspect::{ForceReleased, Inspection};
use crate::kind::LockKind;

/// A store that holds leases: the one trait a store implements, and what
/// the Locker holds (`Arc<dyn LockStore>`).
///
/// Every method must be atomic in the store and must check the owner value,
/// so that a delayed request of an old acquisition never touches a newer one.
///
/// Each call returns a [`StoreFuture`], so that the trait is object-safe: a
/// store reached over the network wraps its work in
/// [`StoreFuture::new`]`(async move { .. })`, and a store in this process
/// answers with [`StoreFuture::ready`], allocating nothing. A store writes
/// the four lock operations and [`describe`](Self::describe); the rest have
/// defaults: only [`LockKind::Exclusive`], nothing to announce or confirm,
/// and the operators' calls refused.
///
/// ```
/// use std::time::Duration;
///
/// use lock_core::backend::{Attempt, LockStore, ReleaseSignal, StoreFuture, StoredKeys};
/// use lock_core::{LockKind, Locker, StoreError};
///
/// /// A store that is always down.
/// struct Down;
///
/// impl LockStore for Down {
///     fn acquire<'a>(&'a self, _: &'a StoredKeys, _: LockKind, _: &'a str, _: Duration)
///         -> StoreFuture<'a, Result<Attempt, StoreError>> {
///         StoreFuture::new(async { Err(StoreError::timed_out(Duration::from_secs(2))) })
///     }
///     fn renew<'a>(&'a self, _: &'a StoredKeys, _: LockKind, _: &'a str, _: Duration)
///         -> StoreFuture<'a, Result<bool, StoreError>> {
///         StoreFuture::ready(Ok(false))
///     }
///     fn release<'a>(&'a self, _: &'a StoredKeys, _: LockKind, _: &'a str)
///         -> StoreFuture<'a, Result<bool, StoreError>> {
///         StoreFuture::ready(Ok(false))
///     }
///     fn subscribe<'a>(&'a self, _: &'a StoredKeys, _: LockKind, _: Option<&'a str>)
///         -> StoreFuture<'a, Result<ReleaseSignal, StoreError>> {
///         StoreFuture::ready(Err(StoreError::permanent("down")))
///     }
///     fn describe(&self) -> String {
///         "down".into()
///     }
/// }
///
/// let locker = Locker::builder().backend(Down)?;
/// # let _ = locker;
/// # Ok::<(), lock_core::LockError>(())
/// ```
pub trait LockStore: Send + Sync + 'static {
    /// Whether this store keeps `kind` (only what [`supports`](Self::supports)
    /// allows is ever asked of the methods below). Every store keeps
    /// [`LockKind::Exclusive`].
    fn supports(&self, kind: LockKind) -> bool {
        kind == LockKind::Exclusive
    }

    /// Takes a lease of `kind` for `owner` for `ttl` if the key admits it,
    /// minting a token greater than every token minted before for the key.
    /// Idempotent per owner value: if `owner` already holds it (an earlier
    /// send of the same request), answers its grant and extends it to `ttl`
    /// from now; if `owner` has a queue entry, refreshes it.
    fn acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<Attempt, StoreError>>;

    /// Extends `owner`'s lease of `kind` to `ttl` from now if it still
    /// holds it. Returns `false` when the lease is gone or has another
    /// owner.
    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>>;

    /// Ends `owner`'s lease (or withdraws its queue entry) of `kind` and tells
    /// the waiters. Returns `false` when `owner` held neither (nothing is
    /// changed then).
    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
    ) -> StoreFuture<'a, Result<bool, StoreError>>;

    /// Subscribes to the releases a waiter for a lease of `kind` must
    /// hear of: those of the lock; or, for a waiter with a queue entry (`queued_owner`
    /// is its owner value: the store answered [`Attempt::Queued`]), only
    /// when it may go, where the store can tell it (as an etcd key or a
    /// ZooKeeper node watches its predecessor). The subscription is active
    /// when the returned future resolves.
    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        queued_owner: Option<&'a str>,
    ) -> StoreFuture<'a, Result<ReleaseSignal, StoreError>>;

    /// Wakes the subscribers of the lock of `kind` on `keys` although
    /// nothing may have been released: an election's new leader, or one
    /// that resigned, tells those who observe it
    /// ([`Locker::observe`](crate::Locker::observe)). A store whose
    /// subscription hears every change of holder itself (etcd's watch,
    /// ZooKeeper's on the children and the first one's grant) does
    /// nothing, as by default.
    fn announce<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
    ) -> StoreFuture<'a, Result<(), StoreError>> {
        let _ = (keys, kind);
        StoreFuture::ready(Ok(()))
    }

    /// Waits until `wanted` replicas have `owner`'s lease of `kind` on
    /// `keys` (of `ttl`, just granted), for at most `within`, and returns
    /// how many do (0 if the lease is gone). Stores without replicas
    /// return `wanted`.
    fn confirm_replicas<'a>(
        &'a self,
        _keys: &'a StoredKeys,
        _kind: LockKind,
        _owner: &'a str,
        _ttl: Duration,
        wanted: usize,
        _within: Duration,
    ) -> StoreFuture<'a, Result<usize, StoreError>> {
        StoreFuture::ready(Ok(wanted))
    }

    /// What the store holds for `keys`: every holder of every kind of
    /// lock on the key, and the waiters' queue entries where it keeps them
    /// ([`Locker::inspect`](crate::Locker::inspect)). By default the store
    /// cannot be inspected.
    fn inspect<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<Inspection, StoreError>> {
        let _ = keys;
        cannot(self, "be inspected")
    }

    /// The user keys of namespace `namespace` that match `pattern` and
    /// have a holder or a queue entry
    /// ([`Locker::held_keys`](crate::Locker::held_keys)), at most
    /// [`MAX_LISTED`](crate::MAX_LISTED) of them or a few more.
    fn held_keys<'a>(
        &'a self,
        namespace: &'a str,
        pattern: &'a Pattern,
    ) -> StoreFuture<'a, Result<Vec<String>, StoreError>> {
        let _ = (namespace, pattern);
        cannot(self, "list its locks")
    }

    /// Removes every holder and queue entry of every kind of lock on `keys`
    /// at once, keeping what orders its tokens, and wakes its waiters;
    /// returns what it removed ([`Locker::force_release`](crate::Locker::force_release)).
    fn force_release<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<ForceReleased, StoreError>> {
        let _ = keys;
        cannot(self, "force-release a lock")
    }

    /// Whether every [`StoreFuture`] this backend returns is already
    /// answered (a store in this process). A guard dropped on such a store
    /// then releases in place instead of on a spawned task.
    fn answers_in_place(&self) -> bool {
        false
    }

    /// A short description for logs (`redis 127.0.0.1:6379`, `memory`).
    fn describe(&self) -> String;
}

/// The refusal of an operator's call by a store without it: `<store> cannot
/// <what>`, a permanent error.
fn cannot<'a, T>(
    store: &(impl LockStore + ?Sized),
    what: &str,
) -> StoreFuture<'a, Result<T, StoreError>> {
    let refusal = StoreError::permanent(format!("{} cannot {what}", store.describe()));
    StoreFuture::ready(Err(refusal))
}
