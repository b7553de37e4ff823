//! The Locker's etcd leases: one per ttl (in whole seconds), shared by
//! every lock of that ttl, and kept alive on demand: a renewal or an
//! acquire asks for a keep-alive sent after it began, and all that ask
//! while one is on its way share the next.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper};
use tokio::time::Instant;

use super::errors::{bounded, store_error};
use crate::backend::queued::{BatchWork, LazyBatchRunner, Leased};
use crate::deadline::drift;
use crate::error::StoreError;

/// Bound on leases of distinct ttls at once: a ttl is configuration, but
/// no map grows without bound.
const MAX_LEASES: usize = 64;

/// The leases of one backend, by ttl in whole seconds.
pub(super) struct Leases {
    client: Client,
    timeout: Duration,
    by_ttl: Mutex<HashMap<u64, Arc<Lease>>>,
    /// Held while a lease is granted, so that a burst of first acquires
    /// grants one.
    granting: tokio::sync::Mutex<()>,
}

/// One etcd lease.
pub(super) struct Lease {
    pub(super) id: i64,
    /// What etcd granted: the ttl asked for in whole seconds, or etcd's
    /// minimum if that is longer.
    pub(super) ttl: Duration,
    times: Arc<Mutex<Times>>,
    client: Client,
    timeout: Duration,
    /// Its keeper task; every asker of a round gets the same answer.
    keep_alive: LazyBatchRunner<KeepAlive>,
}

/// What is known of a lease's life.
struct Times {
    /// When the last confirmed grant or keep-alive was sent: the lease
    /// lives at least `ttl` from then.
    confirmed_sent: Instant,
    /// etcd said it is gone.
    gone: bool,
}

impl Leases {
    pub(super) fn new(client: Client, timeout: Duration) -> Self {
        Leases {
            client,
            timeout,
            by_ttl: Mutex::default(),
            granting: tokio::sync::Mutex::new(()),
        }
    }

    /// The lease for locks of `ttl`: the one in use, or a new one if there
    /// is none or it is gone.
    pub(super) async fn for_ttl(&self, ttl: Duration) -> Result<Arc<Lease>, StoreError> {
        // Whole seconds, rounded up; at most what etcd's i64 holds.
        let seconds = ttl
            .as_secs()
            .saturating_add(u64::from(ttl.subsec_nanos() > 0));
        let seconds = seconds.clamp(1, i64::MAX as u64);
        if let Some(lease) = self.live(seconds) {
            return Ok(lease);
        }
        let _granting = self.granting.lock().await;
        if let Some(lease) = self.live(seconds) {
            return Ok(lease);
        }
        {
            let mut by_ttl = self.map();
            if by_ttl.len() >= MAX_LEASES {
                by_ttl.retain(|_, lease| lease.may_live());
            }
            if by_ttl.len() >= MAX_LEASES {
                return Err(StoreError::permanent(format!(
                    "locks of more than {MAX_LEASES} distinct ttls are held at once; use fewer ttls"
                )));
            }
        }
        let sent = Instant::now();
        let mut client = self.client.clone();
        let granted = bounded(self.timeout, true, client.lease_grant(seconds as i64, None)).await?;
        let Ok(granted_ttl) = u64::try_from(granted.ttl()) else {
            return Err(StoreError::not_applied("etcd granted a lease of no ttl"));
        };
        let times = Arc::new(Mutex::new(Times {
            confirmed_sent: sent,
            gone: false,
        }));
        let lease = Arc::new(Lease {
            id: granted.id(),
            ttl: Duration::from_secs(granted_ttl),
            times,
            client: self.client.clone(),
            timeout: self.timeout,
            keep_alive: LazyBatchRunner::new(usize::MAX),
        });
        self.map().insert(seconds, Arc::clone(&lease));
        Ok(lease)
    }

    /// Stops handing out `lease` (etcd said it is gone).
    pub(super) fn forget(&self, lease: &Arc<Lease>) {
        lease.times().gone = true;
        self.map().retain(|_, l| !Arc::ptr_eq(l, lease));
    }

    fn live(&self, seconds: u64) -> Option<Arc<Lease>> {
        self.map()
            .get(&seconds)
            .filter(|lease| lease.may_live())
            .cloned()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Lease>>> {
        self.by_ttl.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Leased for Lease {
    fn ttl(&self) -> Duration {
        self.ttl
    }
}

impl Lease {
    /// Whether the lease may still be alive in etcd: not said gone, and
    /// confirmed within its ttl. (If it runs out before a put under it
    /// lands, etcd refuses the put, or the keep-alive sent with it says it
    /// is gone: the acquire then takes a new lease.)
    fn may_live(&self) -> bool {
        let times = self.times();
        !times.gone && times.confirmed_sent + self.ttl > Instant::now()
    }

    /// Whether the lease lives at least its ttl from `since`: `true` once
    /// a keep-alive sent at or after `since` is confirmed, `false` if etcd
    /// says the lease is gone.
    ///
    /// # Cancel safety
    /// Cancel safe: the keep-alive goes on for the others who asked.
    pub(super) async fn confirm_since(&self, since: Instant) -> Result<bool, StoreError> {
        {
            let times = self.times();
            if times.gone {
                return Ok(false);
            }
            // A keep-alive sent up to half the drift margin before `since`
            // will do (the deadline keeps the whole margin off): a third of
            // the requests saved under load (bench/README.md).
            if times.confirmed_sent + drift(self.ttl) / 2 >= since {
                return Ok(true);
            }
        }
        let keep_alive = || KeepAlive {
            client: self.client.clone(),
            id: self.id,
            timeout: self.timeout,
            stream: None,
            times: Arc::clone(&self.times),
        };
        self.keep_alive.ask((), self.timeout, keep_alive).await
    }

    fn times(&self) -> std::sync::MutexGuard<'_, Times> {
        self.times.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One keep-alive of a lease, over a stream kept between rounds.
struct KeepAlive {
    client: Client,
    id: i64,
    timeout: Duration,
    stream: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    times: Arc<Mutex<Times>>,
}

impl KeepAlive {
    /// Sends one keep-alive and returns the ttl etcd answered (0: gone).
    async fn send_one(&mut self) -> Result<i64, etcd_client::Error> {
        let Some((keeper, stream)) = &mut self.stream else {
            // Opening the stream sends the first keep-alive.
            return match self.client.lease_keep_alive(self.id).await {
                Ok((keeper, stream)) => {
                    self.stream = Some((keeper, stream));
                    Ok(1)
                }
                Err(etcd_client::Error::LeaseKeepAliveError(_)) => Ok(0),
                Err(err) => Err(err),
            };
        };
        keeper.keep_alive().await?;
        match stream.message().await? {
            Some(reply) => Ok(reply.ttl()),
            None => Err(etcd_client::Error::LeaseKeepAliveError(
                "the keep-alive stream closed".to_owned(),
            )),
        }
    }
}

impl BatchWork for KeepAlive {
    type Ask = ();
    type Answer = Result<bool, StoreError>;

    async fn run(&mut self, asks: Vec<()>) -> Vec<Self::Answer> {
        let sent = Instant::now();
        let answer = match tokio::time::timeout(self.timeout, self.send_one()).await {
            Ok(Ok(ttl)) => {
                let mut times = self.times.lock().unwrap_or_else(PoisonError::into_inner);
                if ttl > 0 {
                    times.confirmed_sent = times.confirmed_sent.max(sent);
                } else {
                    times.gone = true;
                }
                Ok(ttl > 0)
            }
            Ok(Err(err)) => {
                self.stream = None;
                Err(store_error(err, false))
            }
            Err(_) => {
                // A late reply would answer the next round: start afresh.
                self.stream = None;
                Err(StoreError::timed_out(self.timeout))
            }
        };
        asks.iter().map(|()| answer.clone()).collect()
    }
}
