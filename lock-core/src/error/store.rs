//! [`StoreError`]: what a store's failure is, for deciding what to do
//! about it: transient (wait it out), permanent (an error answer), or a
//! [`Refusal`] of this client (a setting to fix).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A failure of the store itself (connection, timeout, protocol), or its
/// refusal of this client (bad URL, credentials, access rules).
///
/// - [`outcome_unknown`](Self::outcome_unknown): whether the request may
///   have been applied. A request that times out may have been; an acquire
///   then releases by its owner value in the background.
/// - [`is_transient`](Self::is_transient): whether waiting may help. A
///   waiting acquire goes on through transient errors for up to the
///   Locker's timeout before it gives up.
/// - [`refusal`](Self::refusal): why the store turned this client away; no
///   retry helps, and [`LockError`](crate::LockError) has a variant for each.
///
/// The Redis backend sends a request once more, on a fresh connection and
/// within the same timeout, when its connection broke before any reply
/// (refused, reset, closed): acquires are idempotent per owner value, and
/// releases and renewals are owner-checked, so a second send is safe. A
/// request that got no answer in time is not sent again (its outcome is
/// unknown), and neither is `WAIT` (on a fresh connection it would confirm
/// writes it never saw).
#[derive(Debug, Clone)]
pub struct StoreError {
    outcome_unknown: bool,
    kind: Kind,
    source: Arc<dyn std::error::Error + Send + Sync>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// The store may answer if asked again (connection, timeout, failover).
    Transient,
    /// The store answered with an error that asking again does not change.
    Permanent,
    /// The store turned this client away.
    Refused(Refusal),
}

/// Why a store turned a client away: a setting to fix, not an outage to wait
/// out. Each has its own [`LockError`](crate::LockError) variant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The URL does not parse.
    InvalidUrl,
    /// The URL's scheme (here) is one this build cannot connect with.
    UnsupportedScheme(String),
    /// Wrong user name or password.
    AuthenticationFailed,
    /// The TLS handshake failed (the server's certificate is not trusted,
    /// or the two sides share no protocol).
    TlsRejected,
    /// The store needs a password and none was given.
    PasswordRequired,
    /// The store's access rules deny a command, key or channel.
    PermissionDenied,
    /// The store holds a lock value of format version `stored` (`0`:
    /// none), which this client, reading format `ours`, cannot read.
    UnknownFormat {
        /// The version of the value in the store.
        stored: u32,
        /// The version this client reads and writes.
        ours: u32,
    },
    /// A semaphore's (or striped lock's) holders use `stored` permits (or
    /// segments); this client asked for `asked`.
    SizeDisagrees {
        /// `"permits"` or `"segments"`.
        what: &'static str,
        /// The number this request named.
        asked: u32,
        /// The number the key's holders use.
        stored: u32,
    },
}

/// Whether a request that failed may have been applied by the store.
///
/// ```
/// use lock_core::backend::Applied;
///
/// assert_eq!(Applied::maybe_if(true), Applied::Maybe);
/// assert_eq!(Applied::maybe_if(false), Applied::No);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// It may have been: it was sent and no answer came (a timeout, a
    /// connection cut after the send).
    Maybe,
    /// It was not: it never reached the store, or the store refused it.
    No,
}

impl Applied {
    /// [`Applied::Maybe`] when `sent_unanswered`, else [`Applied::No`]: for
    /// an error class that knows whether the request was on its way.
    pub fn maybe_if(sent_unanswered: bool) -> Self {
        match sent_unanswered {
            true => Applied::Maybe,
            false => Applied::No,
        }
    }
}

impl StoreError {
    /// A transient store error (waiting may help) from any error;
    /// `applied` says whether the request may have been applied.
    ///
    /// ```
    /// use lock_core::StoreError;
    /// use lock_core::backend::Applied;
    ///
    /// let err = StoreError::transient("connection reset", Applied::Maybe);
    /// assert!(err.is_transient() && err.outcome_unknown());
    /// ```
    pub fn transient(
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
        applied: Applied,
    ) -> Self {
        StoreError {
            outcome_unknown: applied == Applied::Maybe,
            kind: Kind::Transient,
            source: Arc::from(source.into()),
        }
    }

    /// A transient error of a request that may have been applied (sent,
    /// and no answer came).
    ///
    /// ```
    /// let err = lock_core::StoreError::in_doubt("no reply");
    /// assert!(err.outcome_unknown());
    /// ```
    pub fn in_doubt(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        StoreError::transient(source, Applied::Maybe)
    }

    /// A transient error of a request that was not applied (it never
    /// reached the store).
    ///
    /// ```
    /// let err = lock_core::StoreError::not_applied("connection refused");
    /// assert!(err.is_transient() && !err.outcome_unknown());
    /// ```
    pub fn not_applied(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        StoreError::transient(source, Applied::No)
    }

    /// An error answer of the store that asking again would not change
    /// (the request was not applied).
    pub fn permanent(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        StoreError {
            kind: Kind::Permanent,
            ..StoreError::not_applied(source)
        }
    }

    /// The store turned this client away (the request was not applied).
    pub fn refused(
        refusal: Refusal,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        StoreError {
            kind: Kind::Refused(refusal),
            ..StoreError::not_applied(source)
        }
    }

    /// A request of a kind the store does not keep (not applied).
    pub(crate) fn unsupported(kind: crate::kind::LockKind) -> Self {
        StoreError::permanent(format!("this store does not keep {kind} locks"))
    }

    /// A request naming `asked` permits or segments (`what`) where the
    /// holders use `stored` (not applied).
    pub(crate) fn size_disagrees(what: &'static str, asked: u32, stored: u32) -> Self {
        let message = format!("the key's holders use {stored} {what}, not {asked}");
        let refusal = Refusal::SizeDisagrees {
            what,
            asked,
            stored,
        };
        StoreError::refused(refusal, message)
    }

    /// The request timed out after `after`: it may have been applied.
    pub fn timed_out(after: Duration) -> Self {
        StoreError::in_doubt(format!("no answer within {after:?}"))
    }

    /// Awaits `request` for at most `timeout`, its failure told by
    /// `classify` (a store's own errors). `writes` says whether the request
    /// changes the store: a write that fails on the way or runs out of time
    /// may have been applied.
    #[cfg_attr(
        not(any(
            feature = "redis",
            feature = "etcd",
            feature = "zookeeper",
            feature = "postgres"
        )),
        allow(dead_code)
    )]
    pub(crate) async fn bounded<T, E>(
        timeout: Duration,
        writes: bool,
        request: impl std::future::Future<Output = Result<T, E>>,
        classify: impl FnOnce(E, bool) -> StoreError,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(timeout, request).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(err)) => Err(classify(err, writes)),
            Err(_) => Err(StoreError::timed_out(timeout).unknown(writes)),
        }
    }

    /// The same error, with whether the request may have been applied set
    /// to `unknown` (by a caller that knows better than the error alone).
    pub(crate) fn unknown(mut self, unknown: bool) -> Self {
        self.outcome_unknown = unknown;
        self
    }

    /// Whether the request may have been applied.
    pub fn outcome_unknown(&self) -> bool {
        self.outcome_unknown
    }

    /// Whether asking again later may succeed: a connection that broke, a
    /// server that is down, restarting or slow. False for refusals and for
    /// error answers.
    pub fn is_transient(&self) -> bool {
        self.kind == Kind::Transient
    }

    /// Why the store turned this client away, if it did.
    pub fn refusal(&self) -> Option<&Refusal> {
        match &self.kind {
            Kind::Refused(refusal) => Some(refusal),
            _ => None,
        }
    }
}

/// What happened to the request; why is its `source()`.
impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match (&self.kind, self.outcome_unknown) {
            (Kind::Refused(_), _) => "the store refused this client",
            (_, true) => "store request failed; it may have been applied",
            (Kind::Permanent, false) => "the store answered with an error",
            (Kind::Transient, false) => "store request failed; it was not applied",
        })
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}
