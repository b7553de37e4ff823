//! Shared parts of the examples: the gRPC service definition and a small
//! fenced order store.
//!
//! The operators' tool is not an example: it is the `lockctl` crate
//! (`cargo install --path lockctl`, docs/lockctl.md). The metrics example
//! serves what `docs/grafana-dashboard.json` graphs.

pub mod orders;
pub mod store;

/// Logs to stderr (coloured only on a terminal), `warn` and up unless
/// `RUST_LOG` says otherwise.
pub fn init_tracing() {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// Whether the example was started with `--demo` (serve on a free port,
/// drive itself, exit).
pub fn demo_mode() -> bool {
    std::env::args().any(|a| a == "--demo")
}

/// Binds 127.0.0.1 on a free port in demo mode, else on `PORT` or
/// `default_port`.
pub async fn bind(default_port: u16) -> std::io::Result<tokio::net::TcpListener> {
    let port = if demo_mode() {
        0
    } else {
        std::env::var("PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(default_port)
    };
    tokio::net::TcpListener::bind(("127.0.0.1", port)).await
}

/// Two replicas' Lockers, for the examples that play a fleet in one
/// process: on the store `LOCK_URL` (or `REDIS_URL`) names each has a
/// Locker of its own; in process they share the one embedded store.
pub async fn replica_lockers()
-> Result<(lock_core::Locker, lock_core::Locker), lock_core::LockError> {
    let first = lock_core::Locker::from_env().await?;
    let second = match std::env::var_os("LOCK_URL").or_else(|| std::env::var_os("REDIS_URL")) {
        Some(_) => lock_core::Locker::from_env().await?,
        None => first.clone(),
    };
    Ok((first, second))
}

/// The documents beside the code, whose Rust blocks run as doc tests here
/// (this crate depends on everything they use), so that no example rots.
#[cfg(doctest)]
pub mod documents {
    #[doc = include_str!("../../README.md")]
    pub struct Readme;

    #[doc = include_str!("../../SECURITY.md")]
    pub struct Security;

    #[doc = include_str!("../../CONTRIBUTING.md")]
    pub struct Contributing;

    #[doc = include_str!("../../docs/locks.md")]
    pub struct Locks;

    #[doc = include_str!("../../docs/stores.md")]
    pub struct Stores;

    #[doc = include_str!("../../docs/guarantees.md")]
    pub struct Guarantees;

    #[doc = include_str!("../../docs/lockctl.md")]
    pub struct Lockctl;

    #[doc = include_str!("../../docs/api.md")]
    pub struct Api;
}
