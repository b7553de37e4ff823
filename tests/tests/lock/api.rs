//! What docs/api.md promises of the public types, checked by the compiler:
//! the handles, guards, requests and futures users keep across `.await`s
//! and hand to `tokio::spawn` are `Send` (and the shared ones `Sync`), and
//! every public type is `Debug`.

use std::fmt::Debug;
use std::future::{Future, IntoFuture};

use lock_core::{
    Campaign, Election, FencingToken, Inspection, LeaderChanges, Leadership, LockAllFuture,
    LockAllRequest, LockError, LockFuture, LockGuard, LockOptions, LockRequest, Locker, MultiGuard,
    Outcome, StoreError,
};

fn send_sync<T: Send + Sync>() {}
fn send<T: Send>() {}
fn debug<T: Debug>() {}
fn send_future<F: Future + Send>(_: &F) {}

#[test]
fn handles_guards_requests_and_futures_are_send() {
    send_sync::<Locker>();
    send_sync::<LockGuard>();
    send_sync::<MultiGuard>();
    send_sync::<Leadership>();
    send_sync::<LockError>();
    send_sync::<StoreError>();
    send_sync::<Inspection>();
    send::<LockRequest>();
    send::<LockFuture>();
    send::<LockAllRequest>();
    send::<LockAllFuture>();
    send::<Election>();
    send::<Campaign>();
    send::<LeaderChanges>();
    debug::<Locker>();
    debug::<LockGuard>();
    debug::<LockFuture>();
    debug::<Campaign>();
    debug::<LockOptions>();
    debug::<Outcome<FencingToken>>();
}

#[tokio::test]
async fn the_async_calls_return_send_futures() {
    let locker = Locker::memory();
    send_future(&locker.lock("k").into_future());
    send_future(&locker.try_lock("k"));
    send_future(&locker.inspect("k"));
    send_future(&locker.held_keys("*"));
    send_future(&locker.force_release("k"));
    send_future(&locker.leader("k"));
    send_future(&locker.election("k").into_future());
    let guard = locker.lock("k").await.unwrap();
    send_future(&guard.lost());
    send_future(&guard.scope(async {}));
    guard.release().await.unwrap();
}
