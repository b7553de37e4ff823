//! [`Election::run_as_leader`]: a body that runs only while its replica
//! leads, campaigning again each time the leadership ends.

use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

use crate::election::Election;
use crate::error::LockError;
use crate::lease::Lease;
use crate::locker::Locker;

/// How a term ended.
enum Ended<E> {
    /// The body returned.
    Done,
    Failed(E),
    Panicked,
    /// The leadership was lost: the body was dropped.
    Lost(LockError),
}

impl Election {
    /// Campaigns, runs `body` while leading, and campaigns again when the
    /// term ends, for as long as the returned future is polled. It returns
    /// only on an error a campaign cannot outwait (a bad key or value, a
    /// store that refuses the lock, the wait the caller set); a store that
    /// is down is waited out, campaigning again every ttl/3.
    ///
    /// - `body` gets the term's [`Lease`] (token, loss signal) and runs in
    ///   its scope ([`FencingToken::current`](crate::FencingToken::current)
    ///   is the term's token).
    /// - The moment the leadership is lost, `body` is dropped (cancelled
    ///   at its next await), and the campaign starts again.
    /// - When `body` returns, the leadership is resigned and the campaign
    ///   starts again at once (so a body that should lead for good loops
    ///   inside); after an error or a panic (logged), it also steps back for
    ///   a ttl, so that another candidate leads before it campaigns again.
    ///
    /// ```
    /// use lock_core::{LockError, Locker};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), LockError> {
    /// let locker = Locker::memory();
    /// let relay = locker.election("outbox-relay").value("node-a");
    /// let run = relay.run_as_leader(|term| async move {
    ///     // Send the outbox, fenced by term.token(), until the term ends.
    ///     tokio::time::sleep(Duration::from_millis(10)).await;
    ///     Ok::<_, std::io::Error>(())
    /// });
    /// # let _ = tokio::time::timeout(Duration::from_millis(50), run).await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run_as_leader<F, Fut, E>(self, mut body: F) -> Result<Infallible, LockError>
    where
        F: FnMut(Lease) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Display,
    {
        loop {
            let ttl = self.options.ttl.unwrap_or(self.locker.default_ttl());
            let leadership = match self.campaign().await {
                Ok(leadership) => leadership,
                // A store down, or too busy for now: campaign again in a while.
                Err(
                    err @ (LockError::Unavailable { .. }
                    | LockError::TooManyWaiters { .. }
                    | LockError::ReplicasNotConfirmed { .. }),
                ) => {
                    tracing::warn!(key = %self.key, error = %err, "campaigning failed; trying again");
                    tokio::time::sleep(ttl / 3).await;
                    continue;
                }
                Err(err) => return Err(err),
            };
            let lost = leadership.lost();
            let term = leadership.scope(body(leadership.lease()));
            let ended = tokio::select! {
                ended = AssertUnwindSafe(term).catch_unwind() => match ended {
                    Ok(Ok(())) => Ended::Done,
                    Ok(Err(err)) => Ended::Failed(err),
                    Err(_) => Ended::Panicked,
                },
                err = lost => Ended::Lost(err),
            };
            let key = self.key.as_str();
            let token = leadership.token();
            let step_back = match ended {
                Ended::Done => false,
                Ended::Failed(err) => {
                    tracing::warn!(%key, %token, error = %err, "the leader's body failed; resigning");
                    true
                }
                Ended::Panicked => {
                    tracing::error!(%key, %token, "the leader's body panicked; resigning");
                    true
                }
                Ended::Lost(err) => {
                    tracing::warn!(%key, %token, error = %err, "leadership lost; the body was stopped");
                    drop(leadership);
                    continue;
                }
            };
            if let Err(err) = leadership.resign().await {
                tracing::debug!(%key, %token, error = %err, "resigning failed");
            }
            if step_back {
                tokio::time::sleep(ttl).await;
            }
        }
    }
}

impl Locker {
    /// [`Election::run_as_leader`] on the election on `key`, with the
    /// Locker's ttl and no published value.
    ///
    /// ```
    /// use lock_core::{LockError, Locker};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), LockError> {
    /// let locker = Locker::memory();
    /// let relay = locker.run_as_leader("outbox-relay", |term| async move {
    ///     loop {
    ///         // Send a batch of the outbox, fenced by term.token().
    ///         tokio::time::sleep(Duration::from_millis(5)).await;
    ///     }
    ///     #[allow(unreachable_code)]
    ///     Ok::<_, std::io::Error>(())
    /// });
    /// assert!(tokio::time::timeout(Duration::from_millis(20), relay).await.is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run_as_leader<F, Fut, E>(
        &self,
        key: impl AsRef<str>,
        body: F,
    ) -> Result<Infallible, LockError>
    where
        F: FnMut(Lease) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Display,
    {
        self.election(key).run_as_leader(body).await
    }
}
