//! [`SentinelConnection`]: requests to whichever server the sentinels
//! name master.

use std::sync::Arc;

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::{Current, SentinelMaster};

/// A connection to the master of a [`SentinelMaster`]. A request that
/// finds the master demoted (`READONLY`, a write not applied) is sent once
/// more at once, to the master the sentinels name next; one whose
/// connection broke goes back to [`send_or_resend`](crate::backend::redis::send_or_resend),
/// which resends it as on a single server; one given up on unanswered has
/// the sentinels asked whether the master moved.
#[derive(Clone)]
pub(in crate::backend::redis) struct SentinelConnection {
    master: Arc<SentinelMaster>,
}

impl SentinelConnection {
    pub(in crate::backend::redis) fn new(master: Arc<SentinelMaster>) -> Self {
        SentinelConnection { master }
    }
}

/// The `READONLY` answer among `replies`, if any.
fn demoted<'v>(replies: impl IntoIterator<Item = &'v Value>) -> Option<redis::RedisError> {
    replies.into_iter().find_map(|reply| match reply {
        Value::ServerError(err) if err.code() == "READONLY" => Some(err.clone().into()),
        _ => None,
    })
}

/// A request on its way to the master of `generation`: dropped before
/// its answer (its caller's bound ran out), it has the master checked
/// ([`SentinelMaster::unanswered`]).
struct Unanswered<'m> {
    master: &'m Arc<SentinelMaster>,
    generation: u64,
    answered: bool,
}

impl<'m> Unanswered<'m> {
    fn new(master: &'m Arc<SentinelMaster>, generation: u64) -> Self {
        Unanswered {
            master,
            generation,
            answered: false,
        }
    }
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.master.unanswered(self.generation);
        }
    }
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut again = false;
            loop {
                let Current {
                    generation,
                    mut connection,
                    ..
                } = self.master.current().await?;
                let mut pending = Unanswered::new(&self.master, generation);
                let reply = connection.req_packed_command(cmd).await;
                pending.answered = true;
                match &reply {
                    Ok(value) => match demoted([value]) {
                        Some(err) => self.master.failed(generation, &err),
                        None => return reply,
                    },
                    Err(err) => self.master.failed(generation, err),
                }
                // Only a demoted master's answer goes again, and only once.
                if reply.is_err() || again {
                    return reply;
                }
                again = true;
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        // Not sent again: part of a pipeline may have been applied.
        Box::pin(async move {
            let Current {
                generation,
                mut connection,
                ..
            } = self.master.current().await?;
            let mut pending = Unanswered::new(&self.master, generation);
            let replies = connection
                .req_packed_commands(pipeline, offset, count)
                .await;
            pending.answered = true;
            let failure = match &replies {
                Ok(values) => demoted(values),
                Err(err) => Some(err.clone()),
            };
            if let Some(err) = failure {
                self.master.failed(generation, &err);
            }
            replies
        })
    }

    fn get_db(&self) -> i64 {
        self.master.login.db()
    }
}
