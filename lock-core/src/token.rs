//! [`FencingToken`]: the number that orders holders of one lock.

use std::fmt;

/// A number minted on every acquisition, strictly greater than every token
/// minted before for the same key.
///
/// Pass it with every write the lock protects and let the store reject a
/// write whose token is older than the newest it has seen: a holder that
/// paused past its lease (GC pause, VM stall, partition) is then stopped by
/// the store even though it still believes it holds the lock.
///
/// ```
/// use lock_core::FencingToken;
///
/// let older = FencingToken::new(7);
/// let newer = FencingToken::new(8);
/// assert!(older < newer);
/// assert_eq!(newer.get(), 8);
/// assert_eq!(newer.to_string(), "8");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(u64);

impl FencingToken {
    /// Wraps a raw token value (for example one read back from a database).
    pub const fn new(value: u64) -> Self {
        FencingToken(value)
    }

    /// The raw value, for storing next to the data it protects.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl From<FencingToken> for u64 {
    fn from(token: FencingToken) -> u64 {
        token.0
    }
}

/// The same as [`FencingToken::new`].
///
/// ```
/// use lock_core::FencingToken;
///
/// assert_eq!(FencingToken::from(8), FencingToken::new(8));
/// ```
impl From<u64> for FencingToken {
    fn from(value: u64) -> Self {
        FencingToken(value)
    }
}

impl std::str::FromStr for FencingToken {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim().parse().map(FencingToken)
    }
}
