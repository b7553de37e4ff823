//! Per-key state that requests create goes away with its last user: 100 000
//! distinct keys, each held, waited for and released, leave no local line,
//! no subscription, no watchdog entry, no metric series and no store key,
//! and the process's memory back near where it started.

use std::time::Duration;

use futures_util::future::join_all;
use lock_core::LockError;
use lock_testkit::TestStore;
use metrics_util::debugging::DebuggingRecorder;

const KEYS: usize = 100_000;
/// Keys in flight at once.
const AT_ONCE: usize = 500;

/// Resident memory of this process, in KiB.
fn resident_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

#[test]
fn state_made_for_100_000_keys_goes_with_its_last_user() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let store = TestStore::redis();
    let server = store.server().unwrap();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            // Memory is this test's contract, not latency: thousands of
            // requests at once on one thread of a loaded machine may wait
            // past the default 2 s for their answers.
            let patient = |b: lock_core::LockerBuilder| b.timeout(Duration::from_secs(10));
            let holder = store.locker_with(patient).await.0;
            let waiter = store.locker_with(patient).await.0;
            let round = |keys: std::ops::Range<usize>| {
                let (holder, waiter) = (&holder, &waiter);
                join_all(keys.map(move |i| async move {
                    let key = format!("order:{i}");
                    // Watchdog on: a timetable entry per held key.
                    let guard = holder.lock(&key).await.unwrap();
                    // Another process's waiter: a local line and a
                    // subscription to the key's channel, until it gives up.
                    let waited = waiter.lock(&key).wait(Duration::from_millis(5)).await;
                    assert!(matches!(waited, Err(LockError::WaitTimeout { .. })));
                    guard.release().await.unwrap();
                }))
            };
            // A first round warms the allocator and the connections.
            round(0..AT_ONCE).await;
            let before = resident_kib();
            for start in (AT_ONCE..KEYS).step_by(AT_ONCE) {
                round(start..(start + AT_ONCE).min(KEYS)).await;
            }
            let after = resident_kib();
            eprintln!(
                "resident memory: {before} KiB before {KEYS} keys, {after} KiB after \
                 ({:+} KiB)",
                after as i64 - before as i64
            );
            assert_eq!(holder.local_queues(), 0);
            assert_eq!(waiter.local_queues(), 0);
            // Unsubscribing is sent in the background: polled, with a bound.
            let mut conn = server.connection().await;
            let started = tokio::time::Instant::now();
            loop {
                let channels: Vec<String> = redis::cmd("PUBSUB")
                    .arg("CHANNELS")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                if channels.is_empty() {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "{} channels left, e.g. {:?}",
                    channels.len(),
                    channels.first()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            store.assert_nothing_left().await;
            // Nothing per key stays: 160 bytes a key would be 16 MB.
            assert!(
                after.saturating_sub(before) < 16 * 1024,
                "{before} KiB -> {after} KiB"
            );
        });
    });
    // Keys are never labels: the metric series are the same few.
    let series = snapshotter.snapshot().into_vec().len();
    assert!(series < 16, "{series} metric series");
}
