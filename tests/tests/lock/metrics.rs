//! The `metrics` feature records acquisitions, waits, skips, losses and
//! releases, per key prefix where a key is at hand, and fences' refusals.

use std::future::Future;
use std::time::Duration;

use lock_core::Locker;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

/// What `work` recorded, as (name, labels as `key=value`, value): run on a
/// current-thread runtime inside a local recorder, so that every task of
/// it (watchdogs included) records there.
fn recorded<F: Future<Output = ()>>(
    work: impl FnOnce() -> F,
) -> Vec<(String, Vec<String>, DebugValue)> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(work());
    });
    snapshotter
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
        .collect()
}

#[test]
fn metrics_count_what_happens() {
    let values = recorded(|| async {
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

/// A fence's refusal of a stale write is counted as
/// `lock_fence_refused_total{check="write"}`, once per refused write.
#[test]
fn fenced_writes_refused_are_counted() {
    let server = lock_testkit::RedisServer::start();
    let values = recorded(|| async {
        let fence = lock_core::fence::RedisFence::new(server.connection().await);
        let t = lock_core::FencingToken::new;
        fence.set("balance:7", 120, t(12)).await.unwrap();
        fence.set("balance:7", 130, t(12)).await.unwrap();
        assert!(fence.set("balance:7", 1, t(11)).await.is_err());
    });
    let refused: Vec<_> = values
        .iter()
        .filter(|(name, ..)| name == "lock_fence_refused_total")
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].1, ["check=write"]);
    assert!(
        matches!(refused[0].2, DebugValue::Counter(1)),
        "{refused:?}"
    );
}
