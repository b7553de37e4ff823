//! What Redis keeps under a lock's names.
//!
//! For user key `order:42` under namespace `lock` (the names themselves
//! come from [`StoredKeys`]):
//!
//! ```text
//! lock:{order:42}:lease      `1|<owner>|<token>` of the current lease (PX ttl),
//!                            `|w` appended once another client found it held
//! lock:{order:42}:fence      `1|<token>`: the newest token, until the server
//!                            clock is 10 s past it
//! lock:{order:42}:released   pub/sub channel, one message per release of a
//!                            lease that someone found held
//! lock:{order:42}:released:<owner>
//!                            the channel of one queued waiter (a fair lock's
//!                            place, a writer's mark): told when it may go
//! lock:{order:42}:permits    a semaphore's permits: owner -> `1|<token>|<expiry>`
//! lock:{order:42}:segments   a striped lock's segments, in the same form
//! lock:{order:42}:fair       a fair lock's queue: owner -> `1|<token>|<expiry>|<seq>`
//!                            (token 0 while waiting)
//! lock:{order:42}:rw         a read-write lock's holders: owner ->
//!                            `1|<token>|<expiry>|r` or `|w`, and `~`, the
//!                            mark of a waiting writer
//! ```
//!
//! Every value starts with its format version (`1|`): a client that meets
//! another version leaves the value alone and says so
//! ([`LockError::UnknownFormat`](crate::LockError::UnknownFormat)). The
//! braces are a Redis Cluster hash tag, so all of a lock's keys land in one
//! slot.

use std::cell::RefCell;
use std::fmt;

use redis::{RedisWrite, ToRedisArgs};

use crate::backend::stored_keys::StoredKeys;

/// The token record: the newest token of the lock, kept until the server
/// clock is 10 s past it.
pub(super) fn fence(keys: &StoredKeys) -> Beside<'_> {
    Beside(keys, ":fence")
}

/// The channel a release is published on.
pub(super) fn channel(keys: &StoredKeys) -> Beside<'_> {
    Beside(keys, ":released")
}

/// A name beside a lock's base, written straight into a command's
/// arguments: no name is kept per lock beyond the lease's.
#[derive(Clone, Copy)]
pub(super) struct Beside<'a>(&'a StoredKeys, &'static str);

thread_local! {
    /// Where a name is laid out before it is copied into a command.
    static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
}

impl fmt::Display for Beside<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.base())?;
        f.write_str(self.1)
    }
}

impl ToRedisArgs for Beside<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        // One copy of exactly the name's length, as for a `&str`.
        SCRATCH.with_borrow_mut(|name| {
            name.clear();
            name.push_str(self.0.base());
            name.push_str(self.1);
            out.write_arg(name.as_bytes());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_record_and_the_channel_sit_beside_the_lease() {
        let keys = StoredKeys::new("lock", "order:42").unwrap();
        assert_eq!(fence(&keys).to_string(), "lock:{order:42}:fence");
        assert_eq!(channel(&keys).to_string(), "lock:{order:42}:released");
        let mut args: Vec<Vec<u8>> = Vec::new();
        fence(&keys).write_redis_args(&mut args);
        assert_eq!(args, [b"lock:{order:42}:fence".to_vec()]);
    }
}
