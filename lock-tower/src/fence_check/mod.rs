//! [`FenceCheckLayer`]: a downstream service's HTTP check of propagated
//! fencing tokens. A request for a resource must carry a `fencing-token`
//! header not older than the newest this service has seen for that
//! resource; an older one is answered `409 Conflict` and never reaches the
//! handler.
//!
//! The check and the record are atomic, but the handler's write comes
//! after: for a hard guarantee, also fence the write itself in the data
//! store (`lock_core::fence`). The newest tokens live in this process
//! (one entry per resource, [`DEFAULT_MAX_RESOURCES`] at most); replicas
//! of a downstream service each keep their own, which is why the
//! store-level fence is the one to rely on.
//!
//! Unsigned, the check trusts its callers' headers: any caller can send a
//! high token and have later writes refused. With
//! [`FenceCheckLayer::verify`], a request must also carry a
//! `fencing-token-signature` made with one of the accepted keys
//! ([`PropagateFencingTokenLayer::signed`](crate::PropagateFencingTokenLayer::signed)),
//! or it is answered `401 Unauthorized`.

mod body;
mod future;
mod newest;
mod service;

use std::collections::HashSet;
use std::sync::Arc;

use tower::Layer;

pub use self::body::ResponseBody;
pub use self::future::ResponseFuture;
pub use self::newest::{DEFAULT_MAX_RESOURCES, NewestTokens, Stale};
pub use self::service::FenceCheck;
use crate::signing::{InvalidSigningKey, SigningKey};

/// Rejects requests whose `fencing-token` is older than the newest seen for
/// the resource the extractor names (`409`); a missing token is `428`, a
/// malformed one `400`. Requests the extractor maps to `None` pass.
/// With [`verify`](Self::verify), a missing, malformed or forged signature
/// is `401`, checked before the token is recorded.
///
/// ```
/// use lock_tower::{FenceCheckLayer, KeyFrom};
///
/// // PUT /accounts/7 must carry a token not older than any seen for account:7.
/// let layer = FenceCheckLayer::new(KeyFrom::path("/accounts/{id}", "account:<id>"));
/// # let _ = layer;
/// ```
#[derive(Debug, Clone)]
pub struct FenceCheckLayer<K> {
    extractor: K,
    newest: NewestTokens,
    keys: Option<Arc<[SigningKey]>>,
}

impl<K> FenceCheckLayer<K> {
    /// Checks the resources `extractor` names.
    ///
    /// ```
    /// use lock_tower::{FenceCheckLayer, KeyFrom};
    ///
    /// let layer = FenceCheckLayer::new(KeyFrom::header("x-resource"));
    /// assert!(layer.newest_tokens().is_empty());
    /// ```
    pub fn new(extractor: K) -> Self {
        FenceCheckLayer {
            extractor,
            newest: NewestTokens::default(),
            keys: None,
        }
    }

    /// Accepts only tokens signed with one of `keys` (by
    /// [`PropagateFencingTokenLayer::signed`](crate::PropagateFencingTokenLayer::signed)).
    /// To rotate: add the new key here, switch the signers to it, then
    /// drop the old one. Refused: no key, or two with one id.
    ///
    /// ```
    /// use lock_tower::{FenceCheckLayer, KeyFrom, SigningKey};
    ///
    /// let old = SigningKey::new("2026-10", [1u8; 32])?;
    /// let new = SigningKey::new("2026-11", [2u8; 32])?;
    /// let layer = FenceCheckLayer::new(KeyFrom::path("/accounts/{id}", "account:<id>"))
    ///     .verify([new, old])?;
    /// # let _ = layer;
    /// # Ok::<(), lock_tower::InvalidSigningKey>(())
    /// ```
    pub fn verify(
        mut self,
        keys: impl IntoIterator<Item = SigningKey>,
    ) -> Result<Self, InvalidSigningKey> {
        let keys: Arc<[SigningKey]> = keys.into_iter().collect();
        if keys.is_empty() {
            return Err(InvalidSigningKey::NoKeys);
        }
        let mut ids = HashSet::new();
        if let Some(twice) = keys.iter().find(|key| !ids.insert(key.id())) {
            return Err(InvalidSigningKey::Id(twice.id().to_owned()));
        }
        self.keys = Some(keys);
        Ok(self)
    }

    /// Remembers the newest tokens of at most `max` resources (default
    /// [`DEFAULT_MAX_RESOURCES`]); see [`NewestTokens`] for what a full
    /// table forgets and why that stays safe.
    ///
    /// ```
    /// use lock_tower::{FenceCheckLayer, KeyFrom};
    ///
    /// let layer = FenceCheckLayer::new(KeyFrom::path("/accounts/{id}", "account:<id>"))
    ///     .max_resources(1_000);
    /// # let _ = layer;
    /// ```
    pub fn max_resources(mut self, max: usize) -> Self {
        self.newest = NewestTokens::bounded(max);
        self
    }

    /// The table of newest tokens (to share it between routes, or inspect it).
    ///
    /// ```
    /// use lock_core::FencingToken;
    /// use lock_tower::{FenceCheckLayer, KeyFrom};
    ///
    /// let layer = FenceCheckLayer::new(KeyFrom::path("/accounts/{id}", "account:<id>"));
    /// layer.newest_tokens().observe("account:7", FencingToken::new(12)).unwrap();
    /// assert_eq!(layer.newest_tokens().newest("account:7"), Some(FencingToken::new(12)));
    /// ```
    pub fn newest_tokens(&self) -> &NewestTokens {
        &self.newest
    }

    /// Uses `newest` as the table of newest tokens.
    ///
    /// ```
    /// use lock_tower::{FenceCheckLayer, KeyFrom, NewestTokens};
    ///
    /// // Two routes that write the same accounts check against one table.
    /// let shared = NewestTokens::bounded(10_000);
    /// let by_path = FenceCheckLayer::new(KeyFrom::path("/accounts/{id}", "account:<id>"))
    ///     .with_newest_tokens(shared.clone());
    /// let by_query = FenceCheckLayer::new(KeyFrom::query("account").prefix("account:"))
    ///     .with_newest_tokens(shared);
    /// # let _ = (by_path, by_query);
    /// ```
    pub fn with_newest_tokens(mut self, newest: NewestTokens) -> Self {
        self.newest = newest;
        self
    }
}

impl<S, K: Clone> Layer<S> for FenceCheckLayer<K> {
    type Service = FenceCheck<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        FenceCheck {
            inner,
            extractor: self.extractor.clone(),
            newest: self.newest.clone(),
            keys: self.keys.clone(),
        }
    }
}
