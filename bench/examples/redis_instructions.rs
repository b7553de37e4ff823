//! What one lock + release costs the Redis server, counted in instructions
//! by callgrind: unlike seconds on a shared machine, the count repeats
//! run after run. One task locks and releases distinct keys, so every
//! command arrives alone (no pipelining evens anything out); the reference
//! pair (one `SET`, one `EVALSHA` of a one-call script) and rslock run on
//! the same server. A last row has 16 tasks share one Locker, so that its
//! acquires and releases share script calls (how many per call varies from
//! run to run, and the count with it).
//!
//! A row has the reference's script as a Redis function (`FCALL`), and two
//! last rows count a Locker's acquires alone (`acquire.lua`, keys held) and
//! then its releases alone (`release.lua`); the commands of one pair, with
//! the calls its scripts make, follow from `INFO commandstats`.
//!
//! Two rows are floors, not locks: a batch script that does for each
//! operation only the calls lock-core's batch script makes on its common
//! path (`MGET` + `SET` to acquire, `GET` + `DEL` to release) and nothing
//! else, and one that makes a single call per operation (`SET NX PX`,
//! `DEL`). Both carry, per call, four releases of the previous call's keys
//! and four acquires, with lock-core's keys and arguments. The first says
//! what lock-core's own Lua logic adds; the second what any lock scripted in
//! Lua batches costs the server before it checks an owner or mints a token.
//!
//! Four rows weigh issue 47's levers before they are built, each on
//! lock-core's own `acquire.lua` and `release.lua` sent straight to the
//! server (no Locker: the scripts' cost alone): as they are, by `EVALSHA`
//! and as Redis functions (`FCALL`); and as a sketch of the released lease
//! as the token record (no record written by an acquire whose lease outlives
//! the record's 10 s; a release that leaves the lease as a 20 s tombstone
//! `2|<token>` in place of `DEL`), by `EVALSHA` and by `FCALL`. The sketch
//! only costs the common path: it does not read tombstones back.
//!
//! `cargo run --release -p lock-bench --example redis_instructions`
//!
//! Needs valgrind (`apt-get install -y valgrind`). Only the server runs
//! under valgrind; its count covers reading, parsing, running and replying,
//! not the kernel's share of the socket calls.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use lock_core::Locker;
use lock_testkit::{RedisServer, release_channel, token_record};

/// Lock + release cycles counted per subject, after a warm-up.
const CYCLES: usize = 1000;
const WARM_UP: usize = 50;
const TTL: Duration = Duration::from_secs(30);
/// Tasks of the shared-Locker row.
const TASKS: usize = 16;

/// One way to lock and release `CYCLES` distinct keys, one after another.
enum Subject {
    /// A connection and the lock-sized script of the reference pair.
    Reference(redis::aio::MultiplexedConnection, redis::Script),
    /// The same pair with the script as a Redis function (`FCALL`).
    Function(redis::aio::MultiplexedConnection),
    Rslock(rslock::LockManager),
    Core(Locker),
    /// 16 tasks sharing one Locker, each locking its own keys.
    Shared(Locker),
    /// A batch script with no logic (see the module doc), and the keys its
    /// previous call acquired.
    Floor(Floor, redis::aio::MultiplexedConnection, Vec<String>),
    /// lock-core's acquire and release scripts, or a lever's version of
    /// them, sent straight to the server.
    Lever(Lever, redis::aio::MultiplexedConnection),
}

/// lock-core's acquire and release scripts as a lever of issue 47 would
/// change them (see the module doc).
#[derive(Clone, Copy)]
enum Lever {
    /// As they are, by `EVALSHA`.
    Today,
    /// As they are, as Redis functions (`FCALL`).
    Functions,
    /// The released lease as the token record, by `EVALSHA`.
    Tombstone,
    /// The released lease as the token record, as Redis functions.
    TombstoneFunctions,
}

/// The owner value the lever rows send: as long as a Locker's.
const OWNER: &str = "redis_instructions/pid 4242424/00000001";

impl Lever {
    /// The acquire and release scripts' text.
    fn scripts(self) -> (String, String) {
        let acquire = include_str!("../../lock-core/src/backend/redis/scripts/acquire.lua");
        let release = include_str!("../../lock-core/src/backend/redis/scripts/release.lua");
        match self {
            Lever::Today | Lever::Functions => (acquire.to_owned(), release.to_owned()),
            Lever::Tombstone | Lever::TombstoneFunctions => {
                let record = "redis.call('SET', fence, '1|' .. token, 'PX', lead + 10000)\n";
                assert!(acquire.contains(record), "acquire.lua's record write moved");
                let del = "redis.call('DEL', lease)";
                assert!(release.contains(del), "release.lua's DEL moved");
                let tombstone = "redis.call('SET', lease, '2|' .. string.match(holder, '%d+', n + 4), 'PX', 20000)";
                (acquire.replace(record, ""), release.replace(del, tombstone))
            }
        }
    }

    fn functions(self) -> bool {
        matches!(self, Lever::Functions | Lever::TombstoneFunctions)
    }

    /// The library of the scripts as functions `acquire` and `release`.
    fn library(self) -> String {
        let (acquire, release) = self.scripts();
        format!(
            "#!lua name=lever\n\
             redis.register_function('acquire', function(KEYS, ARGV)\n{acquire}\nend)\n\
             redis.register_function('release', function(KEYS, ARGV)\n{release}\nend)\n"
        )
    }

    /// One lock + release of `key` on `conn`.
    async fn cycle(self, conn: &mut redis::aio::MultiplexedConnection, key: &str) {
        let keys = lock_core::backend::StoredKeys::new("lock", key).expect("key");
        let (lease, fence, channel) = (keys.lease(), token_record(&keys), release_channel(&keys));
        if self.functions() {
            let mut acquire = redis::cmd("FCALL");
            acquire.arg("acquire").arg(2).arg(lease).arg(&fence);
            acquire.arg(OWNER).arg(30_000);
            let _: String = acquire.query_async(conn).await.expect("FCALL acquire");
            let mut release = redis::cmd("FCALL");
            release.arg("release").arg(1).arg(lease);
            release.arg(OWNER).arg(&channel).arg("PUBLISH");
            let released: i64 = release.query_async(conn).await.expect("FCALL release");
            assert_eq!(released, 1);
        } else {
            let (acquire, release) = self.scripts();
            let acquire = redis::Script::new(&acquire);
            let mut taken = acquire.prepare_invoke();
            taken.key(lease).key(&fence).arg(OWNER).arg(30_000);
            let _: String = taken.invoke_async(conn).await.expect("acquire");
            let release = redis::Script::new(&release);
            let mut given = release.prepare_invoke();
            given.key(lease).arg(OWNER).arg(&channel).arg("PUBLISH");
            let released: i64 = given.invoke_async(conn).await.expect("release");
            assert_eq!(released, 1);
        }
    }
}

/// The batch-script floors (see the module doc).
#[derive(Clone, Copy)]
enum Floor {
    /// lock-core's common-path calls: `MGET` + `SET`, `GET` + `DEL`.
    CoreCalls,
    /// One call per operation: `SET NX PX`, `DEL`.
    OneCall,
}

/// Acquires (and releases) per call of a floor script.
const FLOOR_BATCH: usize = 4;

impl Floor {
    fn script(self) -> redis::Script {
        let (acquire, release) = match self {
            Floor::CoreCalls => (
                "redis.call('MGET', lease, fence) \
                 out[i] = redis.call('SET', lease, ARGV[3 * i - 1], 'PX', ARGV[3 * i]) and 1 or 0",
                "redis.call('GET', lease) out[i] = redis.call('DEL', lease)",
            ),
            Floor::OneCall => (
                "out[i] = redis.call('SET', lease, ARGV[3 * i - 1], 'NX', 'PX', ARGV[3 * i]) and 1 or 0",
                "out[i] = redis.call('DEL', lease)",
            ),
        };
        redis::Script::new(&format!(
            "local out = {{}} \
             for i = 1, #KEYS / 2 do \
               local lease, fence = KEYS[2 * i - 1], KEYS[2 * i] \
               if ARGV[3 * i - 2] == 'a' then {acquire} else {release} end \
             end \
             return out"
        ))
    }
}

impl Subject {
    fn label(&self) -> &'static str {
        match self {
            Subject::Reference(..) => "reference: SET + EVALSHA pair",
            Subject::Function(_) => "reference with FCALL: SET + FCALL pair",
            Subject::Rslock(_) => "rslock 0.10",
            Subject::Core(_) => "lock-core redis",
            Subject::Shared(_) => "lock-core redis, 16 tasks (shared calls)",
            Subject::Floor(Floor::CoreCalls, ..) => {
                "floor: lock-core's calls without its logic, 4 + 4 per call"
            }
            Subject::Floor(Floor::OneCall, ..) => "floor: one call per operation, 4 + 4 per call",
            Subject::Lever(Lever::Today, _) => "lever control: acquire.lua + release.lua, EVALSHA",
            Subject::Lever(Lever::Functions, _) => "lever 2: the same scripts as functions, FCALL",
            Subject::Lever(Lever::Tombstone, _) => {
                "lever 1 sketch: the released lease as the record, EVALSHA"
            }
            Subject::Lever(Lever::TombstoneFunctions, _) => {
                "levers 1 + 2 sketch: the released lease as the record, FCALL"
            }
        }
    }

    async fn cycle(&mut self, key: &str) {
        match self {
            Subject::Reference(conn, script) => {
                set(conn, key).await;
                let _: i64 = script
                    .key(format!("ref:{key}"))
                    .arg("owner")
                    .arg(30_000)
                    .invoke_async(conn)
                    .await
                    .expect("EVALSHA");
            }
            Subject::Function(conn) => {
                set(conn, key).await;
                let _: i64 = redis::cmd("FCALL")
                    .arg("lock_once")
                    .arg(1)
                    .arg(format!("ref:{key}"))
                    .arg("owner")
                    .arg(30_000)
                    .query_async(conn)
                    .await
                    .expect("FCALL");
            }
            Subject::Rslock(manager) => {
                let lock = manager
                    .acquire_no_guard(key.as_bytes(), TTL)
                    .await
                    .expect("rslock acquire");
                manager.unlock(&lock).await;
            }
            Subject::Core(locker) => {
                let guard = locker.lock(key).ttl(TTL).await.expect("lock-core lock");
                guard.release().await.expect("lock-core release");
            }
            Subject::Shared(locker) => {
                // One cycle here is 16 lock + release pairs, one per task.
                let tasks: Vec<_> = (0..TASKS)
                    .map(|task| {
                        let (locker, key) = (locker.clone(), format!("{key}:{task}"));
                        tokio::spawn(async move {
                            let guard = locker.lock(key).ttl(TTL).await.expect("lock-core lock");
                            guard.release().await.expect("lock-core release");
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.expect("task");
                }
            }
            Subject::Lever(lever, conn) => lever.cycle(conn, key).await,
            Subject::Floor(floor, conn, previous) => {
                // One cycle here is FLOOR_BATCH lock + release pairs.
                let script = floor.script();
                let mut call = script.prepare_invoke();
                let acquired: Vec<String> =
                    (0..FLOOR_BATCH).map(|i| format!("{key}:{i}")).collect();
                for (name, acquire) in previous
                    .iter()
                    .map(|name| (name, false))
                    .chain(acquired.iter().map(|name| (name, true)))
                {
                    let keys = lock_core::backend::StoredKeys::new("lock", name).expect("key");
                    call.key(keys.lease()).key(token_record(&keys));
                    match acquire {
                        true => call.arg("a").arg("owner:1").arg(30_000),
                        false => call.arg("r").arg("owner:1").arg(release_channel(&keys)),
                    };
                }
                let _: Vec<i64> = call.invoke_async(conn).await.expect("floor script");
                *previous = acquired;
            }
        }
    }
}

/// The reference pair's plain `SET` of `key`.
async fn set(conn: &mut redis::aio::MultiplexedConnection, key: &str) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(1)
        .query_async(conn)
        .await
        .expect("SET");
}

/// Runs callgrind_control with `flag` on the server.
fn control(flag: &str, pid: u32) {
    let status = Command::new("callgrind_control")
        .args([flag, &pid.to_string()])
        .output()
        .expect("callgrind_control (part of valgrind)")
        .status;
    assert!(status.success(), "callgrind_control {flag} failed");
}

/// The instruction total of the newest dump in `dir`.
fn newest_total(dir: &Path) -> u64 {
    let newest = std::fs::read_dir(dir)
        .expect("dump dir")
        .filter_map(|entry| entry.ok()?.path().into())
        .filter_map(|path: std::path::PathBuf| {
            let part = path.extension()?.to_str()?.parse::<u32>().ok()?;
            Some((part, path))
        })
        .max()
        .expect("a callgrind dump")
        .1;
    let dump = std::fs::read_to_string(&newest).expect("read dump");
    dump.lines()
        .find_map(|line| line.strip_prefix("summary: "))
        .and_then(|total| total.trim().parse().ok())
        .expect("a summary line")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dumps = tempfile::tempdir().expect("temp dir");
    let out = dumps.path().join("callgrind.out");
    let server = RedisServer::options()
        .launcher([
            "valgrind".to_owned(),
            "--tool=callgrind".to_owned(),
            format!("--callgrind-out-file={}", out.display()),
            format!("--log-file={}", dumps.path().join("valgrind.log").display()),
        ])
        .start();
    let pid = server.pid().expect("server pid");
    let url = server.url();
    let mut subjects = [
        Subject::Reference(
            server.connection().await,
            redis::Script::new(
                "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0",
            ),
        ),
        Subject::Rslock(rslock::LockManager::new(vec![url.clone()])),
        Subject::Function(function_loaded(&server).await),
        Subject::Core(Locker::redis(&url).await.expect("connect")),
        Subject::Shared(Locker::redis(&url).await.expect("connect")),
        Subject::Floor(Floor::CoreCalls, server.connection().await, Vec::new()),
        Subject::Floor(Floor::OneCall, server.connection().await, Vec::new()),
        Subject::Lever(Lever::Today, server.connection().await),
        Subject::Lever(Lever::Functions, loaded(&server, Lever::Functions).await),
        Subject::Lever(Lever::Tombstone, server.connection().await),
        Subject::Lever(
            Lever::TombstoneFunctions,
            loaded(&server, Lever::TombstoneFunctions).await,
        ),
    ];
    let mut stats = server.connection().await;
    let mut batch_sizes = None;
    println!("| subject | Redis instructions per lock + release | × rslock |");
    println!("|---|---|---|");
    let mut counts = Vec::new();
    for (n, subject) in subjects.iter_mut().enumerate() {
        for i in 0..WARM_UP {
            subject.cycle(&format!("warm:{n}:{i}")).await;
        }
        // About the same number of lock + release pairs for every subject.
        let per_cycle = match subject {
            Subject::Shared(_) => TASKS,
            Subject::Floor(..) => FLOOR_BATCH,
            _ => 1,
        };
        let cycles = CYCLES / per_cycle;
        let calls_before = command_calls(&mut stats).await;
        control("-z", pid);
        for i in 0..cycles {
            subject.cycle(&format!("key:{n}:{i}")).await;
        }
        control("-d", pid);
        let pairs = (cycles * per_cycle) as u64;
        if let Subject::Shared(_) = subject {
            // How many operations the shared Locker's script calls carried.
            let calls = command_calls(&mut stats).await;
            let sent = |command: &str| {
                let before = calls_before.get(command).copied().unwrap_or(0);
                calls.get(command).copied().unwrap_or(0) - before
            };
            batch_sizes = Some((sent("evalsha") + sent("eval"), pairs));
        }
        counts.push((subject.label(), newest_total(dumps.path()) / pairs));
    }
    // Per script: a Locker's acquires of distinct keys, held, then their
    // releases, each script alone on the connection.
    let locker = Locker::redis(&url).await.expect("connect");
    let mut conn = server.connection().await;
    for (i, guard) in lock_all(&locker, "warm:split", WARM_UP)
        .await
        .into_iter()
        .enumerate()
    {
        guard
            .release()
            .await
            .unwrap_or_else(|err| panic!("release {i}: {err}"));
    }
    let calls_before = command_calls(&mut conn).await;
    control("-z", pid);
    let guards = lock_all(&locker, "key:split", CYCLES).await;
    control("-d", pid);
    counts.push((
        "lock-core redis: acquire.lua alone",
        newest_total(dumps.path()) / CYCLES as u64,
    ));
    control("-z", pid);
    for guard in guards {
        guard.release().await.expect("lock-core release");
    }
    control("-d", pid);
    counts.push((
        "lock-core redis: release.lua alone",
        newest_total(dumps.path()) / CYCLES as u64,
    ));
    let calls = command_calls(&mut conn).await;
    let rslock = counts[1].1 as f64;
    for (label, count) in counts {
        println!("| {label} | {count} | {:.2} |", count as f64 / rslock);
    }
    if let Some((calls, pairs)) = batch_sizes {
        println!();
        println!(
            "16 tasks sharing a Locker: {calls} script calls for {pairs} lock + release pairs, \
             {:.2} operations per call",
            (2 * pairs) as f64 / calls as f64
        );
    }
    println!();
    println!("Commands per lock + release of one task, with the calls its scripts make:");
    for (command, after) in calls {
        let before = calls_before.get(&command).copied().unwrap_or(0);
        let per_pair = after.saturating_sub(before) as f64 / CYCLES as f64;
        if per_pair >= 0.01 && command != "info" {
            println!("- {command}: {per_pair:.2}");
        }
    }
}

/// A connection to a server with the reference's script loaded as the
/// function `lock_once`.
async fn function_loaded(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    let mut conn = server.connection().await;
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(
            "#!lua name=bench\n\
             redis.register_function('lock_once', function(keys, args) \
               if redis.call('SET', keys[1], args[1], 'NX', 'PX', args[2]) then return 1 end \
               return 0 end)",
        )
        .query_async(&mut conn)
        .await
        .expect("FUNCTION LOAD");
    conn
}

/// A connection to a server with `lever`'s scripts loaded as functions.
async fn loaded(server: &RedisServer, lever: Lever) -> redis::aio::MultiplexedConnection {
    let mut conn = server.connection().await;
    let mut load = redis::cmd("FUNCTION");
    load.arg("LOAD").arg("REPLACE").arg(lever.library());
    let _: String = load.query_async(&mut conn).await.expect("FUNCTION LOAD");
    conn
}

/// Locks `count` distinct keys one after another, keeping the guards.
async fn lock_all(locker: &Locker, prefix: &str, count: usize) -> Vec<lock_core::LockGuard> {
    let mut guards = Vec::with_capacity(count);
    for i in 0..count {
        let lock = locker.lock(format!("{prefix}:{i}")).ttl(TTL);
        guards.push(lock.await.expect("lock-core lock"));
    }
    guards
}

/// Calls per command the server has served (`INFO commandstats`), counting
/// the calls scripts make.
async fn command_calls(
    conn: &mut redis::aio::MultiplexedConnection,
) -> std::collections::BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|line| {
            let (command, rest) = line.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            Some((command.to_owned(), rest.split(',').next()?.parse().ok()?))
        })
        .collect()
}
