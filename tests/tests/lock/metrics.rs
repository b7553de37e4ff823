//! The `metrics` feature records acquisitions, waits, skips, losses and
//! releases, per key prefix where a key is at hand.

use std::time::Duration;

use lock_core::Locker;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[test]
fn metrics_count_what_happens() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // A current-thread runtime inside the local recorder: every task of the
    // test (watchdogs included) records into it.
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let locker = Locker::memory();
            let guard = locker.lock("order:1").await.unwrap();
            let _ = locker
                .lock("order:1")
                .wait(Duration::from_millis(20))
                .await
                .unwrap_err();
            // Two skips, not timed-out waits.
            assert!(locker.try_lock("order:1").await.unwrap().is_none());
            let skipped = locker.lock("order:1").if_held_skip().await.unwrap();
            assert!(skipped.is_none());
            guard.release().await.unwrap();
            let short = locker
                .lock("job:nightly")
                .ttl(Duration::from_millis(50))
                .watchdog(false)
                .await
                .unwrap();
            let _ = short.lost().await;
        });
    });
    let values: Vec<(String, Vec<String>, DebugValue)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            (key.name().to_owned(), labels, value)
        })
        .collect();
    // The sum over every label set of counter `name`, and the label sets.
    let counter = |name: &str| {
        let found = values.iter().filter(|(n, _, _)| n == name);
        let mut labels: Vec<String> = found.clone().flat_map(|(_, l, _)| l.clone()).collect();
        labels.sort();
        let sum = found
            .map(|(_, _, v)| match v {
                DebugValue::Counter(c) => *c,
                other => panic!("{name} is {other:?}"),
            })
            .sum::<u64>();
        (sum, labels)
    };
    let by_prefix = |prefixes: &[&str]| -> Vec<String> {
        prefixes.iter().map(|p| format!("prefix={p}")).collect()
    };
    assert_eq!(
        counter("lock_acquired_total"),
        (2, by_prefix(&["job", "order"]))
    );
    assert_eq!(
        counter("lock_wait_timeouts_total"),
        (1, by_prefix(&["order"]))
    );
    assert_eq!(counter("lock_skipped_total"), (2, by_prefix(&["order"])));
    assert_eq!(counter("lock_released_total").0, 1);
    assert_eq!(counter("lock_lost_total").0, 1);
    let lost = values
        .iter()
        .find(|(n, _, _)| n == "lock_lost_total")
        .unwrap();
    assert_eq!(lost.1, vec!["reason=not_renewed_in_time".to_owned()]);
    let waits: Vec<_> = values
        .iter()
        .filter(|(n, _, _)| n == "lock_wait_seconds")
        .map(|(_, labels, value)| match value {
            DebugValue::Histogram(h) => (labels.clone(), h.len()),
            other => panic!("lock_wait_seconds is {other:?}"),
        })
        .collect();
    assert_eq!(waits.len(), 2, "{waits:?}");
    assert!(waits.contains(&(by_prefix(&["order"]), 1)), "{waits:?}");
}
