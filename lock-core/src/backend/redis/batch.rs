//! Acquires, renewals and releases of many locks in one script call.
//!
//! Every acquire, renewal and release of an exclusive lease on a standalone
//! Redis backend joins one queue (the watchdog lines renewals up on shared
//! ticks, so that they meet here).
//! While fewer than [`MAX_IN_FLIGHT`] calls are on their way, the caller
//! sends the queue at once (a batch of one when the process is quiet, so a
//! lone lock waits for nothing); otherwise the next operations gather and
//! go together in one call, made as soon as one of those comes back.
//!
//! Calls on their way may overtake each other (a script reloaded after
//! `NOSCRIPT` is sent again later), so the order of operations across calls
//! is not relied on: an acquire whose caller is gone by the time its reply
//! arrives and that took the lease is released here, by owner value, in a
//! call sent after that reply.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::aio::ConnectionLike;
use tokio::sync::oneshot;

use super::keys::{channel, fence};
use super::scripts::{ACQUIRE_SCRIPT, BATCH_SCRIPT, RELEASE_SCRIPT, RENEW_SCRIPT};
use super::{Publish, Sent, lock_invocation, send_or_resend};
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;

/// Most operations in one script call.
const MAX_BATCH: usize = 64;

/// Most calls on their way at once.
pub(super) const MAX_IN_FLIGHT: usize = 2;

/// One lock operation.
pub(super) enum LeaseCall {
    /// Take the lease for this many milliseconds.
    Acquire(u64),
    /// Extend the lease to this many milliseconds from now.
    Renew(u64),
    /// Release the lease and publish on its channel (so) if someone waits.
    Release(Publish),
}

impl LeaseCall {
    /// A call of this operation's own script (cheaper for the server than
    /// the batch script's loop when it goes alone).
    pub(super) fn invocation(
        &self,
        keys: &StoredKeys,
        owner: &str,
    ) -> redis::ScriptInvocation<'static> {
        match self {
            LeaseCall::Acquire(ttl_ms) => lock_invocation(&ACQUIRE_SCRIPT, keys, owner, ttl_ms),
            LeaseCall::Renew(ttl_ms) => lock_invocation(&RENEW_SCRIPT, keys, owner, ttl_ms),
            LeaseCall::Release(publish) => {
                let mut call = lock_invocation(&RELEASE_SCRIPT, keys, owner, channel(keys));
                call.arg(publish.command());
                call
            }
        }
    }
}

struct Queued {
    operation: LeaseCall,
    keys: StoredKeys,
    owner: Box<str>,
    reply: oneshot::Sender<Result<Sent<redis::Value>, StoreError>>,
}

/// The queue of one backend and the connection its calls go over.
pub(super) struct Batcher<C> {
    connection: C,
    timeout: Duration,
    /// The runtime the connection was made on (its driver task runs there):
    /// calls that follow a sender's own go out on a task of it.
    runtime: tokio::runtime::Handle,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    queued: Vec<Queued>,
    /// Calls on their way; each sender sends what gathered meanwhile.
    sending: usize,
}

impl<C> Batcher<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A batcher sending over `connection`; must be made on the runtime the
    /// connection was made on.
    pub(super) fn new(connection: C, timeout: Duration) -> Arc<Self> {
        Arc::new(Batcher {
            connection,
            timeout,
            runtime: tokio::runtime::Handle::current(),
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `operation` on `keys` for `owner` in the next call and returns
    /// its reply, within the timeout (queueing included).
    pub(super) async fn run(
        self: &Arc<Self>,
        operation: LeaseCall,
        keys: &StoredKeys,
        owner: &str,
    ) -> Result<Sent<redis::Value>, StoreError> {
        let (reply, answer) = oneshot::channel();
        let batch = {
            let mut state = self.state();
            state.queued.push(Queued {
                operation,
                keys: keys.clone(),
                owner: owner.into(),
                reply,
            });
            if state.sending >= MAX_IN_FLIGHT {
                None
            } else {
                state.sending += 1;
                Some(take_batch(&mut state))
            }
        };
        let wait = async {
            if let Some(batch) = batch {
                // This caller sends; if it is dropped on the way, the guard
                // passes the queue on.
                let mut sender = Sender {
                    batcher: Arc::clone(self),
                    done: false,
                };
                self.send(batch).await;
                sender.hand_on();
            }
            answer.await.unwrap_or_else(|_| {
                Err(StoreError::in_doubt(
                    "the call carrying this lock operation was dropped",
                ))
            })
        };
        match tokio::time::timeout(self.timeout, wait).await {
            Ok(outcome) => outcome,
            Err(_) => Err(StoreError::timed_out(self.timeout)),
        }
    }

    /// Queues the release of a lease whose acquire nobody waits for any
    /// more; the sender of the call that took it sends it next.
    fn give_back(&self, keys: StoredKeys, owner: Box<str>) {
        let (reply, _) = oneshot::channel();
        self.state().queued.push(Queued {
            operation: LeaseCall::Release(Publish::Plain),
            keys,
            owner,
            reply,
        });
    }

    /// Sends one call (again if its connection broke, see [`send_or_resend`]) and
    /// hands each operation its reply.
    async fn send(&self, batch: Vec<Queued>) {
        let invocation = &invocation(&batch);
        let sent = send_or_resend(self.timeout, || {
            let mut connection = self.connection.clone();
            async move { invocation.invoke_async(&mut connection).await }
        })
        .await;
        // A call of one runs the single-operation scripts, which cost the
        // server less than the loop; their one reply stands for the list.
        let replies = sent.and_then(|Sent { reply, maybe_twice }| {
            let replies = match (reply, batch.len()) {
                (reply, 1) => vec![reply],
                (redis::Value::Array(replies), n) if replies.len() == n => replies,
                (other, n) => {
                    let unexpected =
                        format!("unexpected reply to a call of {n} lock operations: {other:?}");
                    return Err(StoreError::in_doubt(unexpected));
                }
            };
            Ok(replies
                .into_iter()
                .map(move |reply| Sent { reply, maybe_twice }))
        });
        match replies {
            Ok(replies) => {
                for (queued, sent) in batch.into_iter().zip(replies) {
                    let taken = matches!(
                        (&queued.operation, &sent.reply),
                        (LeaseCall::Acquire(_), redis::Value::BulkString(_))
                    );
                    if queued.reply.send(Ok(sent)).is_err() && taken {
                        // Its caller gave up waiting: give the lease back.
                        self.give_back(queued.keys, queued.owner);
                    }
                }
            }
            Err(err) => {
                for queued in batch {
                    let _ = queued.reply.send(Err(err.clone()));
                }
            }
        }
    }

    /// Sends what gathered while this sender's call was on its way, on a
    /// task of its own so that the sender's caller goes on at once.
    fn send_rest(self: Arc<Self>) {
        let batch = {
            let mut state = self.state();
            if state.queued.is_empty() {
                state.sending -= 1;
                return;
            }
            take_batch(&mut state)
        };
        // Made before the task: a task dropped unpolled (its runtime shut
        // down) still passes the queue on; each such pass fails one call's
        // worth of operations (outcome unknown), so it ends.
        let mut sender = Sender {
            batcher: Arc::clone(&self),
            done: false,
        };
        self.runtime.spawn(async move {
            sender.batcher.send(batch).await;
            sender.hand_on();
        });
    }
}

/// The script call for `batch`: the operation's own script for a batch of
/// one, else the batch script.
fn invocation(batch: &[Queued]) -> redis::ScriptInvocation<'static> {
    if let [one] = batch {
        return one.operation.invocation(&one.keys, &one.owner);
    }
    let mut invocation = BATCH_SCRIPT.prepare_invoke();
    for queued in batch {
        invocation.key(queued.keys.lease()).key(fence(&queued.keys));
        match queued.operation {
            LeaseCall::Acquire(ttl_ms) => invocation.arg("a").arg(&*queued.owner).arg(ttl_ms),
            LeaseCall::Renew(ttl_ms) => invocation.arg("n").arg(&*queued.owner).arg(ttl_ms),
            LeaseCall::Release(_) => invocation
                .arg("r")
                .arg(&*queued.owner)
                .arg(channel(&queued.keys)),
        };
    }
    invocation
}

/// The oldest queued operations, at most one call's worth.
fn take_batch(state: &mut State) -> Vec<Queued> {
    if state.queued.len() <= MAX_BATCH {
        std::mem::take(&mut state.queued)
    } else {
        state.queued.drain(..MAX_BATCH).collect()
    }
}

/// The sender's duty to pass the queue on, also when its future is dropped
/// before its call came back.
struct Sender<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    batcher: Arc<Batcher<C>>,
    done: bool,
}

impl<C> Sender<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn hand_on(&mut self) {
        self.done = true;
        Arc::clone(&self.batcher).send_rest();
    }
}

impl<C> Drop for Sender<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        if !self.done {
            Arc::clone(&self.batcher).send_rest();
        }
    }
}
