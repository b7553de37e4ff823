//! `#[distributed_lock]` raises no lint in the user's crate: this file is
//! built under `deny(warnings)` by `cargo test` and under `deny(clippy::all)`
//! by `cargo clippy`, so an expansion that warns fails the build. Each
//! function is also called, on the memory store, to check what it returns.
//!
//! rustc reports the braces of a one-line body only, so the bodies below
//! stay on one line (`rustfmt::skip`), as users write them.

#![deny(warnings)]
#![deny(clippy::all)]

use std::fmt::Display;
use std::time::Duration;

use lock_core::backend::MemoryBackend;
use lock_core::{FencingToken, LockError, Locker, distributed_lock};

/// An application error that lock failures convert into.
#[derive(Debug)]
enum AppError {
    Lock(LockError),
    Declined(u32),
}

impl From<LockError> for AppError {
    fn from(error: LockError) -> Self {
        AppError::Lock(error)
    }
}

struct Order {
    id: u64,
    region: &'static str,
}

struct Payments {
    locker: Locker,
    calls: u32,
}

#[rustfmt::skip]
impl Payments {
    // A one-expression body.
    #[distributed_lock(key = "order:<order.id>", ttl = "1m30s", locker = self.locker)]
    async fn pay(&self, order: &Order) -> Result<&'static str, AppError> { Ok(order.region) }

    // `&mut self`.
    #[distributed_lock(key = "job:<n>", ttl = "30s", locker = self.locker)]
    async fn mutate(&mut self, n: u32) -> Result<u32, AppError> { Ok(n + 1) }

    // `keys`, and a generic argument.
    #[distributed_lock(keys = ["acct:<a>", "acct:<b>"], ttl = "10s", locker = self.locker)]
    async fn transfer<T: Into<u64> + Send>(&self, a: u64, b: u64, amount: T) -> Result<u64, AppError> { Ok(a + b + amount.into()) }

    // Statements after a mutation of the receiver, and `return`.
    #[distributed_lock(key = "count:<limit>", locker = self.locker)]
    async fn count(&mut self, limit: u32) -> Result<u32, AppError> {
        self.calls += 1;
        if self.calls > limit {
            return Err(AppError::Declined(self.calls));
        }
        Ok(self.calls)
    }

    // A lifetime that ties the output to an argument.
    #[distributed_lock(key = "name:<name>", locker = self.locker)]
    async fn echo<'a>(&self, name: &'a str) -> Result<&'a str, AppError> { Ok(name) }

    // `?` in a one-expression body.
    #[distributed_lock(key = "parse:<text>", locker = self.locker)]
    async fn parse(&self, text: &str) -> Result<u32, AppError> { let n = text.parse().map_err(|_| AppError::Declined(0))?; Ok(n) }
}

// A free function with an `impl Trait` argument.
#[rustfmt::skip]
#[distributed_lock(key = "label:<label>", locker = locker)]
async fn label(locker: &Locker, label: impl Display + Send + Sync) -> Result<String, LockError> { Ok(label.to_string()) }

// Every kind, each with a one-expression body returning the token.
#[rustfmt::skip]
#[distributed_lock(key = "plain:<id>", locker = locker)]
async fn plain(locker: &Locker, id: u32) -> Result<u64, LockError> { Ok(FencingToken::current().map_or(0, FencingToken::get)) }

#[rustfmt::skip]
#[distributed_lock(key = "fair:<id>", kind = "fair", locker = locker)]
async fn fair(locker: &Locker, id: u32) -> Result<u64, LockError> { Ok(FencingToken::current().map_or(0, FencingToken::get)) }

#[rustfmt::skip]
#[distributed_lock(key = "doc:<id>", kind = "read", locker = locker)]
async fn read(locker: &Locker, id: u32) -> Result<u64, LockError> { Ok(FencingToken::current().map_or(0, FencingToken::get)) }

#[rustfmt::skip]
#[distributed_lock(key = "doc:<id>", kind = "write", locker = locker)]
async fn write(locker: &Locker, id: u32) -> Result<u64, LockError> { Ok(FencingToken::current().map_or(0, FencingToken::get)) }

#[rustfmt::skip]
#[distributed_lock(key = "exports:<id>", permits = 2, locker = locker)]
async fn export(locker: &Locker, id: u32) -> Result<u64, LockError> { Ok(FencingToken::current().map_or(0, FencingToken::get)) }

// `?` on the lock error itself, and an early `return` of a unit result.
#[rustfmt::skip]
#[distributed_lock(key = "nested:<id>", wait = "0s", locker = locker)]
async fn nested(locker: &Locker, id: u32) -> Result<(), LockError> {
    if id == 0 {
        return Ok(());
    }
    plain(locker, id).await?;
    Ok(())
}

#[tokio::test]
async fn every_form_compiles_without_lints_and_runs_under_its_lock() {
    let locker = Locker::memory();
    let mut payments = Payments {
        locker: locker.clone(),
        calls: 0,
    };
    let order = Order {
        id: 42,
        region: "eu",
    };
    assert_eq!(payments.pay(&order).await.unwrap(), "eu");
    assert_eq!(payments.mutate(1).await.unwrap(), 2);
    assert_eq!(payments.transfer(1, 2, 3u8).await.unwrap(), 6);
    assert_eq!(payments.count(1).await.unwrap(), 1);
    assert!(matches!(
        payments.count(1).await,
        Err(AppError::Declined(2))
    ));
    assert_eq!(payments.echo("ann").await.unwrap(), "ann");
    assert_eq!(payments.parse("7").await.unwrap(), 7);
    assert!(matches!(
        payments.parse("x").await,
        Err(AppError::Declined(0))
    ));
    assert_eq!(label(&locker, 5).await.unwrap(), "5");

    // Each call ran under its lock, so it saw a token; tokens rise per key.
    assert!(plain(&locker, 1).await.unwrap() > 0);
    assert!(fair(&locker, 1).await.unwrap() > 0);
    let reader = read(&locker, 1).await.unwrap();
    assert!(reader > 0);
    assert!(write(&locker, 1).await.unwrap() > reader);
    assert!(export(&locker, 1).await.unwrap() > 0);
    nested(&locker, 0).await.unwrap();
    nested(&locker, 1).await.unwrap();

    // A lock failure goes through `From<LockError>` into the user's error.
    let store = MemoryBackend::new();
    let holder = Locker::builder().backend(store.clone()).unwrap();
    let other = Payments {
        locker: Locker::builder().backend(store).unwrap(),
        calls: 0,
    };
    let held = holder.lock("parse:8").await.unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(30), busy(&other, "8")).await;
    assert!(
        matches!(
            refused,
            Ok(Err(AppError::Lock(LockError::WaitTimeout { .. })))
        ),
        "{refused:?}"
    );
    held.release().await.unwrap();
}

// Tries once: fails at once while another owner holds the key.
#[rustfmt::skip]
#[distributed_lock(key = "parse:<text>", wait = "0s", locker = payments.locker)]
async fn busy(payments: &Payments, text: &str) -> Result<u32, AppError> { Ok(text.len() as u32) }
