//! What the etcd and ZooKeeper backends share: the table of the entries a
//! backend holds or waits with, with the reaper that ends unrenewed ones
//! at their ttl ([`held`]), and requests asked for together ([`rounds`]).

mod held;
mod rounds;

pub(crate) use self::held::{Delete, Entry, Held, Leased, reap};
pub(crate) use self::rounds::{Round, RoundsTask};
