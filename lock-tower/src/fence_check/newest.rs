//! [`NewestTokens`]: the newest token seen per resource, in a table of
//! bounded size.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use lock_core::FencingToken;

/// Resources a [`NewestTokens`] remembers unless told otherwise: about
/// 12 MB of table at most.
pub const DEFAULT_MAX_RESOURCES: usize = 100_000;

/// The newest token seen per resource, shared by clones, for at most
/// `max_resources` resources.
///
/// When the table is full, the sixteenth of its resources seen least
/// recently are forgotten, and the highest token forgotten becomes the
/// *floor*: a resource the table does not hold is then refused a token at
/// or below the floor, since it may be one of those forgotten. A forgotten
/// resource can thus never let a stale token pass; the price is a false
/// `409` for a resource not seen for that long (or first seen) with a
/// token at or below the floor. Tokens of Redis, etcd and ZooKeeper rise
/// with time across keys, so fresh acquisitions are above the floor of
/// older ones.
///
/// Unsigned, the table believes its callers: one that sends more than
/// `max_resources` resources with huge tokens raises the floor past every
/// real token, and every resource not in the table is refused. Verify
/// signatures ([`FenceCheckLayer::verify`](crate::FenceCheckLayer::verify))
/// wherever a caller is not trusted.
///
/// ```
/// use lock_core::FencingToken;
/// use lock_tower::NewestTokens;
///
/// let newest = NewestTokens::bounded(2);
/// let t = FencingToken::new;
/// newest.observe("a", t(10)).unwrap();
/// newest.observe("b", t(20)).unwrap();
/// newest.observe("c", t(30)).unwrap(); // full: `a` is forgotten, floor 10
/// assert_eq!(newest.floor(), Some(t(10)));
/// assert!(newest.observe("a", t(10)).is_err()); // maybe stale: refused
/// assert_eq!(newest.len(), 2);
/// ```
#[derive(Clone)]
pub struct NewestTokens {
    table: Arc<Mutex<Table>>,
}

struct Table {
    /// Per resource: the newest token, and when it was last seen.
    newest: HashMap<Box<str>, (FencingToken, u64)>,
    max: usize,
    floor: Option<FencingToken>,
    /// Counts observations, to tell which resources were seen least lately.
    clock: u64,
}

/// Why [`NewestTokens::observe`] refused a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stale {
    /// A newer token was seen for the resource.
    Newer(FencingToken),
    /// The resource is not remembered and the token is at or below the
    /// floor of forgotten ones.
    AtOrBelowFloor(FencingToken),
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stale::Newer(newest) => write!(f, "is older than {newest}, which has already written"),
            Stale::AtOrBelowFloor(floor) => write!(
                f,
                "is not above {floor}, the newest token of resources this service no longer \
                 tracks"
            ),
        }
    }
}

impl Default for NewestTokens {
    fn default() -> Self {
        NewestTokens::bounded(DEFAULT_MAX_RESOURCES)
    }
}

impl NewestTokens {
    /// A table of at most `max_resources` resources (at least 1).
    pub fn bounded(max_resources: usize) -> Self {
        let table = Table {
            newest: HashMap::new(),
            max: max_resources.max(1),
            floor: None,
            clock: 0,
        };
        NewestTokens {
            table: Arc::new(Mutex::new(table)),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `token` for `resource` unless it is stale.
    pub fn observe(&self, resource: &str, token: FencingToken) -> Result<(), Stale> {
        let mut table = self.table();
        table.clock += 1;
        let now = table.clock;
        if let Some((seen, at)) = table.newest.get_mut(resource) {
            if *seen > token {
                return Err(Stale::Newer(*seen));
            }
            (*seen, *at) = (token, now);
            return Ok(());
        }
        table.above_floor(token)?;
        if table.newest.len() >= table.max {
            table.forget_least_recent();
            // The floor may have passed the new token.
            table.above_floor(token)?;
        }
        table.newest.insert(resource.into(), (token, now));
        Ok(())
    }

    /// The newest token seen for `resource`, if it is remembered.
    pub fn newest(&self, resource: &str) -> Option<FencingToken> {
        self.table().newest.get(resource).map(|(token, _)| *token)
    }

    /// The highest token of a forgotten resource.
    pub fn floor(&self) -> Option<FencingToken> {
        self.table().floor
    }

    /// Resources remembered.
    pub fn len(&self) -> usize {
        self.table().newest.len()
    }

    /// No resource remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Table {
    fn above_floor(&self, token: FencingToken) -> Result<(), Stale> {
        match self.floor {
            Some(floor) if token <= floor => {
                crate::telemetry::below_floor();
                Err(Stale::AtOrBelowFloor(floor))
            }
            _ => Ok(()),
        }
    }

    /// Forgets the sixteenth of the table seen least recently (one scan per
    /// sixteenth of inserts) and raises the floor to the highest token
    /// forgotten.
    fn forget_least_recent(&mut self) {
        let mut seen: Vec<u64> = self.newest.values().map(|(_, at)| *at).collect();
        let nth = (seen.len() / 16).min(seen.len() - 1);
        let (_, last_forgotten, _) = seen.select_nth_unstable(nth);
        let last_forgotten = *last_forgotten;
        let before = self.newest.len();
        let mut highest = self.floor;
        self.newest.retain(|_, (token, at)| {
            let keep = *at > last_forgotten;
            if !keep {
                highest = highest.max(Some(*token));
            }
            keep
        });
        crate::telemetry::forgotten(before - self.newest.len());
        self.floor = highest;
    }
}

impl fmt::Debug for NewestTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let table = self.table();
        f.debug_struct("NewestTokens")
            .field("resources", &table.newest.len())
            .field("max", &table.max)
            .field("floor", &table.floor)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u64) -> FencingToken {
        FencingToken::new(n)
    }

    #[test]
    fn a_full_table_never_lets_a_forgotten_resources_stale_token_pass() {
        let newest = NewestTokens::bounded(64);
        for i in 0..10_000u64 {
            // Tokens rise with time across resources, as the stores mint them.
            newest.observe(&format!("r{i}"), t(1_000 + i)).unwrap();
            assert!(newest.len() <= 64);
        }
        // Every resource's own token, or an older one, is refused now:
        // remembered ones see a newer or equal token; forgotten ones, the floor.
        for i in 0..10_000u64 {
            let older = t(1_000 + i - 1);
            assert!(newest.observe(&format!("r{i}"), older).is_err(), "r{i}");
        }
        assert!(newest.len() <= 64);
    }

    #[test]
    fn a_token_above_the_floor_is_accepted_for_an_unknown_resource() {
        let newest = NewestTokens::bounded(16);
        for i in 0..17u64 {
            newest.observe(&format!("r{i}"), t(i + 1)).unwrap();
        }
        let floor = newest.floor().expect("one was forgotten");
        assert_eq!(
            newest.observe("new", floor),
            Err(Stale::AtOrBelowFloor(floor))
        );
        assert_eq!(newest.observe("new", t(floor.get() + 1)), Ok(()));
    }

    #[test]
    fn equal_tokens_pass_and_older_ones_do_not() {
        let newest = NewestTokens::default();
        newest.observe("a", t(5)).unwrap();
        newest.observe("a", t(5)).unwrap();
        assert_eq!(newest.observe("a", t(4)), Err(Stale::Newer(t(5))));
        assert_eq!(newest.newest("a"), Some(t(5)));
    }

    #[test]
    fn a_resource_written_often_is_kept_however_old_its_token() {
        let newest = NewestTokens::bounded(16);
        newest.observe("long-held", t(1)).unwrap();
        for i in 0..1_000u64 {
            newest.observe(&format!("r{i}"), t(100 + i)).unwrap();
            // The long-held lock writes again with the same token.
            newest.observe("long-held", t(1)).unwrap();
        }
        assert_eq!(newest.newest("long-held"), Some(t(1)));
        assert!(newest.len() <= 16);
    }

    #[test]
    fn a_table_of_one_holds_the_newest_resource() {
        let newest = NewestTokens::bounded(0);
        newest.observe("a", t(1)).unwrap();
        newest.observe("b", t(2)).unwrap();
        assert_eq!(newest.len(), 1);
        assert_eq!(newest.floor(), Some(t(1)));
    }
}
