//! The Locker's ZooKeeper sessions: one per ttl, shared by every lock of
//! that ttl. A session is a lease the client keeps alive by itself (it
//! pings the server); its timeout, negotiated with the server, is the ttl
//! granted to the locks in it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use zookeeper_client::Client;

use super::errors::store_error;
use super::held_checks::{HeldCheck, MAX_READS};
use crate::backend::queued::{LazyBatchRunner, Leased};
use crate::error::StoreError;

/// Bound on sessions of distinct ttls at once: a ttl is configuration, but
/// no map grows without bound.
const MAX_SESSIONS: usize = 64;

/// The longest session timeout asked for (servers agree to far less: 20
/// ticks unless configured).
const MAX_SESSION: Duration = Duration::from_secs(24 * 60 * 60);

/// The sessions of one backend, by ttl asked for.
pub(super) struct Sessions {
    connect_string: String,
    timeout: Duration,
    by_ttl: Mutex<HashMap<Duration, Arc<Session>>>,
    /// Held while a session is opened, so that a burst of first acquires
    /// opens one.
    opening: tokio::sync::Mutex<()>,
}

/// One session.
pub(super) struct Session {
    pub(super) client: Client,
    /// The session timeout the server agreed to.
    pub(super) ttl: Duration,
    /// The task that checks its held nodes for renewals.
    pub(super) held_checks: LazyBatchRunner<HeldCheck>,
}

impl Leased for Session {
    fn ttl(&self) -> Duration {
        self.ttl
    }
}

impl Session {
    /// Whether the session may still serve: not expired, closed or
    /// refused (it reconnects by itself while disconnected).
    pub(super) fn may_serve(&self) -> bool {
        !self.client.state().is_terminated()
    }
}

impl Sessions {
    pub(super) fn new(connect_string: String, timeout: Duration) -> Self {
        Sessions {
            connect_string,
            timeout,
            by_ttl: Mutex::default(),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    /// The session for locks of `ttl`: the one in use, or a new one if
    /// there is none or it ended.
    pub(super) async fn for_ttl(&self, ttl: Duration) -> Result<Arc<Session>, StoreError> {
        // ZooKeeper counts session timeouts in i32 milliseconds.
        let ttl = ttl.min(MAX_SESSION);
        if let Some(session) = self.serving(ttl) {
            return Ok(session);
        }
        let _opening = self.opening.lock().await;
        if let Some(session) = self.serving(ttl) {
            return Ok(session);
        }
        {
            let mut by_ttl = self.map();
            if by_ttl.len() >= MAX_SESSIONS {
                by_ttl.retain(|_, session| session.may_serve());
            }
            if by_ttl.len() >= MAX_SESSIONS {
                return Err(StoreError::permanent(format!(
                    "locks of more than {MAX_SESSIONS} distinct ttls are held at once; use fewer ttls"
                )));
            }
        }
        let session = Arc::new(self.open(ttl).await?);
        self.map().insert(ttl, Arc::clone(&session));
        Ok(session)
    }

    /// Opens a session of `ttl` (as the server agrees).
    pub(super) async fn open(&self, ttl: Duration) -> Result<Session, StoreError> {
        let connect = Client::connector()
            .with_session_timeout(ttl)
            .with_connection_timeout(self.timeout)
            .connect(&self.connect_string);
        let client = match tokio::time::timeout(self.timeout, connect).await {
            Ok(client) => client.map_err(|err| store_error(err, false))?,
            Err(_) => return Err(StoreError::timed_out(self.timeout).unknown(false)),
        };
        let ttl = client.session_timeout();
        Ok(Session {
            client,
            ttl,
            held_checks: LazyBatchRunner::new(MAX_READS),
        })
    }

    fn serving(&self, ttl: Duration) -> Option<Arc<Session>> {
        self.map()
            .get(&ttl)
            .filter(|session| session.may_serve())
            .cloned()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Duration, Arc<Session>>> {
        self.by_ttl.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
