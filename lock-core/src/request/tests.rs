//! The store boundary as the acquisition path sees it: kinds a store does
//! not keep, and grants of another ttl than the one asked.

use std::time::Duration;

use crate::backend::stored_keys::StoredKeys;
use crate::backend::{Attempt, LockStore, MemoryBackend, ReleaseSignal, StoreFuture};
use crate::kind::LockKind;
use crate::{LockError, Locker, StoreError};

#[tokio::test]
async fn a_kind_the_store_does_not_keep_fails_before_any_wait() {
    // A store that keeps only the exclusive lease (the trait's default).
    let store = AtLeast {
        store: MemoryBackend::new(),
        min: Duration::ZERO,
    };
    let locker = Locker::builder().backend(store).unwrap();
    let held = locker.lock("k").await.unwrap();
    // Held elsewhere, with a long wait: the answer comes at once.
    let request = locker.fair_lock("k").wait(Duration::from_secs(60));
    let err = tokio::time::timeout(Duration::from_secs(5), request)
        .await
        .expect("an unsupported kind waited")
        .unwrap_err();
    assert!(
        matches!(err, LockError::Unsupported { kind: LockKind::Fair, ref key, .. } if key == "k"),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "memory, 0ns leases at least does not support fair locks (lock `k`)"
    );
    let once = locker.lock("free").kind(LockKind::Read);
    assert!(matches!(
        once.try_once().await,
        Err(LockError::Unsupported { .. })
    ));
    held.release().await.unwrap();
}

/// The memory store, keeping every lease at least `min` (as etcd keeps
/// whole seconds above a minimum), and only exclusive leases.
struct AtLeast {
    store: MemoryBackend,
    min: Duration,
}

impl LockStore for AtLeast {
    fn acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<Attempt, StoreError>> {
        self.store.acquire(keys, kind, owner, ttl.max(self.min))
    }

    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        self.store.renew(keys, kind, owner, ttl.max(self.min))
    }

    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        self.store.release(keys, kind, owner)
    }

    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        queued_owner: Option<&'a str>,
    ) -> StoreFuture<'a, Result<ReleaseSignal, StoreError>> {
        self.store.subscribe(keys, kind, queued_owner)
    }

    fn answers_in_place(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        format!("memory, {:?} leases at least", self.min)
    }
}

#[tokio::test(start_paused = true)]
async fn the_lease_follows_the_ttl_the_store_granted() {
    let min = Duration::from_secs(2);
    let store = AtLeast {
        store: MemoryBackend::new(),
        min,
    };
    let locker = Locker::builder().backend(store).unwrap();
    let asked = Duration::from_millis(200);
    let guard = locker.lock("k").ttl(asked).watchdog(false).await.unwrap();
    assert!(guard.expires_in() > asked, "{:?}", guard.expires_in());
    // Past the ttl asked, within the one granted: still held.
    tokio::time::advance(asked * 3).await;
    assert!(guard.is_held());
    tokio::time::advance(min).await;
    assert!(!guard.is_held());
}
