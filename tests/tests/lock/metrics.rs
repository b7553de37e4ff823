//! The `metrics` feature records acquisitions, waits, losses and releases.

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
            let guard = locker.lock("m").await.unwrap();
            let _ = locker
                .lock("m")
                .wait(Duration::from_millis(20))
                .await
                .unwrap_err();
            guard.release().await.unwrap();
            let short = locker
                .lock("m")
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
    let counter = |name: &str| {
        values
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, v)| match v {
                DebugValue::Counter(c) => *c,
                other => panic!("{name} is {other:?}"),
            })
            .unwrap_or(0)
    };
    assert_eq!(counter("lock_acquired_total"), 2);
    assert_eq!(counter("lock_wait_timeouts_total"), 1);
    assert_eq!(counter("lock_released_total"), 1);
    assert_eq!(counter("lock_lost_total"), 1);
    let lost = values
        .iter()
        .find(|(n, _, _)| n == "lock_lost_total")
        .unwrap();
    assert_eq!(lost.1, vec!["reason=not_renewed_in_time".to_owned()]);
    let waits = values
        .iter()
        .find(|(n, _, _)| n == "lock_wait_seconds")
        .unwrap();
    assert!(matches!(&waits.2, DebugValue::Histogram(h) if h.len() == 2));
}
