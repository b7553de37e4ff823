//! A job that runs once per tick across replicas: two replicas, each with
//! its own timer (the second 30 ms late), try the job on every tick with
//! `if_held = "skip"` and `hold_at_least`: the first to ask runs it, and the
//! other finds it held and skips, even when the job itself is quick.
//!
//! Runs on the embedded backend, or on the store `LOCK_URL` names:
//!
//! ```text
//! cargo run -p examples --example scheduled_job
//! LOCK_URL=redis://127.0.0.1:6379 cargo run -p examples --example scheduled_job
//! ```

use std::time::Duration;

use lock_core::{FencingToken, LockError, Locker, Outcome, distributed_lock};
use tokio::time::Instant;

const TICKS: u64 = 6;
const PERIOD: Duration = Duration::from_secs(1);

/// The nightly report, once per tick across the fleet. It is kept at least
/// 700 ms, so a replica whose timer runs a little late skips it too.
#[distributed_lock(key = "job:report", locker = locker, if_held = "skip", hold_at_least = "700ms")]
async fn report(locker: &Locker) -> Result<Outcome<FencingToken>, LockError> {
    let token = FencingToken::current().expect("inside the lock");
    // The job's work would go here, its writes fenced with `token`.
    Ok(token)
}

/// One replica: its own timer, `TICKS` times.
async fn replica(name: &'static str, locker: Locker, start: Instant, late: Duration) {
    let mut timer = tokio::time::interval_at(start + late, PERIOD);
    for tick in 0..TICKS {
        timer.tick().await;
        match report(&locker).await {
            Ok(Outcome::Ran(token)) => println!("tick {tick}: ran on {name} with token {token}"),
            Ok(Outcome::Skipped) => println!("tick {tick}: skipped on {name}"),
            Err(err) => println!("tick {tick}: failed on {name}: {err}"),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), LockError> {
    let (first, second) = examples::replica_lockers().await?;
    println!("locker: {first:?}");
    let start = Instant::now() + Duration::from_millis(50);
    let a = tokio::spawn(replica("replica-a", first, start, Duration::ZERO));
    let b = tokio::spawn(replica(
        "replica-b",
        second,
        start,
        Duration::from_millis(30),
    ));
    let _ = tokio::join!(a, b);
    Ok(())
}
