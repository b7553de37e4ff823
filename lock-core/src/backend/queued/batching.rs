//! [`BatchRunner`]: requests that arrive while one is on its way go together in
//! the next. Renewals that come due together then share a keep-alive and
//! a read instead of a call each.

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::error::StoreError;

/// Work done for many askers at once.
pub(crate) trait BatchWork: Send + 'static {
    /// What one asker asks.
    type Ask: Send + 'static;
    /// What one asker is answered.
    type Answer: Send + 'static;

    /// Answers `asks`, one answer each, in order.
    fn run(&mut self, asks: Vec<Self::Ask>) -> impl Future<Output = Vec<Self::Answer>> + Send;
}

/// A task running one [`BatchWork`] at a time for everyone who asked since the
/// last one began; it ends when every clone of the `BatchRunner` is dropped, or
/// with its runtime.
pub(crate) struct BatchRunner<R: BatchWork> {
    asks: mpsc::UnboundedSender<(R::Ask, oneshot::Sender<R::Answer>)>,
}

impl<R: BatchWork> Clone for BatchRunner<R> {
    fn clone(&self) -> Self {
        BatchRunner {
            asks: self.asks.clone(),
        }
    }
}

impl<R: BatchWork> BatchRunner<R> {
    /// Starts the task (on the current runtime); a round takes at most
    /// `max` asks.
    pub(crate) fn spawn(mut round: R, max: usize) -> Self {
        let (asks, mut waiting) = mpsc::unbounded_channel::<(R::Ask, oneshot::Sender<R::Answer>)>();
        tokio::spawn(async move {
            while let Some(first) = waiting.recv().await {
                let mut batch = vec![first];
                while batch.len() < max {
                    match waiting.try_recv() {
                        Ok(more) => batch.push(more),
                        Err(_) => break,
                    }
                }
                let (asks, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
                let answers = round.run(asks).await;
                for (reply, answer) in replies.into_iter().zip(answers) {
                    // An asker that gave up no longer listens.
                    let _ = reply.send(answer);
                }
            }
        });
        BatchRunner { asks }
    }

    /// Whether the task is gone (its runtime shut down): a Locker used on
    /// another runtime then starts another.
    pub(crate) fn is_closed(&self) -> bool {
        self.asks.is_closed()
    }

    /// Asks in the next round; `None` if the task is gone (its runtime
    /// shut down).
    pub(crate) async fn ask(&self, ask: R::Ask) -> Option<R::Answer> {
        let (reply, answer) = oneshot::channel();
        self.asks.send((ask, reply)).ok()?;
        answer.await.ok()
    }
}

/// A [`BatchRunner`] task started when first asked, and started again on the
/// asking runtime if the one it ran on shut down.
pub(crate) struct LazyBatchRunner<R: BatchWork> {
    rounds: Mutex<Option<BatchRunner<R>>>,
    max: usize,
}

impl<R: BatchWork> LazyBatchRunner<R> {
    /// None started yet; rounds take at most `max` asks.
    pub(crate) fn new(max: usize) -> Self {
        LazyBatchRunner {
            rounds: Mutex::new(None),
            max,
        }
    }

    /// Asks in the next round, for at most `timeout` (a task on a runtime
    /// nobody drives answers nothing), starting the task with `make` if
    /// none runs.
    ///
    /// # Cancel safety
    /// Cancel safe: the round goes on for the others who asked.
    pub(crate) async fn ask<T>(
        &self,
        ask: R::Ask,
        timeout: Duration,
        make: impl FnOnce() -> R,
    ) -> Result<T, StoreError>
    where
        R: BatchWork<Answer = Result<T, StoreError>>,
    {
        let rounds = {
            let mut rounds = self.rounds.lock().unwrap_or_else(PoisonError::into_inner);
            match &*rounds {
                Some(running) if !running.is_closed() => running.clone(),
                _ => {
                    let started = BatchRunner::spawn(make(), self.max);
                    *rounds = Some(started.clone());
                    started
                }
            }
        };
        match tokio::time::timeout(timeout, rounds.ask(ask)).await {
            Ok(Some(answer)) => answer,
            Ok(None) => Err(StoreError::not_applied("a background task stopped")),
            Err(_) => Err(StoreError::timed_out(timeout)),
        }
    }
}
