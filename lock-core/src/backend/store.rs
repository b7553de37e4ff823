//! How a store reached over the network plugs in: [`Store`] for the lock
//! operations and [`Operators`] for the operators' calls, each written as
//! plain async functions under its own name.
//!
//! [`Backend`], the object-safe trait the Locker holds, is implemented for
//! every type with both, by boxing each call's future. A store implements
//! each operation once and only the calls it has: the operators' calls and
//! replica confirmation have defaults (refused; nothing to confirm). The
//! in-process store implements [`Backend`] itself, to answer in place
//! without boxing.

use std::future::Future;
use std::time::Duration;

use super::{Attempt, Backend, ReleaseSignal, StoreFuture};
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::inspect::{ForceReleased, Inspection, Pattern};
use crate::kind::LockKind;

/// The lock operations of a store reached over the network; see
/// [`Backend`] for what each must do (atomically, owner-checked).
///
/// A type with `Store` and [`Operators`] is a [`Backend`]: the Locker holds
/// an object-safe `dyn Backend`, while a store writes plain `async fn`s, once
/// each, under the operations' names. An empty `impl Operators` keeps the
/// operators' calls refused. The in-process store implements [`Backend`]
/// itself instead, to answer in place without boxing a future.
///
/// ```
/// use std::time::Duration;
///
/// use lock_core::backend::{Attempt, Operators, ReleaseSignal, Store, StoredKeys};
/// use lock_core::{LockKind, Locker, StoreError};
///
/// /// A store that is always down.
/// struct Down;
///
/// impl Store for Down {
///     async fn acquire(&self, _: &StoredKeys, _: LockKind, _: &str, _: Duration)
///         -> Result<Attempt, StoreError> {
///         Err(StoreError::timed_out(Duration::from_secs(2)))
///     }
///     async fn renew(&self, _: &StoredKeys, _: LockKind, _: &str, _: Duration)
///         -> Result<bool, StoreError> {
///         Ok(false)
///     }
///     async fn release(&self, _: &StoredKeys, _: LockKind, _: &str) -> Result<bool, StoreError> {
///         Ok(false)
///     }
///     async fn subscribe(&self, _: &StoredKeys, _: LockKind, _: Option<&str>)
///         -> Result<ReleaseSignal, StoreError> {
///         Err(StoreError::permanent("down"))
///     }
///     fn describe(&self) -> String {
///         "down".into()
///     }
/// }
///
/// impl Operators for Down {}
///
/// let locker = Locker::builder().backend(Down)?;
/// # let _ = locker;
/// # Ok::<(), lock_core::LockError>(())
/// ```
pub trait Store: Send + Sync + 'static {
    /// Whether this store keeps `kind` ([`Backend::supports`]).
    fn supports(&self, kind: LockKind) -> bool {
        kind == LockKind::Exclusive
    }

    /// [`Backend::try_acquire`].
    fn acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Attempt, StoreError>> + Send + 'a;

    /// [`Backend::renew`].
    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send + 'a;

    /// [`Backend::release`].
    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send + 'a;

    /// [`Backend::subscribe`].
    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        queued_owner: Option<&'a str>,
    ) -> impl Future<Output = Result<ReleaseSignal, StoreError>> + Send + 'a;

    /// [`Backend::announce`]: by default, nothing to do.
    fn announce<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'a {
        let _ = (keys, kind);
        async { Ok(()) }
    }

    /// [`Backend::confirm_replicas`]: a store without replicas has
    /// nothing to confirm.
    fn confirm_replicas<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
        wanted: usize,
        within: Duration,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send + 'a {
        let _ = (keys, kind, owner, ttl, within);
        async move { Ok(wanted) }
    }

    /// [`Backend::describe`].
    fn describe(&self) -> String;
}

/// The operators' calls of a store ([`Backend::inspect`],
/// [`Backend::held_keys`], [`Backend::force_release`]); by default the
/// store refuses them.
pub trait Operators: Store {
    /// [`Backend::inspect`].
    fn inspect<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> impl Future<Output = Result<Inspection, StoreError>> + Send + 'a {
        let _ = keys;
        refused(self, "be inspected")
    }

    /// [`Backend::held_keys`].
    fn held_keys<'a>(
        &'a self,
        namespace: &'a str,
        pattern: &'a Pattern,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send + 'a {
        let _ = (namespace, pattern);
        refused(self, "list its locks")
    }

    /// [`Backend::force_release`].
    fn force_release<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> impl Future<Output = Result<ForceReleased, StoreError>> + Send + 'a {
        let _ = keys;
        refused(self, "force-release a lock")
    }
}

/// The refusal of an operator's call by a store without it.
fn refused<T>(
    store: &(impl Store + ?Sized),
    what: &str,
) -> impl Future<Output = Result<T, StoreError>> + Send + 'static {
    let refused = super::refusal(&store.describe(), what);
    async move { Err(refused) }
}

impl<S: Operators> Backend for S {
    fn supports(&self, kind: LockKind) -> bool {
        Store::supports(self, kind)
    }

    fn try_acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<Attempt, StoreError>> {
        StoreFuture::new(Store::acquire(self, keys, kind, owner, ttl))
    }

    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        StoreFuture::new(Store::renew(self, keys, kind, owner, ttl))
    }

    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        StoreFuture::new(Store::release(self, keys, kind, owner))
    }

    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        queued_owner: Option<&'a str>,
    ) -> StoreFuture<'a, Result<ReleaseSignal, StoreError>> {
        StoreFuture::new(Store::subscribe(self, keys, kind, queued_owner))
    }

    fn announce<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
    ) -> StoreFuture<'a, Result<(), StoreError>> {
        StoreFuture::new(Store::announce(self, keys, kind))
    }

    fn confirm_replicas<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
        wanted: usize,
        within: Duration,
    ) -> StoreFuture<'a, Result<usize, StoreError>> {
        let confirmed = Store::confirm_replicas(self, keys, kind, owner, ttl, wanted, within);
        StoreFuture::new(confirmed)
    }

    fn inspect<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<Inspection, StoreError>> {
        StoreFuture::new(Operators::inspect(self, keys))
    }

    fn held_keys<'a>(
        &'a self,
        namespace: &'a str,
        pattern: &'a Pattern,
    ) -> StoreFuture<'a, Result<Vec<String>, StoreError>> {
        StoreFuture::new(Operators::held_keys(self, namespace, pattern))
    }

    fn force_release<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<ForceReleased, StoreError>> {
        StoreFuture::new(Operators::force_release(self, keys))
    }

    fn describe(&self) -> String {
        Store::describe(self)
    }
}
