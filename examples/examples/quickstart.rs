//! The demo: several workers contend for the same orders; each order is
//! processed by one worker at a time, and every write carries a fencing
//! token that the (toy) store checks.
//!
//! Runs on the embedded backend, or on the store `LOCK_URL` names (or Redis
//! at `REDIS_URL`):
//!
//! ```text
//! cargo run -p examples --example quickstart
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p examples --example quickstart
//! LOCK_URL=etcd://127.0.0.1:2379 cargo run -p examples --features etcd --example quickstart
//! LOCK_URL=zk://127.0.0.1:2181 cargo run -p examples --features zookeeper --example quickstart
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::{FencingToken, LockError, Locker};

/// A store that remembers the newest token per order and refuses older ones.
#[derive(Default)]
struct FencedStore {
    rows: Mutex<HashMap<u64, (u64, FencingToken)>>,
}

impl FencedStore {
    fn add(&self, order: u64, amount: u64, token: FencingToken) -> Result<u64, String> {
        let mut rows = self.rows.lock().expect("store poisoned");
        let (total, newest) = rows.entry(order).or_insert((0, FencingToken::new(0)));
        if token < *newest {
            return Err(format!(
                "order {order}: token {token} is older than {newest}"
            ));
        }
        *total += amount;
        *newest = token;
        Ok(*total)
    }
}

#[tokio::main]
async fn main() -> Result<(), LockError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let locker = Locker::from_env().await?;
    println!("locker: {locker:?}");
    let store = Arc::new(FencedStore::default());

    let mut workers = Vec::new();
    for worker in 0..4u64 {
        let (locker, store) = (locker.clone(), Arc::clone(&store));
        workers.push(tokio::spawn(async move {
            for round in 0..3u64 {
                let order = (worker + round) % 2 + 41;
                let guard = locker
                    .lock(format!("order:{order}"))
                    .ttl(Duration::from_secs(5))
                    .wait(Duration::from_secs(5))
                    .await?;
                let token = guard.token();
                // The critical section: read, think, write with the token.
                tokio::time::sleep(Duration::from_millis(20)).await;
                match store.add(order, 10, token) {
                    Ok(total) => {
                        println!("worker {worker}: order {order} +10 -> {total} (token {token})")
                    }
                    Err(stale) => println!("worker {worker}: rejected: {stale}"),
                }
                guard.release().await?;
            }
            Ok::<_, LockError>(())
        }));
    }
    for worker in workers {
        worker.await.expect("worker panicked")?;
    }

    // A held lock makes a second request time out with a clear error.
    let held = locker.lock("order:41").await?;
    let err = locker
        .lock("order:41")
        .wait(Duration::from_millis(50))
        .await
        .unwrap_err();
    println!("as expected: {err}");
    held.release().await?;
    let totals = store.rows.lock().expect("store poisoned").clone();
    for (order, (total, newest)) in totals {
        println!("order {order}: total {total}, newest token {newest}");
    }
    Ok(())
}
