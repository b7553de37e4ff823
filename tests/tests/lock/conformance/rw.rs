//! The read-write lock (`Locker::read_lock`, `Locker::write_lock`) on every
//! backend.

use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use lock_core::{FencingToken, LockError};
use lock_testkit::TestStore;
use tokio::time::Instant;

use super::SLACK;

/// 8 readers across Lockers hold at once; a writer waits for all of them,
/// with a token above all of theirs; readers wait for the writer.
pub async fn readers_share_and_a_writer_excludes(store: TestStore) {
    let lockers = [store.locker().await, store.locker().await];
    let mut readers = Vec::new();
    for i in 0..8 {
        let reader = lockers[i % 2].read_lock("doc").wait(Duration::ZERO).await;
        readers.push(reader.expect("readers did not share"));
    }
    let newest = readers.iter().map(|r| r.token()).max().unwrap();
    let refused = lockers[0].write_lock("doc").wait(Duration::ZERO).await;
    assert!(matches!(refused, Err(LockError::WaitTimeout { .. })));
    for reader in readers {
        reader.release().await.unwrap();
    }
    let writer = lockers[1].write_lock("doc").await.unwrap();
    assert!(
        writer.token() > newest,
        "the writer's token is not above the readers'"
    );
    for locker in &lockers {
        let refused = locker.read_lock("doc").wait(Duration::ZERO).await;
        assert!(matches!(refused, Err(LockError::WaitTimeout { .. })));
        let refused = locker.write_lock("doc").wait(Duration::ZERO).await;
        assert!(matches!(refused, Err(LockError::WaitTimeout { .. })));
    }
    let waiting = lockers[0].read_lock("doc").wait(Duration::from_secs(10));
    let waiting = tokio::spawn(waiting.into_future());
    let written = writer.token();
    writer.release().await.unwrap();
    let reader = tokio::time::timeout(SLACK * 4, waiting)
        .await
        .expect("the reader was not let in after the writer")
        .unwrap()
        .unwrap();
    assert!(reader.token() > written);
    reader.release().await.unwrap();
    super::store_is_empty(&store).await;
}

/// A waiting writer keeps new readers out, and under a stream of readers
/// gets in within two reader hold times.
pub async fn a_waiting_writer_is_not_starved(store: TestStore) {
    const HOLD: Duration = Duration::from_millis(150);
    let (writer_side, counts) = store.locker_with(|l| l).await;
    let first = store.locker().await.read_lock("feed").await.unwrap();
    let asked = counts.acquires();
    let started = Instant::now();
    let writing = tokio::spawn(async move {
        let guard = writer_side
            .write_lock("feed")
            .wait(Duration::from_secs(10))
            .await;
        (guard, started.elapsed())
    });
    counts.acquires_reach(asked + 1).await;
    // The writer waits: a new reader is kept out.
    let late = store.locker().await;
    let refused = late.read_lock("feed").wait(Duration::ZERO).await;
    assert!(
        matches!(refused, Err(LockError::WaitTimeout { .. })),
        "a reader passed a waiting writer"
    );
    // A stream of readers, each holding HOLD: the writer still gets in
    // once the one holding leaves.
    let stop = Arc::new(AtomicBool::new(false));
    let mut stream = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..4 {
        let ((locker, counts), stop) = (store.locker_with(|l| l).await, Arc::clone(&stop));
        refused.push(counts);
        stream.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                if let Ok(reader) = locker.read_lock("feed").wait(Duration::from_secs(10)).await {
                    tokio::time::sleep(HOLD).await;
                    reader.release().await.unwrap();
                }
            }
        }));
    }
    // Every reader of the stream was refused once: they queue behind the
    // writer before the first reader leaves.
    for counts in &refused {
        counts.acquires_reach(1).await;
    }
    first.release().await.unwrap();
    let (writer, took) = tokio::time::timeout(Duration::from_secs(10), writing)
        .await
        .expect("the writer was starved")
        .unwrap();
    let writer = writer.unwrap();
    assert!(took <= HOLD * 2 + SLACK, "the writer waited {took:?}");
    writer.release().await.unwrap();
    stop.store(true, Ordering::SeqCst);
    for task in stream {
        task.await.unwrap();
    }
}

/// A waiting writer keeps new readers out on every Locker, also when it
/// waits on a Locker that hosts readers: the holder's own Locker, or one
/// whose reader holds beside another Locker's.
pub async fn a_waiting_writer_blocks_new_readers_on_every_locker(store: TestStore) {
    for shares in [false, true] {
        let key = format!("mark:{shares}");
        let (hosting, counts) = store.locker_with(|l| l).await;
        let (other, late) = (store.locker().await, store.locker().await);
        let mut readers = vec![hosting.read_lock(&key).await.unwrap()];
        if shares {
            readers.push(other.read_lock(&key).await.unwrap());
        }
        let asked = counts.acquires();
        let writing = {
            let (hosting, key) = (hosting.clone(), key.clone());
            tokio::spawn(async move {
                let request = hosting.write_lock(&key).wait(Duration::from_secs(10));
                request.await
            })
        };
        // The writer asked the store (and was refused: readers hold).
        counts.acquires_reach(asked + 1).await;
        for locker in [&hosting, &other, &late] {
            let refused = locker.read_lock(&key).wait(Duration::ZERO).await;
            assert!(
                matches!(refused, Err(LockError::WaitTimeout { .. })),
                "a new reader passed a writer waiting on the readers' Locker ({key})"
            );
        }
        let released = Instant::now();
        for reader in readers {
            reader.release().await.unwrap();
        }
        let writer = tokio::time::timeout(Duration::from_secs(10), writing)
            .await
            .expect("the writer was never served")
            .unwrap()
            .unwrap();
        assert!(
            released.elapsed() < SLACK,
            "the writer waited {:?}",
            released.elapsed()
        );
        writer.release().await.unwrap();
    }
    super::store_is_empty(&store).await;
}

/// A writer that waits on a Locker where a reader of its own already
/// waits: it keeps a later reader of another Locker out from the moment it
/// asks, although the reader ahead of it on its Locker is still waiting.
pub async fn a_writer_behind_a_waiting_reader_of_its_locker_keeps_later_readers_out(
    store: TestStore,
) {
    let holder = store.locker().await;
    let held = holder.write_lock("queue").await.unwrap();
    let (hosting, counts) = store.locker_with(|l| l).await;
    let (late, late_counts) = store.locker_with(|l| l).await;
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let request = |locker: &lock_core::Locker, write: bool, name: &'static str| {
        let (locker, order) = (locker.clone(), Arc::clone(&order));
        tokio::spawn(async move {
            let wait = Duration::from_secs(20);
            let guard = match write {
                true => locker.write_lock("queue").wait(wait).await,
                false => locker.read_lock("queue").wait(wait).await,
            };
            let guard = guard.unwrap();
            order.lock().unwrap().push(name);
            guard.release().await.unwrap();
        })
    };
    let asked = counts.acquires();
    let mut tasks = vec![request(&hosting, false, "reader ahead")];
    // Refused, then asked again once subscribed: it waits in the store.
    counts.acquires_reach(asked + 2).await;
    tasks.push(request(&hosting, true, "writer"));
    // The writer asks at once, although a reader of its Locker waits.
    let writer_asked = counts.acquires_reach(asked + 3);
    tokio::time::timeout(Duration::from_secs(5), writer_asked)
        .await
        .expect("the writer did not ask the store while a reader of its Locker waited");
    let asked = late_counts.acquires();
    tasks.push(request(&late, false, "later reader"));
    late_counts.acquires_reach(asked + 1).await;
    held.release().await.unwrap();
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("a waiter was never served")
            .unwrap();
    }
    let order = order.lock().unwrap().clone();
    let writer = order.iter().position(|&name| name == "writer");
    let later = order.iter().position(|&name| name == "later reader");
    assert!(
        writer < later,
        "a reader that came later passed the waiting writer: {order:?}"
    );
    super::store_is_empty(&store).await;
}

/// Readers and writers over 3 Lockers: no reader ever overlaps a writer,
/// and writers never overlap each other.
pub async fn rw_history_has_no_reader_beside_a_writer(store: TestStore) {
    let readers = Arc::new(AtomicU32::new(0));
    let writing = Arc::new(AtomicBool::new(false));
    let violations = Arc::new(AtomicU64::new(0));
    let most_readers = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for worker in 0..9u64 {
        let locker = store.locker().await;
        let (readers, writing, violations, most) = (
            readers.clone(),
            writing.clone(),
            violations.clone(),
            most_readers.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for round in 0..12u64 {
                let writes = (worker + round) % 4 == 0;
                let wait = Duration::from_secs(30);
                if writes {
                    let guard = locker.write_lock("ledger").wait(wait).await.unwrap();
                    if writing.swap(true, Ordering::SeqCst) || readers.load(Ordering::SeqCst) > 0 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    writing.store(false, Ordering::SeqCst);
                    guard.release().await.unwrap();
                } else {
                    let guard = locker.read_lock("ledger").wait(wait).await.unwrap();
                    let now = readers.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    if writing.load(Ordering::SeqCst) {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    // Long enough for readers to meet even on a loaded
                    // machine: the history must show them sharing.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    readers.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.unwrap();
                }
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("stuck")
            .unwrap();
    }
    assert_eq!(
        violations.load(Ordering::SeqCst),
        0,
        "a reader beside a writer"
    );
    assert!(
        most_readers.load(Ordering::SeqCst) > 1,
        "readers never shared"
    );
}

/// In a scope holding the write lock, a read of the key is granted at
/// once; in one holding the read lock, a write fails at once.
pub async fn read_inside_write_is_reentrant_and_upgrade_is_refused(store: TestStore) {
    let locker = store.locker().await;
    let writer = locker.write_lock("page").await.unwrap();
    let token = writer.token();
    let inner = locker.clone();
    let read = writer
        .scope(async move {
            let reader = inner.read_lock("page").wait(Duration::ZERO).await?;
            let seen = (reader.token(), FencingToken::current());
            reader.release().await?;
            Ok::<_, LockError>(seen)
        })
        .await
        .unwrap();
    assert_eq!(read, (token, Some(token)));
    assert!(writer.is_held(), "the inner read released the write");
    writer.release().await.unwrap();

    let reader = locker.read_lock("page").await.unwrap();
    let inner = locker.clone();
    let started = Instant::now();
    let upgrade = reader
        .scope(async move {
            inner
                .write_lock("page")
                .wait(Duration::from_secs(30))
                .await
                .map(drop)
        })
        .await;
    assert!(
        matches!(&upgrade, Err(LockError::UpgradeWouldDeadlock { key }) if key == "page"),
        "{upgrade:?}"
    );
    assert!(started.elapsed() < SLACK, "the refused upgrade waited");
    reader.release().await.unwrap();
}
