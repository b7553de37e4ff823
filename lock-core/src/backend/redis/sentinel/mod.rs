//! Redis behind Sentinel: the master is asked of the sentinels, and asked
//! again when it moves.
//!
//! [`SentinelMaster`] keeps one multiplexed connection to the current
//! master and forgets it when the sentinels announce a switch
//! (`switches.rs`), when a request finds it gone (a broken connection) or
//! demoted (`READONLY`), or when a request got no answer and the
//! sentinels name another master. The next request then asks the sentinels again
//! (`ask.rs`). Requests go through [`SentinelConnection`].

mod ask;
mod connection;
mod switches;
mod url;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{RedisError, RedisResult};
use tokio::sync::watch;

pub(super) use self::connection::SentinelConnection;
pub(super) use self::url::SentinelUrl;
use crate::error::StoreError;

/// The master a set of sentinels names, and a connection to it.
pub(super) struct SentinelMaster {
    name: String,
    /// One client per sentinel.
    sentinels: Vec<redis::Client>,
    /// How to log in to the master (and its database).
    login: redis::RedisConnectionInfo,
    timeout: Duration,
    /// One resolution at a time.
    resolving: tokio::sync::Mutex<()>,
    current: Mutex<Option<Current>>,
    /// Resolutions so far (the generation of the last).
    resolutions: AtomicU64,
    /// Counts the times the master was forgotten: a resolution that saw it
    /// change meanwhile asks again, and pub/sub connections are replaced.
    forgotten: watch::Sender<u64>,
    /// When the sentinels were last asked after an unanswered request.
    checked: Mutex<Option<tokio::time::Instant>>,
    /// Stops the listeners of `+switch-master` when this goes.
    _stop_watching: watch::Sender<()>,
}

/// The master as last resolved.
#[derive(Clone)]
pub(super) struct Current {
    /// Counts resolutions, so that only a failure on the current
    /// connection drops it.
    pub(super) generation: u64,
    pub(super) client: redis::Client,
    connection: MultiplexedConnection,
}

impl SentinelMaster {
    /// The sentinels of `url`, watching `url.master`, and a listener of
    /// their switches; nothing else is connected until
    /// [`current`](Self::current).
    pub(super) fn new(url: &SentinelUrl, timeout: Duration) -> Result<Arc<Self>, StoreError> {
        let sentinels = url.clients()?;
        let (stop_watching, stop) = watch::channel(());
        let master = Arc::new(SentinelMaster {
            name: url.master.clone(),
            sentinels: sentinels.clone(),
            login: url.login.clone(),
            timeout,
            resolving: tokio::sync::Mutex::new(()),
            current: Mutex::new(None),
            resolutions: AtomicU64::new(0),
            forgotten: watch::channel(0).0,
            checked: Mutex::new(None),
            _stop_watching: stop_watching,
        });
        switches::watch(&Arc::downgrade(&master), sentinels, &stop);
        Ok(master)
    }

    fn slot(&self) -> MutexGuard<'_, Option<Current>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The master's name, as the sentinels know it.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// The current master, asked of the sentinels if unknown.
    pub(super) async fn current(&self) -> RedisResult<Current> {
        if let Some(current) = self.slot().clone() {
            return Ok(current);
        }
        let _resolving = self.resolving.lock().await;
        let resolve = async {
            loop {
                // Another request may have resolved it meanwhile.
                if let Some(current) = self.slot().clone() {
                    return Ok(current);
                }
                let seen = *self.forgotten.borrow();
                let (client, connection) = self.ask().await?;
                let mut slot = self.slot();
                // A switch announced meanwhile: the answer may be stale.
                if *self.forgotten.borrow() != seen {
                    continue;
                }
                let generation = self.resolutions.fetch_add(1, Ordering::Relaxed) + 1;
                let address = client.get_connection_info().addr().to_string();
                tracing::info!(master = %self.name, %address, generation, "the sentinels name the master");
                let current = Current {
                    generation,
                    client,
                    connection,
                };
                *slot = Some(current.clone());
                return Ok::<_, RedisError>(current);
            }
        };
        match tokio::time::timeout(self.timeout, resolve).await {
            Ok(resolved) => resolved,
            Err(_) => Err(ask::gone(format!(
                "no master for {} within {:?}",
                self.name, self.timeout
            ))),
        }
    }

    /// Forgets the master of `generation` after `err` on it, if `err` says
    /// it is gone (an I/O error) or demoted (`READONLY`).
    pub(super) fn failed(&self, generation: u64, err: &RedisError) {
        let demoted = err.code() == Some("READONLY");
        if demoted || err.is_io_error() || err.is_unrecoverable_error() {
            self.forget_if(Some(generation), &err.to_string());
        }
    }

    /// Forgets the master unless it is the one at `ip:port` already (each
    /// sentinel announces the same switch).
    pub(super) fn moved_to(&self, ip: &str, port: u16, switch: &str) {
        if !self.is_at(ip, port) {
            self.forget_if(
                None,
                &format!("the sentinels switched the master: {switch}"),
            );
        }
    }

    /// Whether the master in use is the server at `ip:port`.
    fn is_at(&self, ip: &str, port: u16) -> bool {
        self.slot().as_ref().is_some_and(|current| {
            let addr = current.client.get_connection_info().addr();
            matches!(addr, redis::ConnectionAddr::Tcp(host, p) if host == ip && *p == port)
        })
    }

    /// A request to the master of `generation` got no answer in time. A
    /// frozen or cut-off master says nothing at all, and its switch may
    /// have gone unheard (a listener was reconnecting): the sentinels are
    /// asked, at most once per request bound, and the master is forgotten
    /// if they name another.
    pub(super) fn unanswered(self: &Arc<Self>, generation: u64) {
        let now = tokio::time::Instant::now();
        {
            let mut checked = self.checked.lock().unwrap_or_else(PoisonError::into_inner);
            if checked.is_some_and(|at| now < at + self.timeout) {
                return;
            }
            *checked = Some(now);
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let master = Arc::downgrade(self);
        runtime.spawn(async move {
            let Some(master) = master.upgrade() else {
                return;
            };
            let named = tokio::time::timeout(master.timeout, master.named()).await;
            if let Ok(Ok((ip, port))) = named
                && !master.is_at(&ip, port)
            {
                let why = format!("a request got no answer, and the sentinels name {ip}:{port}");
                master.forget_if(Some(generation), &why);
            }
        });
    }

    /// Drops the connection to the master (only if it is of `generation`,
    /// when given): the next request asks the sentinels again.
    fn forget_if(&self, generation: Option<u64>, why: &str) {
        let mut slot = self.slot();
        if let Some(generation) = generation
            && slot.as_ref().is_none_or(|c| c.generation != generation)
        {
            return;
        }
        if let Some(current) = slot.take() {
            tracing::warn!(master = %self.name, generation = current.generation, why, "asking the sentinels for the master again");
        }
        self.forgotten.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Changes each time the master is forgotten.
    pub(super) fn forgotten(&self) -> watch::Receiver<u64> {
        self.forgotten.subscribe()
    }

    /// The generation of the master in use (0: none, until the sentinels
    /// are asked again).
    pub(super) fn generation(&self) -> u64 {
        self.slot().as_ref().map_or(0, |c| c.generation)
    }
}
