//! `#[distributed_lock]` at run time, against a real redis-server.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use lock_core::{FencingToken, LockError, Locker, Outcome, distributed_lock};
use lock_testkit::{RedisServer, TestStore};
use tokio::sync::{Barrier, Notify};

/// An application error that lock failures convert into.
#[derive(Debug)]
enum AppError {
    Lock(LockError),
    Overlap,
}

impl From<LockError> for AppError {
    fn from(error: LockError) -> Self {
        AppError::Lock(error)
    }
}

async fn redis_locker(server: &RedisServer) -> Locker {
    Locker::redis(&server.url()).await.unwrap()
}

/// Marks itself inside `order` for a moment; fails on overlap.
#[distributed_lock(key = "order:<order>", locker = locker, wait = "10s")]
async fn exclusive(locker: &Locker, order: u32, inside: &AtomicBool) -> Result<(), AppError> {
    if inside.swap(true, Ordering::SeqCst) {
        return Err(AppError::Overlap);
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    inside.store(false, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_key_calls_serialise() {
    let server = RedisServer::start();
    let (a, b) = (redis_locker(&server).await, redis_locker(&server).await);
    let inside = AtomicBool::new(false);
    let calls = (0..20).map(|i| exclusive(if i % 2 == 0 { &a } else { &b }, 42, &inside));
    for result in futures_util::future::join_all(calls).await {
        result.expect("no overlap, no lock error");
    }
}

/// Waits at a barrier inside the lock: only possible if both calls are inside.
#[distributed_lock(key = "order:<order>", locker = locker)]
async fn meet(locker: &Locker, order: u32, barrier: &Barrier) -> Result<(), LockError> {
    barrier.wait().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_keys_run_in_parallel() {
    let server = RedisServer::start();
    let locker = redis_locker(&server).await;
    let barrier = Barrier::new(2);
    let both = futures_util::future::join(meet(&locker, 1, &barrier), meet(&locker, 2, &barrier));
    let (x, y) = tokio::time::timeout(Duration::from_secs(10), both)
        .await
        .expect("different orders ran one after the other");
    x.unwrap();
    y.unwrap();
}

#[distributed_lock(key = "order:<order>", locker = locker, wait = "200ms")]
async fn impatient(locker: &Locker, order: u32) -> Result<FencingToken, AppError> {
    Ok(FencingToken::current().expect("inside the lock"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_and_tokens() {
    let server = RedisServer::start();
    let locker = redis_locker(&server).await;
    let other = redis_locker(&server).await;
    assert_eq!(FencingToken::current(), None);
    let first = impatient(&locker, 7).await.unwrap();
    let second = impatient(&locker, 7).await.unwrap();
    assert!(second > first, "tokens rise across calls");
    let held = other.lock("order:7").await.unwrap();
    match impatient(&locker, 7).await {
        Err(AppError::Lock(LockError::WaitTimeout { key, .. })) => assert_eq!(key, "order:7"),
        other => panic!("expected a wait timeout, got {other:?}"),
    }
    held.release().await.unwrap();
}

#[distributed_lock(key = "account:<id>", locker = locker)]
async fn outer(locker: &Locker, id: u32) -> Result<(FencingToken, FencingToken), LockError> {
    let mine = FencingToken::current().unwrap();
    let nested = inner(locker, id).await?;
    Ok((mine, nested))
}

#[distributed_lock(key = "account:<id>", locker = locker)]
async fn inner(locker: &Locker, id: u32) -> Result<FencingToken, LockError> {
    Ok(FencingToken::current().unwrap())
}

#[distributed_lock(key = "tree:<root>", locker = locker)]
async fn depth(locker: &Locker, root: u32, n: u32) -> Result<u32, LockError> {
    if n == 0 {
        return Ok(0);
    }
    Ok(1 + Box::pin(depth(locker, root, n - 1)).await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrancy_and_recursion() {
    let server = RedisServer::start();
    let locker = redis_locker(&server).await;
    let (mine, nested) = tokio::time::timeout(Duration::from_secs(10), outer(&locker, 1))
        .await
        .expect("nested lock on the same key deadlocked")
        .unwrap();
    assert_eq!(mine, nested);
    let levels = tokio::time::timeout(Duration::from_secs(10), depth(&locker, 1, 5))
        .await
        .expect("recursion deadlocked")
        .unwrap();
    assert_eq!(levels, 5);
    // Released by the outermost exit only: now free.
    assert!(locker.try_lock("account:1").await.unwrap().is_some());
    assert!(locker.try_lock("tree:1").await.unwrap().is_some());
}

#[distributed_lock(key = "job:<id>", locker = locker, ttl = "600ms", on_lost = "abort")]
async fn aborted_on_loss(locker: &Locker, id: u32, entered: &Notify) -> Result<(), LockError> {
    entered.notify_one();
    std::future::pending::<()>().await;
    Ok(())
}

#[distributed_lock(key = "job:<id>", locker = locker, ttl = "600ms", on_lost = "continue")]
async fn continued_after_loss(
    locker: &Locker,
    id: u32,
    entered: &Notify,
    proceed: &Notify,
) -> Result<bool, LockError> {
    entered.notify_one();
    proceed.notified().await;
    Ok(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_lost_abort_and_continue() {
    let store = TestStore::redis();
    let locker = store.locker().await;
    let entered = Notify::new();
    let call = aborted_on_loss(&locker, 1, &entered);
    let steal = async {
        entered.notified().await;
        store.steal(&locker, "job:1").await;
    };
    let (result, ()) = tokio::time::timeout(
        Duration::from_secs(10),
        futures_util::future::join(call, steal),
    )
    .await
    .expect("the body was not aborted");
    assert!(matches!(result, Err(LockError::Lost { .. })), "{result:?}");

    let proceed = Notify::new();
    let call = continued_after_loss(&locker, 2, &entered, &proceed);
    let steal = async {
        entered.notified().await;
        store.steal(&locker, "job:2").await;
        // Let the body go on only once the holder knows it lost the lease.
        while locker.try_lock("job:2").await.unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        proceed.notify_one();
    };
    let (result, ()) = futures_util::future::join(call, steal).await;
    assert!(result.unwrap(), "the body ran to the end");
}

#[distributed_lock(key = "slow:<id>", locker = locker)]
async fn slow(locker: &Locker, id: u32, entered: &Notify) -> Result<(), LockError> {
    entered.notify_one();
    std::future::pending::<()>().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_caller_releases() {
    let server = RedisServer::start();
    let locker = redis_locker(&server).await;
    let other = redis_locker(&server).await;
    let entered = Arc::new(Notify::new());
    let task = {
        let (locker, entered) = (locker.clone(), entered.clone());
        tokio::spawn(async move { slow(&locker, 3, &entered).await })
    };
    entered.notified().await;
    assert!(
        other.try_lock("slow:3").await.unwrap().is_none(),
        "held while running"
    );
    task.abort();
    let _ = task.await;
    // Released in the background at once, not at the 30 s TTL.
    let guard = other
        .lock("slow:3")
        .wait(Duration::from_secs(5))
        .await
        .unwrap();
    guard.release().await.unwrap();
}

/// A service that carries its own Locker.
struct Ledger {
    locker: Locker,
    shard: &'static str,
    writes: AtomicU32,
}

impl Ledger {
    #[distributed_lock(key = "ledger:<self.shard>:<account>", locker = self.locker)]
    async fn credit(&self, account: u32) -> Result<u32, LockError> {
        Ok(self.writes.fetch_add(1, Ordering::SeqCst) + 1)
    }

    #[distributed_lock(key = "ledger:<self.shard>:reset", locker = self.locker)]
    async fn reset(&mut self) -> Result<(), LockError> {
        self.writes = AtomicU32::new(0);
        Ok(())
    }

    #[distributed_lock(key = "ledger:<self.shard>:arc", locker = self.locker.clone())]
    async fn shared(self: Arc<Self>) -> Result<u32, LockError> {
        Ok(self.writes.load(Ordering::SeqCst))
    }

    /// Consumes the ledger.
    #[must_use = "the count is the point"]
    #[distributed_lock(key = "ledger:<self.shard>:close", locker = self.locker.clone())]
    pub async fn close(self) -> Result<u32, LockError> {
        Ok(self.writes.into_inner())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn methods_with_every_receiver() {
    let server = RedisServer::start();
    let mut ledger = Ledger {
        locker: redis_locker(&server).await,
        shard: "eu",
        writes: AtomicU32::new(0),
    };
    assert_eq!(ledger.credit(1).await.unwrap(), 1);
    assert_eq!(ledger.credit(2).await.unwrap(), 2);
    ledger.reset().await.unwrap();
    let ledger = Arc::new(ledger);
    assert_eq!(ledger.clone().shared().await.unwrap(), 0);
    let ledger = Arc::into_inner(ledger).unwrap();
    assert_eq!(ledger.close().await.unwrap(), 0);
}

trait Payments {
    async fn pay(&self, order: u64) -> Result<u64, LockError>;
}

struct Gateway {
    locker: Locker,
}

impl Payments for Gateway {
    #[distributed_lock(key = "pay:<order>", locker = self.locker)]
    async fn pay(&self, order: u64) -> Result<u64, LockError> {
        Ok(FencingToken::current().unwrap().get())
    }
}

#[distributed_lock(key = "generic:<item>", locker = locker)]
async fn generic<T>(
    locker: &Locker,
    item: T,
    extra: impl std::fmt::Display,
) -> Result<String, LockError>
where
    T: std::fmt::Display + Send,
{
    Ok(format!("{item}/{extra}"))
}

#[distributed_lock(key = "pair:<pair.0>:<first>", locker = locker)]
async fn patterns(
    locker: &Locker,
    pair: (u8, u8),
    (first, _second): (u8, u8),
) -> Result<u8, LockError> {
    Ok(pair.1 + first)
}

#[distributed_lock(key = "long:<id>", ttl = "1m30s", wait = "1s", locker = locker)]
async fn long_lease(locker: &Locker, id: u8) -> Result<u8, LockError> {
    Ok(id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compound_durations_are_accepted() {
    assert_eq!(long_lease(&Locker::memory(), 7).await.unwrap(), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trait_impls_generics_and_patterns() {
    let locker = Locker::memory();
    let gateway = Gateway {
        locker: locker.clone(),
    };
    // The method locks `pay:9`: it waits while that key is held elsewhere,
    // then runs under a newer token.
    let held = locker.lock("pay:9").await.unwrap();
    let mut call = Box::pin(gateway.pay(9));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(
        call.as_mut().poll(&mut cx).is_pending(),
        "pay(9) did not wait for the lock on pay:9"
    );
    let before = held.token().get();
    held.release().await.unwrap();
    assert!(call.await.unwrap() > before);
    assert_eq!(generic(&locker, 5, "x").await.unwrap(), "5/x");
    assert_eq!(patterns(&locker, (1, 2), (3, 4)).await.unwrap(), 5);
}

#[distributed_lock(key = "bad:<name>", locker = locker)]
async fn keyed_by(locker: &Locker, name: &str) -> Result<(), LockError> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_time_key_errors_come_back_as_errors() {
    let locker = Locker::memory();
    let huge = "x".repeat(10_000);
    assert!(matches!(
        keyed_by(&locker, &huge).await,
        Err(LockError::InvalidKey { .. })
    ));
    keyed_by(&locker, "{odd}*key\r\n").await.unwrap();
}

#[distributed_lock(
    key = "lease:<id>",
    locker = locker,
    ttl = "300ms",
    watchdog = false,
    on_lost = "continue",
    crate = "::lock_core"
)]
async fn unrenewed(
    locker: &Locker,
    id: u32,
    entered: &Notify,
    proceed: &Notify,
) -> Result<(), LockError> {
    entered.notify_one();
    proceed.notified().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_off_lets_the_lease_run_out() {
    let server = RedisServer::start();
    let locker = redis_locker(&server).await;
    let other = redis_locker(&server).await;
    let (entered, proceed) = (Notify::new(), Notify::new());
    let call = unrenewed(&locker, 1, &entered, &proceed);
    let meanwhile = async {
        entered.notified().await;
        // Another owner gets the key while the body still runs: no renewal.
        let guard = other
            .lock("lease:1")
            .wait(Duration::from_secs(5))
            .await
            .unwrap();
        proceed.notify_one();
        guard
    };
    let (result, guard) = futures_util::future::join(call, meanwhile).await;
    result.unwrap();
    guard.release().await.unwrap();
}

#[distributed_lock(key = "panics:<id>", locker = locker)]
async fn panicking(locker: &Locker, id: u32) -> Result<(), LockError> {
    panic!("the body panicked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_body_releases() {
    let server = RedisServer::start();
    let locker = redis_locker(&server).await;
    let other = redis_locker(&server).await;
    let l = locker.clone();
    let joined = tokio::spawn(async move { panicking(&l, 1).await }).await;
    assert!(joined.unwrap_err().is_panic());
    // Released in the background during unwinding, not at the 30 s TTL.
    let guard = other
        .lock("panics:1")
        .wait(Duration::from_secs(5))
        .await
        .unwrap();
    guard.release().await.unwrap();
}

/// A transfer locks both accounts whichever way it goes; each key's token
/// is at hand inside.
#[distributed_lock(keys = ["account:<from>", "account:<to>"], locker = locker, wait = "30s")]
async fn transfer(
    locker: &Locker,
    from: u32,
    to: u32,
    balances: &[AtomicU32; 2],
    inside: &AtomicBool,
) -> Result<(FencingToken, FencingToken), LockError> {
    assert!(
        !inside.swap(true, Ordering::SeqCst),
        "two transfers at once"
    );
    let (debit, credit) = (
        balances[from as usize].load(Ordering::SeqCst),
        balances[to as usize].load(Ordering::SeqCst),
    );
    tokio::task::yield_now().await;
    balances[from as usize].store(debit - 1, Ordering::SeqCst);
    balances[to as usize].store(credit + 1, Ordering::SeqCst);
    inside.store(false, Ordering::SeqCst);
    let token_of = |id: u32| FencingToken::current_for(format!("account:{id}"));
    Ok((token_of(from).expect("from"), token_of(to).expect("to")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_lock_every_account_without_deadlock() {
    let server = RedisServer::start();
    let balances = Arc::new([AtomicU32::new(500), AtomicU32::new(500)]);
    let inside = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (from, to) in [(0, 1), (1, 0)] {
        let (locker, balances, inside) = (
            redis_locker(&server).await,
            balances.clone(),
            inside.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut last = (FencingToken::new(0), FencingToken::new(0));
            for _ in 0..200 {
                let (a, b) = transfer(&locker, from, to, &balances, &inside)
                    .await
                    .unwrap();
                assert!(a > last.0 && b > last.1, "tokens did not rise");
                last = (a, b);
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("the transfers deadlocked")
            .unwrap();
    }
    let ends: Vec<u32> = balances.iter().map(|b| b.load(Ordering::SeqCst)).collect();
    assert_eq!(ends, [500, 500], "a transfer overlapped another");
    // Neither key is left held.
    let locker = redis_locker(&server).await;
    let both = locker
        .lock_all(["account:0", "account:1"])
        .wait(Duration::ZERO);
    both.await.unwrap().release().await.unwrap();
}

/// At most two exports run at once, across Lockers.
#[distributed_lock(key = "exports", permits = 2, locker = locker, wait = "30s")]
async fn export(locker: &Locker, inside: &AtomicU32, most: &AtomicU32) -> Result<(), LockError> {
    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
    most.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(20)).await;
    inside.fetch_sub(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_make_a_semaphore() {
    let server = RedisServer::start();
    let (inside, most) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let (locker, inside, most) = (redis_locker(&server).await, inside.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                export(&locker, &inside, &most).await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("stuck")
            .unwrap();
    }
    // Two at once, never three.
    assert_eq!(most.load(Ordering::SeqCst), 2);
}

/// Reads a page under the read lock: the write lock's holder is never
/// inside with it.
#[distributed_lock(key = "page:<id>", kind = "read", locker = locker, wait = "30s")]
async fn read_page(
    locker: &Locker,
    id: u32,
    readers: &AtomicU32,
    most: &AtomicU32,
    writing: &AtomicU32,
) -> Result<u32, LockError> {
    let now = readers.fetch_add(1, Ordering::SeqCst) + 1;
    most.fetch_max(now, Ordering::SeqCst);
    let overlap = writing.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(10)).await;
    readers.fetch_sub(1, Ordering::SeqCst);
    let _ = id;
    Ok(overlap)
}

/// Writes a page under the write lock; a read of it inside is reentrant.
#[distributed_lock(key = "page:<id>", kind = "write", locker = locker, wait = "30s")]
async fn write_page(
    locker: &Locker,
    id: u32,
    readers: &AtomicU32,
    writing: &AtomicU32,
) -> Result<u32, LockError> {
    writing.fetch_add(1, Ordering::SeqCst);
    let overlap = readers.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(5)).await;
    // Reading back what was written: granted at once inside the write.
    let token = FencingToken::current();
    let seen = read_back(locker, id).await?;
    writing.fetch_sub(1, Ordering::SeqCst);
    assert_eq!(seen, token, "the inner read is the write's own lock");
    Ok(overlap)
}

#[distributed_lock(key = "page:<id>", kind = "read", locker = locker, wait = "0s")]
async fn read_back(locker: &Locker, id: u32) -> Result<Option<FencingToken>, LockError> {
    let _ = id;
    Ok(FencingToken::current())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kind_read_and_write_make_a_read_write_lock() {
    let server = RedisServer::start();
    let (readers, most, writing) = (
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicU32::new(0)),
    );
    let mut tasks = Vec::new();
    for worker in 0..6u32 {
        let locker = redis_locker(&server).await;
        let (readers, most, writing) = (readers.clone(), most.clone(), writing.clone());
        tasks.push(tokio::spawn(async move {
            let mut overlaps = 0;
            for round in 0..6u32 {
                overlaps += if (worker + round) % 3 == 0 {
                    write_page(&locker, 7, &readers, &writing).await.unwrap()
                } else {
                    read_page(&locker, 7, &readers, &most, &writing)
                        .await
                        .unwrap()
                };
            }
            overlaps
        }));
    }
    for task in tasks {
        let overlaps = tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("stuck")
            .unwrap();
        assert_eq!(overlaps, 0, "a reader and a writer were inside at once");
    }
    assert!(most.load(Ordering::SeqCst) > 1, "readers never shared");
}

/// Served in the order the calls reached the store.
#[distributed_lock(key = "queue", kind = "fair", locker = locker, wait = "30s")]
async fn serve(
    locker: &Locker,
    order: &std::sync::Mutex<Vec<u32>>,
    i: u32,
) -> Result<(), LockError> {
    order.lock().unwrap().push(i);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kind_fair_serves_in_arrival_order() {
    let locker = Locker::memory();
    let held = locker.fair_lock("queue").await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..5u32 {
        let (mine, order) = (locker.clone(), order.clone());
        tasks.push(tokio::spawn(async move { serve(&mine, &order, i).await }));
        // In line before the next one comes.
        while locker.local_waiters("queue") <= i as usize {
            tokio::task::yield_now().await;
        }
    }
    held.release().await.unwrap();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
}

/// A job one replica of many runs: skipped (not waited for) while held.
#[distributed_lock(key = "job:<name>", locker = locker, if_held = "skip")]
async fn nightly(locker: &Locker, name: &str, runs: &AtomicU32) -> Result<Outcome<u32>, AppError> {
    Ok(runs.fetch_add(1, Ordering::SeqCst) + 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_held_skip_returns_skipped_without_entering_the_body() {
    let store = TestStore::redis();
    let locker = store.locker().await;
    let runs = AtomicU32::new(0);
    let held = locker.lock("job:report").await.unwrap();
    let skipped = nightly(&locker, "report", &runs).await.unwrap();
    assert_eq!(skipped, Outcome::Skipped);
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the body ran while held");
    held.release().await.unwrap();
    let ran = nightly(&locker, "report", &runs).await.unwrap();
    assert_eq!(ran, Outcome::Ran(1));
    // A bad key is still an error, not a skip.
    let err = nightly(&locker, &"x".repeat(600), &runs).await;
    assert!(matches!(err, Err(AppError::Lock(_))), "{err:?}");
    store.assert_nothing_left().await;
}

/// A job kept at least 2 s: a second call right after the first is skipped.
#[distributed_lock(key = "job:<name>", locker = locker, if_held = "skip", hold_at_least = "2s")]
async fn weekly(locker: &Locker, name: &str, runs: &AtomicU32) -> Result<Outcome<u32>, AppError> {
    Ok(runs.fetch_add(1, Ordering::SeqCst) + 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_at_least_skips_a_second_call_within_it() {
    let locker = Locker::memory();
    let runs = AtomicU32::new(0);
    assert_eq!(
        weekly(&locker, "digest", &runs).await.unwrap(),
        Outcome::Ran(1)
    );
    assert_eq!(
        weekly(&locker, "digest", &runs).await.unwrap(),
        Outcome::Skipped
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
