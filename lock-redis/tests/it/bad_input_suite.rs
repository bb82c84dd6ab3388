//! The bad-input suite: one table of cases — bad names, TTLs and waits; foreign keys and
//! flushed scripts; stale and forged leases; wrong credentials and rights; Redis down, slow or
//! cut off mid-reply — each with the typed answer it must give.
//!
//! Every row runs on a fresh redis-server of its own, bounded in time, and is then checked
//! for the same things: no panic, the expected `LockError` variant (or answer), no lock key
//! left on the server, and a locker that still works. A failure lists every row that broke a
//! rule; the run prints the table with what each row gave and how long it took.

#[macro_use]
mod harness;
mod access;
mod data;
mod faults;
mod names;
mod ops;

use std::collections::HashSet;

use harness::{Expect, run_table};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_ttls_and_waits() {
    run_table("names, TTLs and waits", names::cases()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_keys_scripts_and_stale_leases() {
    run_table("keys, scripts and leases", data::cases()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_rights_and_configuration() {
    run_table("credentials and configuration", access::cases()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_slow_and_cut_off() {
    run_table("faults", faults::cases()).await;
}

#[test]
fn the_table_has_at_least_30_bad_inputs_with_distinct_names() {
    let all: Vec<_> = [
        names::cases(),
        data::cases(),
        access::cases(),
        faults::cases(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut names = HashSet::new();
    for case in &all {
        assert!(names.insert(case.name), "{:?} appears twice", case.name);
        assert!(
            !case.input.is_empty(),
            "{:?} says what it feeds in",
            case.name
        );
    }
    // Rows that expect success are controls (limits that must work); the rest are failures
    // that must be typed.
    let failing = all
        .iter()
        .filter(|c| !matches!(c.expect, Expect::Ok(_)))
        .count();
    assert!(failing >= 30, "only {failing} failing cases");
}
