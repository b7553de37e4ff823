//! An outbox relay that runs on one replica at a time: two replicas
//! campaign for `outbox-relay`, each publishing its name; the leader sends
//! batches fenced by its term's token until its replica stops (here after
//! 700 ms, as in a deploy), and the other takes over at once. An observer
//! prints each change of leader.
//!
//! Runs on the embedded backend, or on the store `LOCK_URL` names:
//!
//! ```text
//! cargo run -p examples --example leader
//! LOCK_URL=redis://127.0.0.1:6379 cargo run -p examples --example leader
//! ```

use std::time::Duration;

use futures_util::StreamExt;
use lock_core::{Lease, LockError, Locker};

/// The relay's body: sends a batch every 200 ms while its term lasts.
/// `run_as_leader` drops it the moment the leadership is lost.
async fn relay(name: &'static str, term: Lease) -> Result<(), LockError> {
    for batch in 1.. {
        // A real relay reads the outbox and writes downstream, passing
        // term.token() so that a deposed leader's late writes are refused.
        println!("{name} sent batch {batch} with token {}", term.token());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// One replica: campaigns and relays while leading, for `runs_for`.
async fn replica(name: &'static str, locker: Locker, runs_for: Duration) {
    let election = locker
        .election("outbox-relay")
        .value(name)
        .ttl(Duration::from_secs(2));
    let leading = election.run_as_leader(|term| relay(name, term));
    match tokio::time::timeout(runs_for, leading).await {
        // Stopped: a leadership it held is given up as the future drops.
        Err(_) => println!("{name} stopped"),
        Ok(Err(err)) => println!("{name} cannot campaign: {err}"),
    }
}

#[tokio::main]
async fn main() -> Result<(), LockError> {
    let (first, second) = examples::replica_lockers().await?;
    println!("locker: {first:?}");
    let mut changes = first.observe("outbox-relay");
    let observer = tokio::spawn(async move {
        while let Some(change) = changes.next().await {
            match change {
                Ok(Some(leader)) => println!(
                    "leader: {} (token {})",
                    leader.value.as_deref().unwrap_or("?"),
                    leader.token
                ),
                Ok(None) => println!("leader: none"),
                Err(err) => println!("observing failed: {err}"),
            }
        }
    });
    let a = tokio::spawn(replica("replica-a", first, Duration::from_millis(700)));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let b = tokio::spawn(replica("replica-b", second, Duration::from_millis(1300)));
    let _ = tokio::join!(a, b);
    observer.abort();
    Ok(())
}
