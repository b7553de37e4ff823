//! The library's metrics for Prometheus: lock-core's counters and wait
//! histogram and lock-tower's refused fence tokens, served at `/metrics`
//! while a small workload locks (payments under contention, a scheduled job
//! that skips, a wait that times out, a lease that is lost, a stale token
//! refused). `docs/grafana-dashboard.json` graphs them.
//!
//! ```text
//! cargo run -p examples --features metrics --example metrics            # 127.0.0.1:9100 (PORT), a round a second
//! cargo run -p examples --features metrics --example metrics -- --demo  # a free port, one round, serves for 60 s
//! ```
//!
//! Runs on the embedded backend, or on the store `LOCK_URL` (or
//! `REDIS_URL`) names.

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use lock_core::{LockError, Locker, MIN_TTL};
use lock_tower::{FENCING_TOKEN_HEADER, FenceCheckLayer, KeyFrom};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tower::{Layer, Service, ServiceExt};

/// Upper bounds of the wait histogram's buckets, in seconds: `wait p99`
/// is read from them.
const WAIT_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The recorder every metric of the process goes to, and the handle that
/// renders them.
fn install_recorder() -> Result<PrometheusHandle, Box<dyn std::error::Error>> {
    let buckets = Matcher::Full("lock_wait_seconds".to_owned());
    Ok(PrometheusBuilder::new()
        .set_buckets_for_metric(buckets, WAIT_BUCKETS)?
        .install_recorder()?)
}

/// Payments on two orders from 8 tasks: acquisitions, and waits.
async fn payments(locker: &Locker) -> Result<(), LockError> {
    let tasks = (0..8).map(|task| {
        let locker = locker.clone();
        tokio::spawn(async move {
            for _ in 0..5 {
                let guard = locker.lock(format!("order:{}", task % 2)).await?;
                tokio::time::sleep(Duration::from_millis(2)).await;
                guard.release().await?;
            }
            Ok::<_, LockError>(())
        })
    });
    for task in futures_util::future::join_all(tasks).await {
        task.expect("a payment task panicked")?;
    }
    Ok(())
}

/// A scheduled job's tick on two replicas at once: one runs, one skips.
async fn job_tick(locker: &Locker) -> Result<(), LockError> {
    let running = locker.lock("job:report").if_held_skip().await?;
    let other_replica = locker.lock("job:report").if_held_skip().await?;
    let said = |run: &Option<_>| if run.is_some() { "ran" } else { "skipped" };
    println!("job:report {} and {}", said(&running), said(&other_replica));
    for guard in [running, other_replica].into_iter().flatten() {
        guard.release().await?;
    }
    Ok(())
}

/// A wait that runs out, and a lease that ends unrenewed.
async fn timeout_and_loss(locker: &Locker) -> Result<(), LockError> {
    let held = locker.lock("order:9").await?;
    match locker.lock("order:9").wait(Duration::from_millis(10)).await {
        Err(LockError::WaitTimeout { .. }) => println!("order:9 timed out, as it should"),
        other => println!("order:9: {other:?}"),
    }
    held.release().await?;
    let short = locker
        .lock("session:1")
        .ttl(MIN_TTL)
        .watchdog(false)
        .await?;
    let _lost = short.lost().await;
    Ok(())
}

/// A downstream service's fence check refusing an older token.
async fn stale_token() -> Result<(), Box<dyn std::error::Error>> {
    let check = FenceCheckLayer::new(KeyFrom::path("/accounts/{id}", "account:<id>"));
    let mut service = check.layer(tower::service_fn(|_: http::Request<String>| async {
        Ok::<_, Infallible>(http::Response::new(String::new()))
    }));
    for token in ["8", "7"] {
        let request = http::Request::put("/accounts/7")
            .header(FENCING_TOKEN_HEADER, token)
            .body(String::new())?;
        let response = service.ready().await?.call(request).await?;
        println!("PUT /accounts/7 with token {token}: {}", response.status());
    }
    Ok(())
}

async fn round(locker: &Locker) -> Result<(), Box<dyn std::error::Error>> {
    payments(locker).await?;
    job_tick(locker).await?;
    timeout_and_loss(locker).await?;
    stale_token().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    examples::init_tracing();
    let handle = install_recorder()?;
    let locker = Locker::from_env().await?;
    let demo = examples::demo_mode();
    let listener = examples::bind(9100).await?;
    let addr = listener.local_addr()?;
    let app = Router::new().route("/metrics", get(move || async move { handle.render() }));
    let server = tokio::spawn(axum::serve(listener, app).into_future());
    println!("serving http://{addr}/metrics ({locker:?})");
    for done in 1.. {
        round(&locker).await?;
        println!("round {done} done");
        if demo {
            // Long enough to be scraped, then gone.
            tokio::time::sleep(Duration::from_secs(60)).await;
            server.abort();
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}
