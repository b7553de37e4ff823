//! The process-global Locker of `#[distributed_lock]` (own test binary:
//! installing is once per process).

use lock_core::{LockError, Locker, distributed_lock};
use lock_testkit::RedisServer;

#[distributed_lock(key = "global:<id>")]
async fn uses_the_installed_locker(id: u32) -> Result<u64, LockError> {
    Ok(lock_core::FencingToken::current().unwrap().get())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_once_then_use() {
    match uses_the_installed_locker(1).await {
        Err(err @ LockError::NotInstalled { .. }) => {
            let message = err.to_string();
            assert!(message.contains("lock_core::install"), "{message}");
            assert!(message.contains("`global:1`"), "{message}");
        }
        other => panic!("expected NotInstalled, got {other:?}"),
    }
    let server = RedisServer::start();
    lock_core::install(Locker::redis(&server.url()).await.unwrap()).unwrap();
    assert!(uses_the_installed_locker(1).await.unwrap() > 0);
    let again = lock_core::install(Locker::memory()).unwrap_err();
    assert!(again.to_string().contains("already installed"), "{again}");
}
