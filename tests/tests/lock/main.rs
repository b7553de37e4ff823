//! Integration tests of lock-core against real servers the test kit starts:
//! the conformance suite on every store (memory, Redis alone, over TLS,
//! under Sentinel, as a Cluster, RedLock, etcd, ZooKeeper, PostgreSQL,
//! PgBouncer and MariaDB), and each store's own tests.

mod access;
mod api;
mod bounds;
mod cluster;
mod conformance;
mod etcd;
mod etcd_kit;
mod fence;
mod healing;
mod history;
mod macros;
mod metrics;
mod mysql;
mod postgres;
mod processes;
mod redis_only;
mod redlock;
mod replicas;
mod sentinel;
mod zookeeper;
mod zookeeper_kit;

/// Runs each conformance test on every store, in a module per store; the
/// tests of the lock family skip the stores that keep only the plain lock.
macro_rules! on_every_backend {
    (plain: [$($plain:ident),* $(,)?], family: [$($family:ident),* $(,)?] $(,)?) => {
        on_stores!(memory_backend, memory, $($plain,)* $($family,)*);
        on_stores!(redis_backend, redis, $($plain,)* $($family,)*);
        on_stores!(redis_tls_backend, redis_tls, $($plain,)* $($family,)*);
        on_stores!(redis_sentinel_backend, sentinel, $($plain,)* $($family,)*);
        on_stores!(redis_cluster_backend, cluster, $($plain,)* $($family,)*);
        on_stores!(redlock_backend, redlock, $($plain,)*);
        on_stores!(etcd_backend, etcd, $($plain,)* $($family,)*);
        on_stores!(zookeeper_backend, zookeeper, $($plain,)* $($family,)*);
        on_stores!(postgres_backend, postgres, $($plain,)* $($family,)*);
        on_stores!(pgbouncer_backend, pgbouncer, $($plain,)* $($family,)*);
        on_stores!(mysql_backend, mysql, $($plain,)* $($family,)*);
    };
}

/// The tests `$name` on the store `TestStore::$store()`, in module `$module`.
macro_rules! on_stores {
    ($module:ident, $store:ident, $($name:ident),* $(,)?) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    crate::conformance::$name(lock_testkit::TestStore::$store()).await;
                }
            )*
        }
    };
}

on_every_backend!(
    plain: [
        exclusion_between_tasks_and_lockers,
        inspection_shows_every_holder_and_force_release_frees_the_key,
        force_release_keeps_what_it_grants,
        tokens_strictly_increase,
        watchdog_keeps_a_short_lease,
        without_watchdog_the_lease_expires,
        an_unrenewed_lock_ends_at_its_ttl_beside_a_renewed_one,
        renewals_stop_on_release_and_drop,
        loss_is_told_when_the_lease_is_taken,
        waiters_wake_on_release,
        a_release_right_before_exit_wakes_waiters,
        wait_timeout_names_the_key,
        a_vanished_holder_ends_at_its_ttl,
        cancellation_leaves_no_lock,
        bad_keys_are_refused_and_odd_keys_work,
        reentrancy_is_task_scoped,
        try_lock_does_not_wait,
        if_held_skip_never_waits,
        hold_at_least_keeps_the_lock_after_an_early_release,
        an_election_publishes_hands_over_and_is_observed,
        run_as_leader_stops_the_body_on_loss_and_resigns_on_failure,
        leaders_fail_over_across_processes_behind_a_fence,
        a_scheduled_job_runs_once_per_tick_across_processes,
        a_scheduled_job_runs_once_per_tick_with_timers_2s_apart,
        max_hold_stops_renewal,
        waiters_per_key_are_bounded,
        the_local_deadline_ends_before_the_store_does,
        a_starved_watchdog_sends_no_renewal_after_the_deadline,
        waiting_does_not_poll_during_a_long_hold,
        multi_lock_transfers_neither_deadlock_nor_lose_money,
        multi_lock_takes_all_or_none,
        multi_lock_tokens_and_scope,
        multi_lock_loss_is_told,
        multi_lock_cancelled_gives_back_what_it_took,
    ],
    family: [
        tokens_rise_in_grant_order_across_kinds,
        semaphore_admits_its_permits_and_no_more,
        semaphore_bound_holds_under_contention,
        semaphore_permits_disagree_vanish_and_renew,
        semaphore_waiters_of_a_process_line_up,
        semaphore_cancellation_leaves_no_permit,
        striped_uses_every_segment_and_hands_on_the_freed_one,
        fair_grants_in_arrival_order,
        fair_requests_of_a_process_reach_the_store_in_call_order,
        fair_skips_a_cancelled_waiter_in_the_middle,
        fair_queue_survives_cancelled_and_vanished_waiters,
        fair_grants_follow_arrival_across_processes,
        a_killed_fair_waiter_process_delays_the_queue_by_its_ttl_at_most,
        readers_share_and_a_writer_excludes,
        a_waiting_writer_is_not_starved,
        a_waiting_writer_blocks_new_readers_on_every_locker,
        a_writer_behind_a_waiting_reader_of_its_locker_keeps_later_readers_out,
        rw_history_has_no_reader_beside_a_writer,
        read_inside_write_is_reentrant_and_upgrade_is_refused,
    ],
);
