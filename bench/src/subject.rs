//! What is measured: lock-core (on Redis or in memory) or the peer, rslock,
//! behind one lock/release interface.

use std::time::Duration;

use lock_core::{LockGuard, Locker};
use rslock::LockManager;

/// Lease length for every subject: long enough never to expire in a run.
pub const TTL: Duration = Duration::from_secs(10);

/// One lock implementation under test.
#[derive(Clone)]
pub enum Subject {
    /// lock-core; the label says which backend.
    Core { locker: Locker, label: &'static str },
    /// rslock 0.10 with one Redis instance and its default retry settings
    /// (3 tries, 0-200 ms random delay, looped by `acquire_no_guard`).
    Rslock(LockManager),
}

/// A held lock of any subject.
pub enum Held {
    Core(LockGuard),
    Rslock(LockManager, rslock::Lock),
}

/// lock-core's settings for every run: `TTL`, and a wait no run reaches.
fn builder() -> lock_core::LockerBuilder {
    Locker::builder().ttl(TTL).wait(Duration::from_secs(120))
}

impl Subject {
    /// lock-core on Redis at `url`.
    pub async fn core_redis(url: &str) -> Subject {
        let locker = builder()
            .redis(url)
            .await
            .expect("lock-core connects to the bench server");
        Subject::Core {
            locker,
            label: "lock-core redis",
        }
    }

    /// lock-core on the in-process memory backend.
    pub fn core_memory() -> Subject {
        let locker = builder().memory().expect("memory backend");
        Subject::Core {
            locker,
            label: "lock-core memory",
        }
    }

    /// rslock on the single instance at `url`.
    pub fn rslock(url: &str) -> Subject {
        Subject::Rslock(LockManager::new(vec![url.to_owned()]))
    }

    /// Rebuilds a subject by label in a child process.
    pub async fn by_label(label: &str, url: &str) -> Subject {
        match label {
            "lock-core redis" => Subject::core_redis(url).await,
            "lock-core memory" => Subject::core_memory(),
            "rslock" => Subject::rslock(url),
            other => panic!("unknown subject {other:?}"),
        }
    }

    pub fn label(&self) -> &'static str {
        match self {
            Subject::Core { label, .. } => label,
            Subject::Rslock(_) => "rslock",
        }
    }

    /// Whether the subject talks to Redis (commands are counted then).
    pub fn on_redis(&self) -> bool {
        self.label() != "lock-core memory"
    }

    /// Waits until the lock on `key` is held.
    pub async fn lock(&self, key: &str) -> Held {
        match self {
            Subject::Core { locker, .. } => {
                Held::Core(locker.lock(key).await.expect("lock-core lock"))
            }
            Subject::Rslock(manager) => {
                let lock = manager
                    .acquire_no_guard(key.as_bytes(), TTL)
                    .await
                    .expect("rslock acquire");
                Held::Rslock(manager.clone(), lock)
            }
        }
    }

    /// The lock-core Locker, if this is lock-core.
    pub fn locker(&self) -> Option<&Locker> {
        match self {
            Subject::Core { locker, .. } => Some(locker),
            Subject::Rslock(_) => None,
        }
    }
}

impl Held {
    /// Releases and waits for the store's answer.
    pub async fn release(self) {
        match self {
            Held::Core(guard) => guard.release().await.expect("lock-core release"),
            Held::Rslock(manager, lock) => manager.unlock(&lock).await,
        }
    }
}
