//! A lock client of the randomized fault campaign, in its own OS process,
//! printing its history (see `lock_testkit::history`) on stdout.
//!
//! ```text
//! campaign_client <lock-url> <data-url> <id> <seed> <tasks> <keys> <ttl-ms> <kinds>
//! ```
//! - `<lock-url>`: any URL `Locker::connect` takes, or
//!   `redlock:<url>,<url>,...` for RedLock over those Redis servers.
//! - `<kinds>`: `all` (every kind of lock: plain, fair, read, write, a
//!   semaphore of 1, a striped lock of 1, and both keys of a pair at once)
//!   or `plain` (the plain lock and pairs, for a store that keeps no other).
//! - Each of `tasks` tasks locks, at random from `seed` and `id`, one of the
//!   kinds on one of `keys` keys (`k0`, `k1`, ...), waiting at most a ttl.
//!   Holding an exclusive kind, it appends its token to the key's list for
//!   that kind (`{<kind>.<key>}:history`) through a `RedisFence` on the data
//!   server, if it still holds the lease, then releases it. A reader
//!   writes nothing.
//! - Events name the lock as `<kind>.<key>` (a pair's keys as `plain.<key>`,
//!   since a pair is plain locks) and the task as `<id>.t<n>`; `renewed`,
//!   `ready` and `done` name the process (`<id>`) and renewals the key.
//! - A line `settle` on stdin ends the random phase: every task then locks
//!   each key once with the plain lock, waiting up to 4 x ttl (`final_ok`
//!   or `final_failed`), and the client prints `done` and exits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lock_core::fence::RedisFence;
use lock_core::{FencingToken, LockError, LockKind, Locker};
use lock_testkit::history::{RenewalTap, emit};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::AsyncBufReadExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, filter::LevelFilter};

type Fence = RedisFence<redis::aio::MultiplexedConnection>;

/// What one client process shares between its tasks.
struct Client {
    id: String,
    locker: Locker,
    fence: Fence,
    keys: u64,
    ttl: Duration,
    kinds: Vec<Kind>,
    settled: AtomicBool,
}

/// A kind of lock the campaign takes.
#[derive(Clone, Copy)]
enum Kind {
    One(LockKind),
    /// Two keys at once (`lock_all`).
    Pair,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::One(LockKind::Exclusive) | Kind::Pair => "plain",
            Kind::One(LockKind::Fair) => "fair",
            Kind::One(LockKind::Read) => "read",
            Kind::One(LockKind::Write) => "write",
            Kind::One(LockKind::Permit { .. }) => "permit",
            Kind::One(LockKind::Segment { .. }) => "segment",
            Kind::One(_) => "other",
        }
    }

    /// Whether holders of the kind exclude each other (and write).
    fn writes(self) -> bool {
        !matches!(self, Kind::One(LockKind::Read))
    }
}

impl Client {
    /// One random lock, its fenced write and its release.
    async fn operate(&self, who: &str, rng: &mut StdRng) {
        let kind = self.kinds[rng.random_range(0..self.kinds.len())];
        let first = rng.random_range(0..self.keys);
        let keys: Vec<String> = match kind {
            Kind::Pair => vec![format!("k{first}"), format!("k{}", (first + 1) % self.keys)],
            Kind::One(_) => vec![format!("k{first}")],
        };
        let names: Vec<String> = keys
            .iter()
            .map(|k| format!("{}.{k}", kind.name()))
            .collect();
        for name in &names {
            emit(who, "acquire_sent", name, 0);
        }
        let held = match kind {
            Kind::One(kind) => self
                .locker
                .lock_of(&keys[0], kind)
                .wait(self.ttl)
                .await
                .map(|guard| Held::One(Box::new(guard))),
            Kind::Pair => self
                .locker
                .lock_all(&keys)
                .wait(self.ttl)
                .await
                .map(Held::Pair),
        };
        let held = match held {
            Ok(held) => held,
            Err(error) => {
                let kind = match &error {
                    LockError::Unavailable { source, .. } if source.outcome_unknown() => {
                        "acquire_unknown"
                    }
                    _ => "acquire_failed",
                };
                for name in &names {
                    emit(who, kind, name, 0);
                }
                return;
            }
        };
        let tokens: Vec<FencingToken> = keys.iter().map(|key| held.token(key)).collect();
        for (name, token) in names.iter().zip(&tokens) {
            emit(who, "acquire_ok", name, token.get());
        }
        self.watch_loss(who, &held, &names, &tokens);
        // Work for a while: mostly briefly, one time in five up to 1.5 x
        // the lease (the watchdog renews it).
        let ttl = self.ttl.as_millis() as u64;
        let longest = if rng.random_bool(0.2) {
            ttl * 3 / 2
        } else {
            ttl / 10
        };
        let work = rng.random_range(0..longest);
        tokio::time::sleep(Duration::from_millis(work)).await;
        if kind.writes() {
            for (name, token) in names.iter().zip(&tokens) {
                if !held.is_held() {
                    break;
                }
                self.write(who, name, *token).await;
            }
        }
        let result = match held {
            Held::One(guard) => guard.release().await,
            Held::Pair(guard) => guard.release().await,
        };
        let kind = match result {
            Ok(()) => "release_ok",
            // The store said the lease was no longer this holder's.
            Err(LockError::Lost { .. }) => "release_lost",
            Err(_) => "release_err",
        };
        for (name, token) in names.iter().zip(&tokens) {
            emit(who, kind, name, token.get());
        }
    }

    /// Appends `token` to the list of `name` through the fence.
    async fn write(&self, who: &str, name: &str, token: FencingToken) {
        let list = format!("{{{name}}}:history");
        let mut append = redis::cmd("RPUSH");
        append.arg(&list).arg(token.get());
        emit(who, "write_sent", name, token.get());
        let kind = match self.fence.run(&list, token, &append).await {
            Ok(_) => "write_ok",
            Err(LockError::StaleToken { .. }) => "write_rejected",
            Err(_) => "write_failed",
        };
        emit(who, kind, name, token.get());
    }

    /// Prints `lost` for each of `names` when the lease is lost.
    fn watch_loss(&self, who: &str, held: &Held, names: &[String], tokens: &[FencingToken]) {
        let lost = held.lost();
        let id = who.to_owned();
        let told: Vec<(String, u64)> = names
            .iter()
            .cloned()
            .zip(tokens.iter().map(|t| t.get()))
            .collect();
        tokio::spawn(async move {
            let _ = lost.await;
            for (name, token) in told {
                emit(&id, "lost", &name, token);
            }
        });
    }

    /// After the faults: each key once, with time to wait.
    async fn settle(&self, who: &str) {
        for key in 0..self.keys {
            let name = format!("plain.k{key}");
            emit(who, "acquire_sent", &name, 0);
            let outcome = self.locker.lock(format!("k{key}")).wait(self.ttl * 4).await;
            match outcome {
                Ok(guard) => {
                    emit(who, "final_ok", &name, guard.token().get());
                    let _ = guard.release().await;
                }
                Err(error) => {
                    let held = self.locker.inspect(&format!("k{key}")).await;
                    eprintln!("{who}: {name} after the faults: {error}; the store holds {held:?}");
                    emit(who, "final_failed", &name, 0);
                }
            }
        }
    }
}

/// A held lock of either shape.
enum Held {
    One(Box<lock_core::LockGuard>),
    Pair(lock_core::MultiGuard),
}

impl Held {
    fn token(&self, key: &str) -> FencingToken {
        match self {
            Held::One(guard) => guard.token(),
            Held::Pair(guard) => guard.token_of(key).expect("a key of the pair"),
        }
    }

    fn is_held(&self) -> bool {
        match self {
            Held::One(guard) => guard.is_held(),
            Held::Pair(guard) => guard.is_held(),
        }
    }

    fn lost(&self) -> std::pin::Pin<Box<dyn Future<Output = LockError> + Send>> {
        match self {
            Held::One(guard) => Box::pin(guard.lost()),
            Held::Pair(guard) => Box::pin(guard.lost()),
        }
    }
}

/// Connects, retrying while the store is down (a client started in place
/// of a killed one may meet a member that is down too).
async fn connect(url: &str, ttl: Duration) -> Locker {
    let mut tries = 0;
    loop {
        let builder = Locker::builder().ttl(ttl).timeout(ttl / 2);
        let connected = match url.strip_prefix("redlock:") {
            Some(urls) => builder.redlock(&urls.split(',').collect::<Vec<_>>()).await,
            None => builder.connect(url).await,
        };
        match connected {
            Ok(locker) => return locker,
            Err(error) if tries < 100 => {
                tries += 1;
                eprintln!("connect: {error}; trying again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("the store did not answer: {error}"),
        }
    }
}

async fn run(args: &[String]) {
    let [url, data_url, id, seed, tasks, keys, ttl, kinds] = args else {
        panic!("campaign_client <lock-url> <data-url> <id> <seed> <tasks> <keys> <ttl-ms> <kinds>");
    };
    let seed: u64 = seed.parse().expect("seed");
    let ttl = Duration::from_millis(ttl.parse().expect("ttl-ms"));
    let conn = redis::Client::open(data_url.as_str())
        .expect("data url")
        .get_multiplexed_async_connection()
        .await
        .expect("data server");
    let mut all = vec![Kind::One(LockKind::Exclusive), Kind::Pair];
    if kinds == "all" {
        all.extend([
            Kind::One(LockKind::Fair),
            Kind::One(LockKind::Read),
            Kind::One(LockKind::Write),
            Kind::One(LockKind::Permit { of: 1 }),
            Kind::One(LockKind::Segment { of: 1 }),
        ]);
    }
    let client = Arc::new(Client {
        id: id.clone(),
        locker: connect(url, ttl).await,
        fence: RedisFence::new(conn),
        keys: keys.parse().expect("keys"),
        ttl,
        kinds: all,
        settled: AtomicBool::new(false),
    });
    emit(id, "ready", "-", 0);
    let reader = {
        let client = Arc::clone(&client);
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.trim() == "settle" {
                    break;
                }
            }
            client.settled.store(true, Ordering::SeqCst);
        })
    };
    let tasks: Vec<_> = (0..tasks.parse::<u64>().expect("tasks"))
        .map(|task| {
            let client = Arc::clone(&client);
            // Each client and task its own sequence, from the one seed.
            let name_hash = client
                .id
                .bytes()
                .fold(0u64, |h, b| h.wrapping_mul(31) + u64::from(b));
            let mut rng = StdRng::seed_from_u64(seed ^ name_hash.rotate_left(17) ^ task);
            tokio::spawn(async move {
                let who = format!("{}.t{task}", client.id);
                while !client.settled.load(Ordering::SeqCst) {
                    client.operate(&who, &mut rng).await;
                }
                client.settle(&who).await;
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a campaign task panicked");
    }
    reader.abort();
    emit(id, "done", "-", 0);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let id: Arc<str> = Arc::from(args.get(2).map_or("?", String::as_str));
    tracing_subscriber::registry()
        .with(RenewalTap { id }.with_filter(LevelFilter::TRACE))
        .init();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(run(&args));
}
