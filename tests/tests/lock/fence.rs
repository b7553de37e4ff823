//! Fenced writes: Redis scripts and the PostgreSQL and MySQL pattern,
//! against real servers.

use lock_core::fence::RedisFence;
use lock_core::fence::mysql::MySqlFence;
use lock_core::fence::postgres::PgFence;
use lock_core::{FencingToken, LockError};
use lock_testkit::{MysqlServer, PostgresServer, RedisServer};
use redis::AsyncCommands;

fn t(n: u64) -> FencingToken {
    FencingToken::new(n)
}

fn assert_stale<T: std::fmt::Debug>(result: Result<T, LockError>, token: u64, newest: u64) {
    match result {
        Err(LockError::StaleToken {
            token: t,
            newest: n,
            resource,
        }) => {
            assert_eq!((t.get(), n.get()), (token, newest));
            assert!(!resource.is_empty());
        }
        other => panic!("expected StaleToken, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_fenced_writes_reject_older_tokens() {
    let server = RedisServer::start();
    let mut conn = server.connection().await;
    let fence = RedisFence::new(conn.clone());

    fence.set("balance:7", 100, t(10)).await.unwrap();
    fence.set("balance:7", 110, t(10)).await.unwrap(); // equal tokens pass
    fence.set("balance:7", 120, t(12)).await.unwrap();
    assert_stale(fence.set("balance:7", 1, t(11)).await, 11, 12);
    let value: i64 = conn.get("balance:7").await.unwrap();
    assert_eq!(value, 120, "a stale write changed the data");
    assert_eq!(fence.newest("balance:7").await.unwrap(), Some(t(12)));

    fence
        .hset("account:7", &[("owner", "ada"), ("state", "open")], t(5))
        .await
        .unwrap();
    assert_stale(
        fence.hset("account:7", &[("state", "closed")], t(4)).await,
        4,
        5,
    );
    let state: String = conn.hget("account:7", "state").await.unwrap();
    assert_eq!(state, "open");

    let reply = fence
        .run("log:7", t(3), redis::cmd("RPUSH").arg("log:7").arg("a"))
        .await
        .unwrap();
    assert_eq!(reply, redis::Value::Int(1));
    assert_stale(
        fence
            .run("log:7", t(2), redis::cmd("RPUSH").arg("log:7").arg("b"))
            .await,
        2,
        3,
    );

    // The record expires with data that expires, and goes with delete.
    fence
        .run(
            "session:1",
            t(1),
            redis::cmd("SET")
                .arg("session:1")
                .arg("x")
                .arg("PX")
                .arg(60_000),
        )
        .await
        .unwrap();
    let record_ttl: i64 = redis::cmd("PTTL")
        .arg("{session:1}:fence")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(record_ttl > 0 && record_ttl <= 60_000, "{record_ttl}");
    fence.delete("balance:7").await.unwrap();
    let left: Vec<String> = conn.keys("*balance:7*").await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_fence_records_share_their_key_slot() {
    let cluster = RedisServer::options().cluster().start();
    let mut conn = cluster.connection().await;
    for key in ["balance:7", "{account:7}:balance", "a b*c?", "x\r\ny"] {
        let record = lock_core::fence::record_key(key).unwrap();
        let mut slots = Vec::new();
        for name in [key, record.as_str()] {
            let slot: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(name)
                .query_async(&mut conn)
                .await
                .unwrap();
            slots.push(slot);
        }
        assert_eq!(slots[0], slots[1], "{key:?} and {record:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_fenced_updates_reject_older_tokens() {
    let pg = PostgresServer::start();
    let db = pg.client().await;
    db.batch_execute(
        "CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL);
         ALTER TABLE accounts ADD COLUMN fence_token BIGINT NOT NULL DEFAULT 0;
         INSERT INTO accounts (id, balance) VALUES (7, 100);",
    )
    .await
    .unwrap();
    let accounts = PgFence::new("accounts", "id", "fence_token").unwrap();
    assert_eq!(
        accounts
            .update(&db, t(20), &7_i64, "balance = balance + $1", &[&50_i64])
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        accounts
            .update(&db, t(20), &7_i64, "balance = balance + $1", &[&1_i64])
            .await
            .unwrap(),
        1
    );
    assert_stale(
        accounts
            .update(&db, t(19), &7_i64, "balance = $1", &[&0_i64])
            .await,
        19,
        20,
    );
    assert_eq!(balance(&db).await, 151, "a stale write changed the row");
    // No such row is not a stale token.
    assert_eq!(
        accounts
            .update(&db, t(30), &8_i64, "balance = $1", &[&0_i64])
            .await
            .unwrap(),
        0
    );
    // Inside a transaction too (GenericClient).
    let mut db = db;
    let tx = db.transaction().await.unwrap();
    accounts
        .update(&tx, t(21), &7_i64, "balance = $1", &[&5_i64])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(balance(&db).await, 5);
}

/// The same fenced updates through sqlx (feature `sqlx`), on a pooled
/// connection and inside a transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_fenced_updates_through_sqlx_reject_older_tokens() {
    let pg = PostgresServer::start();
    let db = pg.client().await;
    db.batch_execute(
        "CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL);
         ALTER TABLE accounts ADD COLUMN fence_token BIGINT NOT NULL DEFAULT 0;
         INSERT INTO accounts (id, balance) VALUES (7, 100);",
    )
    .await
    .unwrap();
    let pool = sqlx::PgPool::connect(&pg.postgres_url()).await.unwrap();
    let mut connection = pool.acquire().await.unwrap();
    let accounts = PgFence::new("accounts", "id", "fence_token").unwrap();
    let set = "balance = balance + $1";
    let updated = accounts.update_sqlx(&mut connection, t(20), 7_i64, set, |q| q.bind(50_i64));
    assert_eq!(updated.await.unwrap(), 1);
    let updated = accounts.update_sqlx(&mut connection, t(20), 7_i64, set, |q| q.bind(1_i64));
    assert_eq!(updated.await.unwrap(), 1, "an equal token passes");
    assert_stale(
        accounts
            .update_sqlx(&mut connection, t(19), 7_i64, "balance = $1", |q| {
                q.bind(0_i64)
            })
            .await,
        19,
        20,
    );
    assert_eq!(balance(&db).await, 151, "a stale write changed the row");
    let missing = accounts.update_sqlx(&mut connection, t(30), 8_i64, "balance = $1", |q| {
        q.bind(0_i64)
    });
    assert_eq!(
        missing.await.unwrap(),
        0,
        "no such row is not a stale token"
    );
    let mut transaction = pool.begin().await.unwrap();
    let inside = accounts.update_sqlx(&mut transaction, t(21), 7_i64, "balance = $1", |q| {
        q.bind(5_i64)
    });
    inside.await.unwrap();
    transaction.commit().await.unwrap();
    assert_eq!(balance(&db).await, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_fenced_updates_reject_older_tokens() {
    let server = MysqlServer::start();
    let pool = sqlx::MySqlPool::connect(&server.mysql_url()).await.unwrap();
    sqlx::query("CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, fence_token BIGINT NOT NULL DEFAULT 0)")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO accounts (id, balance) VALUES (7, 100)")
        .execute(&pool)
        .await
        .unwrap();
    let balance = || async {
        let (balance,): (i64,) = sqlx::query_as("SELECT balance FROM accounts WHERE id = 7")
            .fetch_one(&pool)
            .await
            .unwrap();
        balance
    };
    let mut connection = pool.acquire().await.unwrap();
    let accounts = MySqlFence::new("accounts", "id", "fence_token").unwrap();
    let set = "balance = balance + ?";
    let updated = accounts.update(&mut connection, t(20), 7_i64, set, |q| q.bind(50_i64));
    assert_eq!(updated.await.unwrap(), 1);
    // The same values again: one row matched, though none changed.
    let same = accounts.update(&mut connection, t(20), 7_i64, "balance = ?", |q| {
        q.bind(150_i64)
    });
    assert_eq!(same.await.unwrap(), 1, "an equal token passes");
    assert_stale(
        accounts
            .update(&mut connection, t(19), 7_i64, "balance = ?", |q| {
                q.bind(0_i64)
            })
            .await,
        19,
        20,
    );
    assert_eq!(balance().await, 150, "a stale write changed the row");
    let missing = accounts.update(&mut connection, t(30), 8_i64, "balance = ?", |q| {
        q.bind(0_i64)
    });
    assert_eq!(
        missing.await.unwrap(),
        0,
        "no such row is not a stale token"
    );
    let mut transaction = pool.begin().await.unwrap();
    let inside = accounts.update(&mut transaction, t(21), 7_i64, "balance = ?", |q| {
        q.bind(5_i64)
    });
    inside.await.unwrap();
    transaction.commit().await.unwrap();
    assert_eq!(balance().await, 5);
}

async fn balance(db: &tokio_postgres::Client) -> i64 {
    let row = db
        .query_one("SELECT balance FROM accounts WHERE id = 7", &[])
        .await
        .unwrap();
    row.get::<_, i64>(0)
}
