//! The multi-lock (`Locker::lock_all`) on every backend.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use lock_core::{FencingToken, LockError};
use lock_testkit::TestStore;

use super::SLACK;

/// Two tasks on two Lockers move money between `a` and `b` 1000 times each,
/// one naming `{a, b}`, the other `{b, a}`: no deadlock, and the balances,
/// updated by non-atomic read-modify-writes, add up.
pub async fn multi_lock_transfers_neither_deadlock_nor_lose_money(store: TestStore) {
    const TRANSFERS: i64 = 1000;
    let balances = Arc::new([AtomicI64::new(10_000), AtomicI64::new(10_000)]);
    let mut tasks = Vec::new();
    for (from, to) in [(0usize, 1usize), (1, 0)] {
        let (locker, balances) = (store.locker().await, balances.clone());
        tasks.push(tokio::spawn(async move {
            let names = ["account:a", "account:b"];
            for amount in 1..=TRANSFERS {
                let both = locker
                    .lock_all([names[from], names[to]])
                    .wait(Duration::from_secs(30))
                    .await
                    .expect("both accounts");
                let (debit, credit) = (
                    balances[from].load(Ordering::SeqCst),
                    balances[to].load(Ordering::SeqCst),
                );
                tokio::task::yield_now().await;
                balances[from].store(debit - amount, Ordering::SeqCst);
                balances[to].store(credit + amount, Ordering::SeqCst);
                both.release().await.expect("release");
            }
        }));
    }
    let all = async {
        for task in tasks {
            task.await.unwrap();
        }
    };
    // A deadlock never ends; a slow store under a loaded machine does (it
    // took up to 122 s with the whole suite beside it).
    tokio::time::timeout(Duration::from_secs(240), all)
        .await
        .expect("the transfers deadlocked");
    let a = balances[0].load(Ordering::SeqCst);
    let b = balances[1].load(Ordering::SeqCst);
    assert_eq!(a + b, 20_000, "money created or lost: {a} + {b}");
    // Both directions moved the same sums.
    assert_eq!((a, b), (10_000, 10_000));
}

/// All or none: a key held elsewhere fails the set and leaves the others
/// free; duplicates collapse; empty and bad sets fail before the store.
pub async fn multi_lock_takes_all_or_none(store: TestStore) {
    let (locker, counts) = store.locker_with(|l| l).await;
    let other = store.locker().await;
    let held = other.lock("set:b").await.unwrap();
    let releases = counts.releases();
    let err = locker
        .lock_all(["set:c", "set:b", "set:a"])
        .wait(Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LockError::WaitTimeout { key, .. } if key == "set:b"),
        "{err}"
    );
    // `set:a`, taken before `set:b` was refused, was given back before
    // the error was returned (and so was `set:b`'s queue entry, on a store
    // where the waiter had one).
    let tickets = u64::from(store.plain_locks_queue());
    assert_eq!(
        counts.releases(),
        releases + 1 + tickets,
        "set:a not released"
    );
    let free = other.try_lock("set:a").await.unwrap();
    assert!(free.is_some(), "set:a was left held");
    held.release().await.unwrap();

    let before = counts.acquires();
    let empty = locker.lock_all(Vec::<String>::new()).await.unwrap_err();
    assert!(matches!(empty, LockError::InvalidKey { .. }), "{empty}");
    // The bad key sorts last: it is refused before the first is taken.
    let bad = locker
        .lock_all(["set:ok".to_owned(), "z".repeat(600)])
        .await
        .unwrap_err();
    assert!(matches!(bad, LockError::InvalidKey { .. }), "{bad}");
    assert_eq!(counts.acquires(), before, "a bad set reached the store");

    let once = locker.lock_all(["set:d", "set:d", "set:e"]).await.unwrap();
    assert_eq!(once.keys().collect::<Vec<_>>(), ["set:d", "set:e"]);
    assert_eq!(counts.acquires(), before + 2, "a duplicate was taken twice");
    assert!(once.is_held());
    once.release().await.unwrap();
}

/// Tokens per key rise as the plain lock's do, and a multi-lock's scope
/// gives each key's token and makes its keys reentrant.
pub async fn multi_lock_tokens_and_scope(store: TestStore) {
    let locker = store.locker().await;
    let single = locker.lock("tok:x").await.unwrap();
    let earlier = single.token();
    single.release().await.unwrap();
    let both = locker.lock_all(["tok:y", "tok:x"]).await.unwrap();
    let (x, y) = (
        both.token_of("tok:x").unwrap(),
        both.token_of("tok:y").unwrap(),
    );
    assert!(x > earlier, "{x} after {earlier}");
    assert_eq!(both.token_of("tok:z"), None);
    assert_eq!(
        both.tokens().collect::<Vec<_>>(),
        [("tok:x", x), ("tok:y", y)]
    );
    both.scope(async {
        assert_eq!(FencingToken::current_for("tok:x"), Some(x));
        assert_eq!(FencingToken::current_for("tok:y"), Some(y));
        assert_eq!(FencingToken::current_for("tok:z"), None);
        // Several locks: no single "current" token.
        assert_eq!(FencingToken::current(), None);
        let nested = locker.lock("tok:y").wait(Duration::ZERO).await.unwrap();
        assert!(nested.is_reentrant());
        assert_eq!(nested.token(), y);
        // A single lock's scope inside it: its own token for `current()`,
        // and the enclosing multi scope's for the others.
        let inner = locker.lock("tok:w").await.unwrap();
        inner
            .scope(async {
                assert_eq!(FencingToken::current(), Some(inner.token()));
                assert_eq!(FencingToken::current_for("tok:x"), Some(x));
            })
            .await;
        inner.release().await.unwrap();
    })
    .await;
    assert_eq!(FencingToken::current_for("tok:x"), None);
    both.release().await.unwrap();
}

/// `lost()` resolves when any one lease is lost, naming its key.
pub async fn multi_lock_loss_is_told(store: TestStore) {
    // Long enough that a stalled machine does not lose `loss:a` too.
    let ttl = Duration::from_secs(2);
    let locker = store.locker().await;
    let both = locker
        .lock_all(["loss:a", "loss:b"])
        .ttl(ttl)
        .await
        .unwrap();
    // `loss:b` is removed behind its holder's back; its watchdog finds out.
    store.steal(&locker, "loss:b").await;
    let lost = tokio::time::timeout(ttl + SLACK, both.lost())
        .await
        .expect("the loss was not told");
    assert!(
        matches!(&lost, LockError::Lost { key, .. } if key == "loss:b"),
        "{lost}"
    );
    assert!(!both.is_held());
    lock_testkit::assert_lost(both.release().await);
}

/// A lock_all given up while waiting for its second key gives back the
/// first at once, not at its ttl.
pub async fn multi_lock_cancelled_gives_back_what_it_took(store: TestStore) {
    let ttl = Duration::from_secs(6);
    let ((locker, counts), other) = (store.locker_with(|l| l).await, store.locker().await);
    let blocker = other.lock("cancel-set:b").await.unwrap();
    let attempt = locker
        .lock_all(["cancel-set:a", "cancel-set:b"])
        .ttl(ttl)
        .wait(Duration::from_secs(10));
    // Given up once `a` is taken and `b` has been tried.
    let given_up = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::select! {
            _ = attempt => panic!("lock_all got a held key"),
            _ = counts.acquires_reach(2) => {}
        }
    });
    given_up.await.expect("lock_all never tried its second key");
    let freed = other
        .lock("cancel-set:a")
        .wait(ttl / 3)
        .await
        .expect("the cancelled lock_all left its first key held");
    freed.release().await.unwrap();
    blocker.release().await.unwrap();
}
