//! The Lua scripts of the Redis backend, each whole in its own `.lua` file
//! beside this one and built once into a `redis::Script` (EVALSHA, reloaded
//! on NOSCRIPT by redis-rs).
//!
//! Keys of one lock: the lease, valued `1|<owner>|<token>` with a PX ttl, plus
//! `|w` once another client has found it held (a waiter: only then does the
//! release publish); and the token record, the newest token, which every
//! acquire writes and keeps until the server clock is 10 s past it. Tokens
//! are `max(last + 1, server time in microseconds)`, so they keep rising
//! after a restart without persistence or a promotion of a replica that
//! missed the last writes (the clock kept moving), and when the server's
//! clock steps back by up to 10 s (the record still holds every token the
//! clock could fall behind). A release touches the lease alone: its
//! token's record was written by its acquire.
//!
//! The scripts run on every lock and release, so they are written for the
//! server's CPU (counted with callgrind): no helper closures (each costs a
//! Lua allocation per call, so shared conditions are repeated in each file),
//! no `string.format` on the common path, and a token built from TIME's
//! digits instead of parsed and printed back.
//!
//! The other kinds of lock keep their leases as entries of a hash beside
//! the lease name (`permit_acquire.lua`, `fair_acquire.lua`,
//! `rw_acquire.lua`), one hash per kind, and mint from the same token
//! record, passing the plain lock's token too: one token line per key.

use std::sync::LazyLock;

use redis::Script;

/// Takes a lease (`acquire.lua`).
pub(super) static ACQUIRE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/acquire.lua")));

/// Extends a lease its owner holds (`renew.lua`).
pub(super) static RENEW_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/renew.lua")));

/// Ends a lease its owner holds and tells its waiters (`release.lua`).
pub(super) static RELEASE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/release.lua")));

/// Acquires and releases of many locks in one call (`batch.lua`).
pub(super) static BATCH_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/batch.lua")));

/// Takes one of a semaphore's permits (`permit_acquire.lua`).
pub(super) static PERMIT_ACQUIRE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/permit_acquire.lua")));

/// Extends a lease kept as a hash entry: a permit, a segment, a fair
/// lock's or a read-write lock's (`entry_renew.lua`).
pub(super) static ENTRY_RENEW_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/entry_renew.lua")));

/// Gives back a permit and tells waiters (`permit_release.lua`).
pub(super) static PERMIT_RELEASE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/permit_release.lua")));

/// Takes a fair lock in arrival order or keeps a queue entry (`fair_acquire.lua`).
pub(super) static FAIR_ACQUIRE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/fair_acquire.lua")));

/// Ends a fair lock's lease or queue entry (`fair_release.lua`).
pub(super) static FAIR_RELEASE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/fair_release.lua")));

/// Takes a read or write lease, or marks a waiting writer (`rw_acquire.lua`).
pub(super) static RW_ACQUIRE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/rw_acquire.lua")));

/// Ends a read or write lease, or a writer's mark (`rw_release.lua`).
pub(super) static RW_RELEASE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/rw_release.lua")));

/// Raises the token of a lease to the one a RedLock quorum agreed on
/// (`raise.lua`).
pub(super) static RAISE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/raise.lua")));

/// Every holder and queue entry of a key, for operators.
pub(super) static INSPECT_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/inspect.lua")));

/// Ends one owner's lease, for a force-release over RedLock's masters.
pub(super) static FORCE_RELEASE_OWNER_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/force_release_owner.lua")));

/// Removes every holder and queue entry of a key, for operators.
pub(super) static FORCE_RELEASE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/force_release.lua")));
