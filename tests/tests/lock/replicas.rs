//! Replica acknowledgement (`LockerBuilder::replicas`): what it confirms,
//! what it leaves behind when it cannot, and that waiting for it holds up
//! no other lock of the Locker.

use std::time::Duration;

use lock_core::{LockError, Locker};
use lock_testkit::{RedisServer, lasting_keys};
use tokio::time::Instant;

use crate::conformance::SLACK;

/// While one acquisition waits for a frozen replica, a lock the same Locker
/// already holds keeps being renewed: `WAIT` is not on the shared
/// connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_waiting_for_a_frozen_replica_holds_up_no_other_lock() {
    let master = RedisServer::start();
    let replica = master.start_replica().await;
    let within = Duration::from_millis(1500);
    let locker = Locker::builder()
        .ttl(Duration::from_millis(600))
        .replicas(1, within)
        .redis(&master.url())
        .await
        .unwrap();
    let held = locker
        .lock("held")
        .await
        .expect("confirmed by the live replica");
    replica.pause();
    let started = Instant::now();
    let err = locker.lock("unconfirmed").await.unwrap_err();
    let waited = started.elapsed();
    replica.resume();
    assert!(
        matches!(err, LockError::ReplicasNotConfirmed { confirmed: 0, .. }),
        "{err}"
    );
    assert!(waited >= within, "gave up after {waited:?}");
    // Two and a half ttls went by: only renewals kept it.
    assert!(
        held.is_held(),
        "the held lock missed its renewals behind WAIT"
    );
    held.release().await.unwrap();
}

/// Acquisitions refused for want of replicas give their lease back every
/// time, at the confirmation's bound, and leave no key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfirmed_acquisitions_leave_nothing_behind() {
    let master = RedisServer::start();
    let replica = master.start_replica().await;
    let within = Duration::from_millis(500);
    let locker = Locker::builder()
        .replicas(1, within)
        .redis(&master.url())
        .await
        .unwrap();
    replica.pause();
    let mut conn = master.connection().await;
    for run in 0..6 {
        let started = Instant::now();
        let err = locker
            .lock("k")
            .wait(Duration::from_secs(3))
            .await
            .unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(err, LockError::ReplicasNotConfirmed { .. }),
            "run {run}: {err} after {took:?}"
        );
        assert!(took < within + SLACK, "run {run}: {took:?}");
        let left: Vec<String> = lasting_keys(&mut conn).await;
        assert!(left.is_empty(), "run {run} left {left:?}");
    }
    replica.resume();
}
