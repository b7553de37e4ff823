//! A lock client for the fault suite, in its own OS process, printing its
//! history (see `lock_testkit::history`) on stdout.
//!
//! ```text
//! fault_client worker <lock-url> <data-url> <id> <keys> <ops> <ttl-ms> <work-ms>
//! fault_client starve <lock-url> <data-url> <id> <ttl-ms> <block-ms>
//! ```
//! - `<lock-url>`: any store URL `Locker::connect` takes (`redis://`,
//!   `etcd://`, `zk://`); the data server is a Redis.
//! - `worker`: `ops` times: lock a key (`fault:<n>`), write its token twice
//!   through the fence to the data server, work, release.
//! - `starve`: on a single-threaded runtime, lock `fault:0`, then block the
//!   runtime's only thread for `block-ms` (the watchdog cannot run), then
//!   try to write and release.

use std::sync::Arc;
use std::time::Duration;

use lock_core::fence::RedisFence;
use lock_core::{LockError, LockGuard, Locker};
use lock_testkit::history::{RenewalTap, emit};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, filter::LevelFilter};

async fn write_twice(
    fence: &RedisFence<redis::aio::MultiplexedConnection>,
    id: &str,
    guard: &LockGuard,
) {
    let (key, token) = (guard.key(), guard.token());
    for _ in 0..2 {
        let mut cmd = redis::cmd("RPUSH");
        let list = format!("{{{key}}}:history");
        cmd.arg(&list).arg(token.get());
        match fence.run(&list, token, &cmd).await {
            Ok(_) => emit(id, "write_ok", key, token.get()),
            Err(LockError::StaleToken { .. }) => emit(id, "write_rejected", key, token.get()),
            Err(_) => emit(id, "write_failed", key, token.get()),
        }
    }
}

async fn release(id: &str, guard: LockGuard) {
    let (key, token) = (guard.key().to_owned(), guard.token().get());
    match guard.release().await {
        Ok(()) => emit(id, "release_ok", &key, token),
        Err(_) => emit(id, "release_err", &key, token),
    }
}

/// Reports the loss of `guard`'s lease when it happens.
fn watch_loss(id: &str, guard: &LockGuard) {
    let lost = guard.lost();
    let (id, key, token) = (id.to_owned(), guard.key().to_owned(), guard.token().get());
    tokio::spawn(async move {
        let _ = lost.await;
        emit(&id, "lost", &key, token);
    });
}

async fn fence(data_url: &str) -> RedisFence<redis::aio::MultiplexedConnection> {
    let conn = redis::Client::open(data_url)
        .expect("data url")
        .get_multiplexed_async_connection()
        .await
        .expect("data server");
    RedisFence::new(conn)
}

/// Connects as a service starts: a connect that the loaded machine let
/// run past `timeout` (an outcome-unknown `Unavailable`) is tried again,
/// for up to 30 s. The scenarios' faults come after the clients are up.
async fn connect(url: &str, ttl: Duration, timeout: Duration) -> Locker {
    let started = std::time::Instant::now();
    loop {
        match Locker::builder()
            .ttl(ttl)
            .timeout(timeout)
            .connect(url)
            .await
        {
            Ok(locker) => return locker,
            Err(LockError::Unavailable { source, .. })
                if source.outcome_unknown() && started.elapsed() < Duration::from_secs(30) =>
            {
                continue;
            }
            Err(error) => panic!("lock server: {error:?}"),
        }
    }
}

async fn worker(args: &[String]) {
    let [url, data_url, id, keys, ops, ttl, work] = args else {
        panic!("worker <lock-url> <data-url> <id> <keys> <ops> <ttl-ms> <work-ms>");
    };
    let (keys, ops): (u64, u64) = (keys.parse().unwrap(), ops.parse().unwrap());
    let ttl = Duration::from_millis(ttl.parse().unwrap());
    let work = Duration::from_millis(work.parse().unwrap());
    let timeout = std::env::var("FAULT_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let locker = connect(url, ttl, Duration::from_millis(timeout)).await;
    let fence = fence(data_url).await;
    // FAULT_STEP: wait for a line on stdin before each operation.
    let stepped = std::env::var_os("FAULT_STEP").is_some();
    if stepped {
        emit(id, "ready", "-", 0);
    }
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    for op in 0..ops {
        if stepped {
            let mut line = String::new();
            let _ = tokio::io::AsyncBufReadExt::read_line(&mut stdin, &mut line).await;
        }
        let key = format!("fault:{}", (op + id.len() as u64 * 7) % keys);
        emit(id, "acquire_sent", &key, 0);
        let guard = match locker
            .lock(key.as_str())
            .wait(Duration::from_secs(30))
            .await
        {
            Ok(guard) => guard,
            Err(LockError::Unavailable { source, .. }) if source.outcome_unknown() => {
                emit(id, "acquire_unknown", &key, 0);
                continue;
            }
            Err(_) => {
                emit(id, "acquire_failed", &key, 0);
                continue;
            }
        };
        emit(id, "acquire_ok", &key, guard.token().get());
        watch_loss(id, &guard);
        if !work.is_zero() {
            tokio::time::sleep(work).await;
        }
        write_twice(&fence, id, &guard).await;
        release(id, guard).await;
    }
    emit(id, "done", "-", 0);
}

fn starve(args: &[String]) {
    let [url, data_url, id, ttl, block] = args else {
        panic!("starve <lock-url> <data-url> <id> <ttl-ms> <block-ms>");
    };
    let ttl = Duration::from_millis(ttl.parse().unwrap());
    let block = Duration::from_millis(block.parse().unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let locker = Locker::builder()
            .ttl(ttl)
            .redis(url)
            .await
            .expect("lock server");
        let fence = fence(data_url).await;
        let guard = locker.lock("fault:0").await.expect("acquire");
        emit(id, "acquire_ok", "fault:0", guard.token().get());
        watch_loss(id, &guard);
        emit(id, "blocking", "fault:0", guard.token().get());
        // The runtime's only thread is busy: no watchdog, no renewals.
        std::thread::sleep(block);
        emit(id, "unblocked", "fault:0", guard.token().get());
        // Let the watchdog and the loss report run first.
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        if guard.is_held() {
            emit(id, "still_held", "fault:0", guard.token().get());
        }
        write_twice(&fence, id, &guard).await;
        release(id, guard).await;
        emit(id, "done", "-", 0);
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let id: Arc<str> = Arc::from(args.get(3).map_or("?", String::as_str));
    tracing_subscriber::registry()
        .with(RenewalTap { id }.with_filter(LevelFilter::TRACE))
        .init();
    match args.first().map(String::as_str) {
        Some("worker") => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(worker(&args[1..])),
        Some("starve") => starve(&args[1..]),
        _ => {
            eprintln!("usage: fault_client worker|starve ...");
            std::process::exit(2);
        }
    }
}
