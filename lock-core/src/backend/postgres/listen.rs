//! The one `LISTEN` connection of a Locker: releases of the namespace
//! arrive as notifications (the stored name as payload) and wake the
//! waiters of that lock, and only them.
//!
//! The connection is made again after it breaks (from 100 ms up to 2 s
//! apart). While it is down a waiter cannot subscribe and falls back on
//! the holder's remaining time; waiters subscribed when it broke are told
//! (their signal ends) and do the same.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{AsyncMessage, Config, NoTls, Socket};

use super::schema::Schema;
use super::transport::Transport;
use crate::backend::{Backoff, ReleaseSignal};
use crate::error::StoreError;

/// The listening task and the waiters it wakes.
pub(super) struct Listener {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

/// What the task and the subscribers share.
struct Shared {
    /// Whether `LISTEN` is in effect.
    up: AtomicBool,
    /// Told each time `LISTEN` comes into effect.
    listening: tokio::sync::Notify,
    /// The waiters of each lock: one signal per stored name, shared by its
    /// subscribers and gone with the last of them.
    routes: Mutex<HashMap<String, Route>>,
}

struct Route {
    releases: watch::Sender<u64>,
    subscribers: usize,
}

/// Drops a subscriber from its route (and the route with its last one).
struct Registration {
    shared: Arc<Shared>,
    name: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut routes = self.shared.routes();
        if let Some(route) = routes.get_mut(&self.name) {
            route.subscribers -= 1;
            if route.subscribers == 0 {
                routes.remove(&self.name);
            }
        }
    }
}

impl Shared {
    fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Route>> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn released(&self, name: &str) {
        if let Some(route) = self.routes().get(name) {
            route.releases.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// `LISTEN` is no longer in effect: every signal ends, and new ones
    /// start with the next connection.
    fn down(&self) {
        let mut routes = self.routes();
        self.up.store(false, Ordering::Release);
        for route in routes.values_mut() {
            route.releases = watch::Sender::new(0);
        }
    }
}

impl Listener {
    /// Starts listening on `schema`'s channel over a connection of its own.
    pub(super) fn start(
        config: Config,
        transport: Transport,
        schema: &Schema,
        timeout: Duration,
    ) -> Self {
        let shared = Arc::new(Shared {
            up: AtomicBool::new(false),
            listening: tokio::sync::Notify::new(),
            routes: Mutex::new(HashMap::new()),
        });
        let (listen_sql, shared_task) = (schema.listen(), Arc::clone(&shared));
        let task = match transport {
            Transport::Plain => {
                tokio::spawn(listen(config, NoTls, listen_sql, timeout, shared_task))
            }
            #[cfg(feature = "tls")]
            Transport::Tls(tls) => {
                tokio::spawn(listen(config, tls, listen_sql, timeout, shared_task))
            }
        };
        Listener { shared, task }
    }

    /// Waits until `LISTEN` is in effect, for at most `timeout`: a Locker
    /// starts with its waiters woken by releases, not polling.
    pub(super) async fn started(&self, timeout: Duration) -> Result<(), StoreError> {
        let listening = self.shared.listening.notified();
        let mut listening = std::pin::pin!(listening);
        listening.as_mut().enable();
        if self.shared.up.load(Ordering::Acquire) {
            return Ok(());
        }
        tokio::time::timeout(timeout, listening)
            .await
            .map_err(|_| StoreError::not_applied("the LISTEN connection did not start in time"))
    }

    /// A signal of the releases of the lock stored as `name`; active at once.
    pub(super) fn subscribe(&self, name: &str) -> Result<ReleaseSignal, StoreError> {
        // Read under the routes' lock, which `down` takes too: a signal
        // made here is ended by the next `down`.
        let mut routes = self.shared.routes();
        if !self.shared.up.load(Ordering::Acquire) {
            return Err(StoreError::not_applied("the LISTEN connection is down"));
        }
        let route = routes.entry(name.to_owned()).or_insert_with(|| Route {
            releases: watch::Sender::new(0),
            subscribers: 0,
        });
        route.subscribers += 1;
        let releases = route.releases.subscribe();
        drop(routes);
        let registration = Registration {
            shared: Arc::clone(&self.shared),
            name: name.to_owned(),
        };
        Ok(ReleaseSignal::new(releases, registration))
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Keeps one connection listening over `tls`, making it again when it
/// breaks.
async fn listen<T>(config: Config, tls: T, listen: String, timeout: Duration, shared: Arc<Shared>)
where
    T: MakeTlsConnect<Socket> + Clone,
    T::Stream: Send,
    T::TlsConnect: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    // Reconnects of many processes after one outage spread out (jitter).
    const PAUSES: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    let mut pauses = PAUSES;
    loop {
        if let Ok(Ok((client, mut connection))) =
            tokio::time::timeout(timeout, config.connect(tls.clone())).await
        {
            let mut asked = std::pin::pin!(client.batch_execute(&listen));
            let mut listening = false;
            loop {
                let message = std::future::poll_fn(|cx| connection.poll_message(cx));
                tokio::select! {
                    answer = &mut asked, if !listening => {
                        if answer.is_err() {
                            break;
                        }
                        listening = true;
                        pauses = PAUSES;
                        shared.up.store(true, Ordering::Release);
                        shared.listening.notify_waiters();
                    }
                    message = message => match message {
                        Some(Ok(AsyncMessage::Notification(note))) => shared.released(note.payload()),
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => break,
                    },
                }
            }
            shared.down();
        }
        tokio::time::sleep(pauses.pause()).await;
    }
}
