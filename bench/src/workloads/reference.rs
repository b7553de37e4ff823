//! The reference: one `SET` and one `EVALSHA` of a lock-sized script, back
//! to back on one multiplexed connection (the connection type both
//! subjects use). A lock and a release are two such round trips, so this
//! is the "pair limit" for one task.

use tokio::time::Instant;

use crate::stats::{Percentiles, Row};

/// Pairs per measurement: about a tenth of a second on loopback.
const PAIRS: usize = 1000;

/// Measures the pair limit once.
pub async fn pair_limit(client: &redis::Client) -> Row {
    let script = redis::Script::new(
        "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0",
    );
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let (mut set, mut eval) = (Vec::with_capacity(PAIRS), Vec::with_capacity(PAIRS));
    let started = Instant::now();
    for i in 0..PAIRS {
        let t0 = Instant::now();
        let _: () = redis::cmd("SET")
            .arg("ref:set")
            .arg(i)
            .query_async(&mut conn)
            .await
            .expect("SET");
        let t1 = Instant::now();
        let _: i64 = script
            .key(format!("ref:{}", i % 64))
            .arg("owner")
            .arg(1)
            .invoke_async(&mut conn)
            .await
            .expect("EVALSHA");
        eval.push(t1.elapsed());
        set.push(t1 - t0);
    }
    let mut pairs: Vec<_> = set.iter().zip(&eval).map(|(s, e)| *s + *e).collect();
    Row {
        ops_per_sec: PAIRS as f64 / started.elapsed().as_secs_f64(),
        acquisitions: PAIRS as u64,
        acquire: Percentiles::of(&mut pairs),
        release: Some(Percentiles::of(&mut set)),
        ..Row::new("reference", "SET + EVALSHA pair")
    }
}
