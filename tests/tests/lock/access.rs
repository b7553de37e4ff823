//! The least a Redis ACL user needs to run every kind of lock: the rule the
//! store guide gives operators (docs/stores.md), checked against a real server.

use std::time::Duration;

use lock_core::fence::RedisFence;
use lock_core::{LockError, Locker};
use lock_testkit::{ClusterSet, RedisServer, release_channel};

/// The store guide's rule for the user of a Locker in namespace `lock`, after
/// `on >password`.
const RULE: &[&str] = &[
    "resetkeys",
    "resetchannels",
    "~lock:*",
    "&lock:*",
    "-@all",
    "+evalsha",
    "+script|load",
    "+subscribe",
    "+unsubscribe",
    // Called by the scripts.
    "+get",
    "+mget",
    "+set",
    "+del",
    "+append",
    "+pexpire",
    "+pttl",
    "+time",
    "+publish",
    "+hget",
    "+hset",
    "+hdel",
    "+hgetall",
    "+hlen",
];

/// What the store guide adds to [`RULE`] on a Redis Cluster (and `+wait`, for
/// `replicas(..)`).
const CLUSTER_RULE: &[&str] = &[
    "+spublish",
    "+ssubscribe",
    "+sunsubscribe",
    "+cluster|slots",
    "+wait",
];

/// A server with the user `locks` under [`RULE`] and `extra`, and its URL
/// as that user.
fn server_with_rule(extra: &[&str]) -> (RedisServer, String) {
    let mut user = vec!["--user", "locks", "on", ">pw"];
    user.extend_from_slice(RULE);
    user.extend_from_slice(extra);
    let server = RedisServer::options().args(user).start();
    let url = format!("redis://locks:pw@127.0.0.1:{}", server.port());
    (server, url)
}

/// `a` takes `kind` and holds it `for_` (renewing), while `b` waits for
/// it; `a` releases and `b` gets it, woken by the release.
async fn handed_over(
    a: &Locker,
    b: &Locker,
    kind: fn(&Locker) -> lock_core::LockRequest,
    for_: Duration,
) {
    let first = kind(a).await.unwrap();
    let second = tokio::spawn({
        let request = kind(b).wait(Duration::from_secs(10));
        async move { request.await }
    });
    tokio::time::sleep(for_).await;
    assert!(first.is_held(), "renewals were refused");
    first.release().await.unwrap();
    second.await.unwrap().unwrap().release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_lock_runs_as_a_least_privilege_acl_user() {
    let (_server, url) = server_with_rule(&[]);
    let ttl = Duration::from_millis(600);
    let a = Locker::builder()
        .ttl(ttl)
        .redis(&url)
        .await
        .expect("connect as the ACL user");
    let b = Locker::builder().ttl(ttl).redis(&url).await.unwrap();

    // Plain, with a waiter woken by the release (pub/sub) and renewals.
    handed_over(&a, &b, |l| l.lock("order:1"), ttl).await;

    // Every other kind, each also waited for once.
    let kinds: [fn(&Locker) -> lock_core::LockRequest; 5] = [
        |l| l.fair_lock("doc:1"),
        |l| l.write_lock("doc:2"),
        |l| l.read_lock("doc:2"),
        |l| l.semaphore("pool:1", 1),
        |l| l.striped("stock:1", 1),
    ];
    for kind in kinds {
        handed_over(&a, &b, kind, ttl / 2).await;
    }
    let both = a.lock_all(["acct:1", "acct:2"]).await.unwrap();
    both.release().await.unwrap();

    // A hostile key stays inside `lock:*`.
    let odd = a.lock("x} *:{../other\r\n").await.unwrap();
    odd.release().await.unwrap();
}

/// A grant missing for a command the scripts call (here `+publish`, which
/// a release with a waiter needs) is told as `PermissionDenied` naming
/// the lock, not as an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_missing_inside_a_script_is_permission_denied() {
    let mut user = vec!["--user", "locks", "on", ">pw"];
    user.extend(RULE.iter().filter(|grant| **grant != "+publish"));
    let server = RedisServer::options().args(user).start();
    let url = format!("redis://locks:pw@127.0.0.1:{}", server.port());
    let holder = Locker::redis(&url).await.unwrap();
    let other = Locker::redis(&url).await.unwrap();
    let held = holder.lock("order:1").await.unwrap();
    // Found held: the release must now tell a waiter.
    assert!(other.try_lock("order:1").await.unwrap().is_none());
    let err = held.release().await.unwrap_err();
    assert!(
        matches!(&err, LockError::PermissionDenied { key, .. } if key == "order:1"),
        "{err:?}"
    );
}

/// Every kind of lock as an ACL user on a Redis Cluster, with the
/// store guide's rule plus [`CLUSTER_RULE`] set on every node: waiters woken
/// through shard channels (and unsubscribed after), replica confirmation
/// through `WAIT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_lock_runs_as_a_least_privilege_acl_user_on_a_cluster() {
    let cluster = ClusterSet::start();
    for node in cluster.nodes() {
        let mut conn = node.connection().await;
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(&["locks", "on", ">pw"][..])
            .arg(RULE)
            .arg(CLUSTER_RULE)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let url = cluster.url().replace("://", "://locks:pw@");
    let ttl = Duration::from_millis(600);
    let a = Locker::builder()
        .ttl(ttl)
        .redis(&url)
        .await
        .expect("connect as the ACL user");
    let b = Locker::builder().ttl(ttl).redis(&url).await.unwrap();
    let kinds: [fn(&Locker) -> lock_core::LockRequest; 4] = [
        |l| l.lock("order:1"),
        |l| l.fair_lock("doc:1"),
        |l| l.write_lock("doc:2"),
        |l| l.semaphore("pool:1", 1),
    ];
    for kind in kinds {
        handed_over(&a, &b, kind, ttl).await;
    }
    // The waiter's shard subscription went with it (SUNSUBSCRIBE allowed).
    let keys = a.stored_keys("order:1").unwrap();
    let master = cluster.master_of(keys.lease()).await;
    crate::cluster::shard_subscribers_reach(master, &release_channel(&keys), 0).await;
    let lease = a.stored_keys("order:2").unwrap().lease().to_owned();
    cluster.replica_of(&lease).await;
    let confirmed = Locker::builder()
        .replicas(1, Duration::from_secs(2))
        .redis(&url)
        .await
        .unwrap();
    let guard = confirmed.lock("order:2").await.unwrap();
    guard.release().await.unwrap();
}

/// Fenced writes run on the data connection as the same user, once the
/// data's keys and their token records are added to the rule; the fence
/// still rejects a stale token there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_run_as_the_user_with_the_data_keys_added() {
    let (_server, url) = server_with_rule(&["~account:*", "~{account:*"]);
    let locker = Locker::redis(&url).await.unwrap();
    let data = redis::Client::open(url.as_str()).unwrap();
    let fence = RedisFence::new(data.get_connection_manager().await.unwrap());
    let first = locker.lock("account:7").await.unwrap();
    let stale = first.token();
    fence.set("account:7:balance", "120", stale).await.unwrap();
    first.release().await.unwrap();
    let second = locker.lock("account:7").await.unwrap();
    fence
        .set("account:7:balance", "80", second.token())
        .await
        .unwrap();
    let err = fence
        .set("account:7:balance", "999", stale)
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::StaleToken { .. }), "{err}");
    // Keys outside the rule stay out of reach, fenced or not.
    let err = fence
        .set("orders:1", "x", second.token())
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::PermissionDenied { .. }), "{err}");
    second.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rule_keeps_the_user_out_of_other_keys() {
    let (_server, url) = server_with_rule(&[]);
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let outside: redis::RedisResult<Option<String>> = redis::cmd("GET")
        .arg("orders:1")
        .query_async(&mut conn)
        .await;
    assert!(outside.is_err(), "read a key outside lock:*");
    // A Locker in another namespace is refused at connect, naming it.
    let err = Locker::builder()
        .namespace("app")
        .redis(&url)
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::PermissionDenied { .. }), "{err}");
}

/// `rediss://` is TLS for real: the server's certificate must chain to the
/// roots given (or the system's), and the lock then works over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_checks_the_server_certificate() {
    let server = RedisServer::options().tls().start();
    // An authority the client does not know: a refusal of its own, not
    // an outage.
    let untrusted = Locker::builder().redis(&server.tls_url()).await;
    let err = untrusted.expect_err("a certificate of an unknown authority was accepted");
    assert!(matches!(err, LockError::TlsRejected { .. }), "{err}");
    let trusted = Locker::builder()
        .tls_root_certificates(server.ca_certificate())
        .redis(&server.tls_url())
        .await
        .expect("connect over TLS");
    trusted
        .lock("secure")
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}
