//! [`FenceCheckLayer`]: a downstream service's HTTP check of propagated
//! fencing tokens. A request for a resource must carry a `fencing-token`
//! header not older than the newest this service has seen for that
//! resource; an older one is answered `409 Conflict` and never reaches the
//! handler.
//!
//! The check and the record are atomic, but the handler's write comes
//! after: for a hard guarantee, also fence the write itself in the data
//! store (`lock_core::fence`). The newest tokens live in this process
//! (one entry per resource); replicas of a downstream service each keep
//! their own, which is why the store-level fence is the one to rely on.

mod body;
mod future;
mod service;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use lock_core::FencingToken;
use tower::Layer;

pub use self::body::ResponseBody;
pub use self::future::ResponseFuture;
pub use self::service::FenceCheck;

/// Newest token seen per resource, shared by clones.
#[derive(Debug, Clone, Default)]
pub struct NewestTokens {
    newest: Arc<Mutex<HashMap<String, FencingToken>>>,
}

impl NewestTokens {
    /// Records `token` for `resource` unless a newer one was seen; returns
    /// the newer one then.
    pub fn observe(&self, resource: &str, token: FencingToken) -> Result<(), FencingToken> {
        let mut newest = self.newest.lock().unwrap_or_else(PoisonError::into_inner);
        match newest.get_mut(resource) {
            Some(seen) if *seen > token => Err(*seen),
            Some(seen) => {
                *seen = token;
                Ok(())
            }
            None => {
                newest.insert(resource.to_owned(), token);
                Ok(())
            }
        }
    }

    /// The newest token seen for `resource`.
    pub fn newest(&self, resource: &str) -> Option<FencingToken> {
        self.newest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(resource)
            .copied()
    }
}

/// Rejects requests whose `fencing-token` is older than the newest seen for
/// the resource the extractor names (`409`); a missing token is `428`, a
/// malformed one `400`. Requests the extractor maps to `None` pass.
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
}

impl<K> FenceCheckLayer<K> {
    /// Checks the resources `extractor` names.
    pub fn new(extractor: K) -> Self {
        FenceCheckLayer {
            extractor,
            newest: NewestTokens::default(),
        }
    }

    /// The table of newest tokens (to share it between routes, or inspect it).
    pub fn newest_tokens(&self) -> &NewestTokens {
        &self.newest
    }

    /// Uses `newest` as the table of newest tokens.
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
        }
    }
}
