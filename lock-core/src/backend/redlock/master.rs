//! One master of a RedLock.

use std::time::Duration;

use tokio::sync::OnceCell;

use crate::backend::RedisBackend;
use crate::error::StoreError;

/// One master: connected when first reachable, and kept (its connection
/// heals on its own from then on).
pub(super) struct Master {
    pub(super) url: String,
    pub(super) backend: OnceCell<RedisBackend>,
}

impl Master {
    /// The master's backend, connected within `timeout` if not yet.
    pub(super) async fn get(&self, timeout: Duration) -> Result<&RedisBackend, StoreError> {
        let connect = || async {
            let backend = RedisBackend::connect(&self.url, timeout).await?;
            Ok::<_, StoreError>(backend.without_batching())
        };
        self.backend.get_or_try_init(connect).await
    }
}
