//! Reading the scripts' replies: tokens, remaining times, segments, and
//! the answers that a stored value is of another format or size.

use std::time::Duration;

use crate::backend::{Attempt, Grant};
use crate::error::{Refusal, StoreError};
use crate::token::FencingToken;

/// The format version every stored value starts with (`1|`; see
/// [`StoredKeys`]).
pub(crate) const STORED_FORMAT: u32 = 1;

/// A script's answer that it met a value of another format (left alone).
pub(super) fn other_format(reply: &redis::Value) -> Option<StoreError> {
    let redis::Value::BulkString(bytes) = reply else {
        return None;
    };
    let version = std::str::from_utf8(bytes.strip_prefix(b"format:")?).ok()?;
    // An unreadable version is still not ours.
    let stored = version.parse().unwrap_or(u32::MAX);
    let message = format!("a lock value of format {version}; this client reads {STORED_FORMAT}");
    let refusal = Refusal::UnknownFormat {
        stored,
        ours: STORED_FORMAT,
    };
    Some(StoreError::refused(refusal, message))
}

/// Reads an acquire script's reply: the token's digits when taken, else
/// the integer `-1 - pttl` of the holder (`0`: a holder without expiry),
/// or `queued:<ms>` for a queue entry that stands (ask again within `ms`).
/// A lease is granted for the `ttl` asked.
pub(super) fn acquire_outcome(reply: redis::Value, ttl: Duration) -> Result<Attempt, StoreError> {
    if let Some(err) = other_format(&reply) {
        return Err(err);
    }
    if let redis::Value::BulkString(bytes) = &reply
        && let Some(ms) = bytes.strip_prefix(b"queued:")
    {
        let ms = std::str::from_utf8(ms).ok().and_then(|ms| ms.parse().ok());
        return Ok(Attempt::Queued {
            remaining: ms.map(Duration::from_millis),
        });
    }
    match reply {
        redis::Value::Int(held) => Ok(Attempt::Held {
            remaining: u64::try_from(-1 - held).ok().map(Duration::from_millis),
        }),
        redis::Value::BulkString(digits) => std::str::from_utf8(&digits)
            .ok()
            .and_then(|d| d.parse().ok())
            .map(|token| Attempt::Acquired(Grant::new(FencingToken::new(token), ttl)))
            // The script ran: it may have taken the lease.
            .ok_or_else(|| StoreError::in_doubt(format!("unexpected token {digits:?}"))),
        other => Err(StoreError::in_doubt(format!(
            "unexpected acquire reply {other:?}"
        ))),
    }
}

/// The permits the holders use, if the permit script answered that they
/// disagree with the request (`permits:<n>`).
fn permits_answer(reply: &redis::Value) -> Option<u32> {
    let redis::Value::BulkString(bytes) = reply else {
        return None;
    };
    let stored = std::str::from_utf8(bytes.strip_prefix(b"permits:")?).ok()?;
    Some(stored.parse().unwrap_or(0))
}

/// Reads the permit script's reply for `of` permits or segments (`what`):
/// as [`acquire_outcome`], with a segment's `{token, segment}` pair, or the
/// holders' own number (`permits:<n>`) when it is not `of`.
pub(super) fn shared_outcome(
    reply: redis::Value,
    ttl: Duration,
    what: &'static str,
    of: u32,
) -> Result<Attempt, StoreError> {
    if let Some(stored) = permits_answer(&reply) {
        return Err(StoreError::size_disagrees(what, of, stored));
    }
    let redis::Value::Array(mut pair) = reply else {
        return acquire_outcome(reply, ttl);
    };
    let segment = pair.pop().and_then(|s| redis::from_redis_value(s).ok());
    let token = pair.pop().unwrap_or(redis::Value::Nil);
    match (acquire_outcome(token, ttl)?, segment) {
        (Attempt::Acquired(grant), Some(segment)) => {
            Ok(Attempt::Acquired(grant.with_segment(segment)))
        }
        _ => Err(StoreError::in_doubt("unexpected segment reply")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn acquire_replies_are_read_as_token_or_remaining_time() {
        let ttl = Duration::from_secs(30);
        let read = |reply: Value| acquire_outcome(reply, ttl);
        let taken = read(Value::BulkString(b"1763800000000001".to_vec())).unwrap();
        let token = FencingToken::new(1_763_800_000_000_001);
        assert_eq!(taken, Attempt::Acquired(Grant::new(token, ttl)));
        let held = |ms: i64| read(Value::Int(ms)).unwrap();
        assert_eq!(held(0), Attempt::Held { remaining: None });
        assert_eq!(
            held(-1),
            Attempt::Held {
                remaining: Some(Duration::ZERO)
            }
        );
        assert_eq!(
            held(-1501),
            Attempt::Held {
                remaining: Some(Duration::from_millis(1500))
            }
        );
        let other = read(Value::BulkString(b"format:2".to_vec())).unwrap_err();
        assert_eq!(
            other.refusal(),
            Some(&Refusal::UnknownFormat {
                stored: 2,
                ours: STORED_FORMAT
            })
        );
        let queued = read(Value::BulkString(b"queued:250".to_vec())).unwrap();
        let remaining = Some(Duration::from_millis(250));
        assert_eq!(queued, Attempt::Queued { remaining });
        let garbled = read(Value::BulkString(b"12|w".to_vec())).unwrap_err();
        assert!(garbled.outcome_unknown(), "{garbled}");
        assert!(read(Value::Nil).is_err());
    }

    #[test]
    fn permit_replies_carry_segments_and_sizes() {
        let ttl = Duration::from_secs(30);
        let token = || Value::BulkString(b"1763800000000001".to_vec());
        let pair = Value::Array(vec![token(), Value::Int(3)]);
        let Attempt::Acquired(grant) = shared_outcome(pair, ttl, "segments", 4).unwrap() else {
            panic!("a pair is a grant");
        };
        assert_eq!(grant.segment, Some(3));
        let plain = shared_outcome(token(), ttl, "permits", 4).unwrap();
        assert!(matches!(plain, Attempt::Acquired(g) if g.segment.is_none()));
        let other = Value::BulkString(b"permits:2".to_vec());
        let err = shared_outcome(other, ttl, "permits", 4).unwrap_err();
        let sizes = Refusal::SizeDisagrees {
            what: "permits",
            asked: 4,
            stored: 2,
        };
        assert_eq!(err.refusal(), Some(&sizes));
    }
}
