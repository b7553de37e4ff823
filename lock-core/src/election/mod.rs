//! Leader election: [`Election`], a campaign for a key's plain lock that
//! publishes a value with its lease, and [`Leadership`], the lease it wins.
//!
//! An election on `key` is the plain lock on `key`: `lockctl leader key`
//! shows the leader, and [`Locker::lock`] on the same key competes with the
//! candidates. The published value rides in the owner value
//! (`owner.rs`), so it lives and ends with the leadership on every store.

mod leader;
mod leadership;
mod observe;
mod run;

pub use self::leader::Leader;
pub use self::leadership::Leadership;
pub use self::observe::LeaderChanges;

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::error::LockError;
use crate::locker::Locker;
use crate::options::LockOptions;
use crate::owner::{self, MAX_VALUE_LEN};

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
                    "is {} bytes for the election on `{}`; at most {MAX_VALUE_LEN} are published: \
                     publish an id or an address, and keep the rest where it points",
                    value.len(),
                    LockError::shown(&self.key)
                );
                return Err(LockError::invalid_config("value", why));
            }
            request = request.publish(owner::published(value));
        }
        let guard = request.await?;
        // Observers are told in the background: the leader need not wait.
        let lease = Arc::clone(&guard.lease);
        tokio::spawn(async move { lease.announce().await });
        Ok(Leadership::new(guard, self.value.as_deref()))
    }
}

impl IntoFuture for Election {
    type Output = Result<Leadership, LockError>;
    type IntoFuture = Campaign;

    fn into_future(self) -> Campaign {
        Campaign(Box::pin(async move { self.campaign().await }))
    }
}

/// The future of an [`Election`], which `.await` runs: it campaigns until
/// it leads (a [`Leadership`]) or its wait runs out. A named type, so that
/// it can be kept in a struct or a `select!` arm; `Send`.
///
/// ```
/// use std::future::IntoFuture;
///
/// use lock_core::{Campaign, LockError, Locker};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// let locker = Locker::memory();
/// let campaign: Campaign = locker.election("scheduler").into_future();
/// let leadership = campaign.await?;
/// leadership.resign().await
/// # }
/// ```
#[must_use = "a Campaign does nothing until awaited"]
pub struct Campaign(Pin<Box<dyn Future<Output = Result<Leadership, LockError>> + Send>>);

impl Future for Campaign {
    type Output = Result<Leadership, LockError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().0.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Campaign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Campaign").finish_non_exhaustive()
    }
}

/// Elections.
impl Locker {
    /// A campaign for the leadership of `key`: set `.value`, `.ttl`,
    /// `.wait` and await it, or run a body while leading with
    /// [`Election::run_as_leader`]. The key is the election's plain lock.
    ///
    /// ```
    /// use lock_core::{LockError, Locker};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), LockError> {
    /// let locker = Locker::memory();
    /// let leader = locker.election("scheduler").await?;
    /// // Another candidate that will not wait long.
    /// let other = locker.election("scheduler").wait(Duration::from_millis(10)).await;
    /// assert!(matches!(other, Err(LockError::WaitTimeout { .. })));
    /// leader.resign().await
    /// # }
    /// ```
    pub fn election(&self, key: impl AsRef<str>) -> Election {
        Election {
            locker: self.clone(),
            key: key.as_ref().to_owned(),
            options: LockOptions::default(),
            value: None,
        }
    }
}
