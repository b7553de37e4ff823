//! The fault suite: the lock under pauses, crashes, restarts, failover,
//! network delay and hostile input, against real redis-server, etcd,
//! ZooKeeper, PostgreSQL and MariaDB processes,
//! with lock clients as separate OS processes where the fault is about a
//! process. Each scenario checks its history with
//! `lock_testkit::history::check`.
//!
//! Two scenarios of the issue live with the lock tests because they need no
//! client process: the ambiguous acquire under `CLIENT PAUSE`
//! (`lock::redis_only::an_ambiguous_acquire_is_undone_by_owner_value`) and
//! the token and loss checks across a restart while held
//! (`lock::redis_only::tokens_rise_across_restart_without_persistence`);
//! scenario 8 here adds the restart under load.

mod campaign;
mod consensus;
mod harness;
mod mysql;
mod postgres;
mod scenarios;
