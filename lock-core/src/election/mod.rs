//! Leader election: [`Election`], a campaign for a key's plain lock that
//! publishes a value with its lease, and [`Leadership`], the lease it wins.
//!
//! An election on `key` is the plain lock on `key`: `lockctl inspect key`
//! shows the leader, and [`Locker::lock`] on the same key competes with the
//! candidates. The published value rides in the owner value
//! (`owner.rs`), so it lives and ends with the leadership on every store.

mod leader;
mod observe;
mod run;

pub use self::leader::Leader;
pub use self::observe::LeaderChanges;

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::error::LockError;
use crate::guard::LockGuard;
use crate::lease::Lease;
use crate::locker::Locker;
use crate::options::LockOptions;
use crate::owner::{self, MAX_VALUE_LEN};
use crate::scope::Scoped;
use crate::token::FencingToken;

/// How long a campaign waits when no wait is set: in effect, until it
/// leads (or is dropped).
const UNTIL_ELECTED: Duration = Duration::from_secs(60 * 60 * 24 * 365 * 30);

/// A campaign for the leadership of a key, made by [`Locker::election`];
/// `.await` it for a [`Leadership`], or hand it a body with
/// [`run_as_leader`](Self::run_as_leader).
///
/// ```
/// use lock_core::{LockError, Locker};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// let locker = Locker::memory();
/// let leadership = locker
///     .election("outbox-relay")
///     .value("10.0.0.7:8080") // read by anyone with `leader`
///     .ttl(Duration::from_secs(10))
///     .await?; // campaigns until it leads
/// let leader = locker.leader("outbox-relay").await?.expect("someone leads");
/// assert_eq!(leader.value.as_deref(), Some("10.0.0.7:8080"));
/// assert_eq!(leader.token, leadership.token());
/// leadership.resign().await // the next candidate leads at once
/// # }
/// ```
#[must_use = "an Election does nothing until awaited"]
#[derive(Debug, Clone)]
pub struct Election {
    locker: Locker,
    key: String,
    options: LockOptions,
    value: Option<String>,
}

impl Election {
    /// Publishes `value` with the leadership (at most [`MAX_VALUE_LEN`]
    /// bytes; a longer one is [`LockError::InvalidConfig`] when the
    /// campaign starts): [`Locker::leader`] and [`Locker::observe`] read
    /// it. For example the leader's address.
    pub fn value(mut self, value: impl Into<String>) -> Self {
        self.value = Some(value.into());
        self
    }

    /// The leadership's lease length, renewed every ttl/3 while it leads
    /// (the Locker's default ttl otherwise). A leader that dies is
    /// replaced within about this time.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.options.ttl = Some(ttl);
        self
    }

    /// How long to campaign before [`LockError::WaitTimeout`]; by
    /// default, until it leads. Zero tries once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.options.wait = Some(wait);
        self
    }

    /// Campaigns until it leads or its wait runs out; then tells the
    /// key's observers.
    async fn campaign(&self) -> Result<Leadership, LockError> {
        let mut request = self.locker.lock(&self.key).options(LockOptions {
            wait: Some(self.options.wait.unwrap_or(UNTIL_ELECTED)),
            ..self.options
        });
        if let Some(value) = &self.value {
            if value.len() > MAX_VALUE_LEN {
                let why = format!(
                    "is {} bytes for the election on `{}`; at most {MAX_VALUE_LEN} are published",
                    value.len(),
                    LockError::shown(&self.key)
                );
                return Err(LockError::invalid_config("value", why));
            }
            request = request.publish(owner::published(value));
        }
        let guard = request.await?;
        guard.lease.announce().await;
        Ok(Leadership {
            guard: Some(guard),
            value: self.value.clone().map(Arc::from),
        })
    }
}

impl IntoFuture for Election {
    type Output = Result<Leadership, LockError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.campaign().await })
    }
}

/// The leadership of a key: a lease with the usual watchdog, its fencing
/// token and a loss signal, and the value it published. Dropping it
/// resigns in the background.
///
/// Pass [`token`](Self::token) to every write the leader makes: a leader
/// that paused past its lease is then refused by the store it writes to,
/// even if it has not yet heard that it lost ([`lost`](Self::lost)).
#[must_use = "dropping a Leadership resigns at once"]
pub struct Leadership {
    /// `None` once resigned.
    guard: Option<LockGuard>,
    value: Option<Arc<str>>,
}

impl Leadership {
    fn guard(&self) -> &LockGuard {
        self.guard.as_ref().expect("held until resigned or dropped")
    }

    /// The election's key.
    pub fn key(&self) -> &str {
        self.guard().key()
    }

    /// The fencing token of this term: higher than every earlier leader's.
    pub fn token(&self) -> FencingToken {
        self.guard().token()
    }

    /// The value published with the leadership.
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// Whether it still leads: not lost, not resigned, within the local
    /// deadline of its lease.
    pub fn is_held(&self) -> bool {
        self.guard().is_held()
    }

    /// Resolves with [`LockError::Lost`] when the leadership is lost (see
    /// [`LockGuard::lost`]); never if it is resigned.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = LockError> + Send + 'static {
        self.guard().lost()
    }

    /// A cloneable view of the lease (key, token, state, loss signal).
    pub fn lease(&self) -> Lease {
        self.guard().lease()
    }

    /// Runs `body` as the holder of the election's lock: inside it,
    /// [`FencingToken::current`] is this term's token.
    pub fn scope<F: Future>(&self, body: F) -> Scoped<F> {
        self.guard().scope(body)
    }

    /// Gives the leadership up at once: a waiting candidate leads within a
    /// round trip, and observers hear of it. [`LockError::Lost`] if it had
    /// been lost already.
    ///
    /// # Cancel safety
    /// If dropped before it completes, the resignation goes on in the
    /// background.
    pub async fn resign(mut self) -> Result<(), LockError> {
        let guard = self.guard.take().expect("held until resigned or dropped");
        resign(guard).await
    }
}

/// Releases `guard`, then tells the key's observers.
async fn resign(guard: LockGuard) -> Result<(), LockError> {
    let lease = Arc::clone(&guard.lease);
    let released = guard.release().await;
    lease.announce().await;
    released
}

impl Drop for Leadership {
    fn drop(&mut self) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        // Without a runtime the guard's own drop gives the lease back.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = resign(guard).await;
            });
        }
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Leadership");
        if let Some(guard) = &self.guard {
            out.field("key", &guard.key())
                .field("token", &guard.token());
        }
        out.field("value", &self.value).finish()
    }
}

/// Elections.
impl Locker {
    /// A campaign for the leadership of `key`: set `.value`, `.ttl`,
    /// `.wait` and await it, or run a body while leading with
    /// [`Election::run_as_leader`]. The key is the election's plain lock.
    pub fn election(&self, key: impl AsRef<str>) -> Election {
        Election {
            locker: self.clone(),
            key: key.as_ref().to_owned(),
            options: LockOptions::default(),
            value: None,
        }
    }
}
