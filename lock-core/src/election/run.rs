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
    /// store that refuses the lock); a store that is down is waited out.
    ///
    /// - `body` gets the term's [`Lease`] (token, loss signal) and runs in
    ///   its scope ([`FencingToken::current`](crate::FencingToken::current)
    ///   is the term's token).
    /// - The moment the leadership is lost, `body` is dropped (cancelled
    ///   at its next await), and the campaign starts again.
    /// - When `body` returns, the leadership is resigned; after an error or
    ///   a panic (logged), it also steps back for a ttl, so that another
    ///   candidate leads before it campaigns again.
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
            // A campaign waits out outages; what it returns cannot be waited out
            // (or is the wait the caller bounded).
            let leadership = self.campaign().await?;
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
                tokio::time::sleep(self.options.ttl.unwrap_or(self.locker.default_ttl())).await;
            }
        }
    }
}

impl Locker {
    /// [`Election::run_as_leader`] on the election on `key`, with the
    /// Locker's ttl and no published value.
    pub async fn run_as_leader<F, Fut, E>(
        &self,
        key: &str,
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
