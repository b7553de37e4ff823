//! [`Leader`]: who leads an election, as the store has it now.

use std::time::Duration;

use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::error::{LockError, Operation};
use crate::inspect::Holder;
use crate::kind::LockKind;
use crate::locker::Locker;
use crate::owner;
use crate::token::FencingToken;

/// The leader of an election, read from the store by [`Locker::leader`]
/// and [`Locker::observe`] without campaigning.
///
/// ```
/// use lock_core::{LockError, Locker};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// let locker = Locker::builder().label("node-a").memory()?;
/// let leadership = locker.election("scheduler").value("10.0.0.7:8080").await?;
/// let leader = locker.leader("scheduler").await?.expect("node-a leads");
/// assert_eq!(leader.label.as_deref(), Some("node-a"));
/// assert_eq!(leader.value.as_deref(), Some("10.0.0.7:8080"));
/// assert_eq!(leader.token, leadership.token());
/// # leadership.resign().await
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// The election's key.
    pub key: String,
    /// The leadership's owner value: one per term.
    pub owner: String,
    /// The leading Locker's [`label`](crate::LockerBuilder::label) (the host
    /// name by default); `None` for an owner value lock-core did not make.
    pub label: Option<String>,
    /// The process that leads, `<label>/pid <pid>`; `None` for an owner
    /// value lock-core did not make.
    pub process: Option<String>,
    /// The value it published ([`Election::value`](crate::Election::value)).
    pub value: Option<String>,
    /// The fencing token of its term. On etcd, a candidate read just as it
    /// comes first, before its grant is written, shows the revision of its
    /// last write, below the token its grant gets.
    pub token: FencingToken,
    /// Time left on its lease unless renewed, where the store says.
    pub remaining: Option<Duration>,
}

impl Leader {
    fn of(key: &str, holder: Holder) -> Self {
        Leader {
            key: key.to_owned(),
            label: holder.label().map(str::to_owned),
            process: holder.process(),
            value: owner::value_of(&holder.owner),
            owner: holder.owner,
            token: holder.token,
            remaining: holder.remaining,
        }
    }
}

impl Locker {
    /// Who leads the election on `key` now, if anyone: one read of the
    /// store, no campaign.
    ///
    /// ```
    /// use lock_core::{LockError, Locker};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), LockError> {
    /// let locker = Locker::memory();
    /// assert!(locker.leader("scheduler").await?.is_none());
    /// let leadership = locker.election("scheduler").value("node-a").await?;
    /// let leader = locker.leader("scheduler").await?.expect("node-a leads");
    /// assert_eq!(leader.value.as_deref(), Some("node-a"));
    /// assert_eq!(leader.token, leadership.token());
    /// # leadership.resign().await
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn leader(&self, key: impl AsRef<str>) -> Result<Option<Leader>, LockError> {
        let key = key.as_ref();
        let keys = StoredKeys::new(self.namespace(), key)?;
        self.leader_of(&keys)
            .await
            .map_err(|err| LockError::from_store(key, Operation::Inspect, err))
    }

    /// The leader of the election on `keys`.
    pub(crate) async fn leader_of(&self, keys: &StoredKeys) -> Result<Option<Leader>, StoreError> {
        let inspection = self.backend().inspect(keys).await?;
        let holder = inspection
            .holders
            .into_iter()
            .find(|holder| holder.kind == LockKind::Exclusive);
        Ok(holder.map(|holder| Leader::of(keys.user(), holder)))
    }
}
