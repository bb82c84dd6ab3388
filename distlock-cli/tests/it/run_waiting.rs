//! Waiters by name: a `distlock run` that waits for a held name is listed by `show` and `ls`
//! under that name (its host, pid and note, and since when), on every backend that keeps
//! notes, and no longer once it got the lock. Each test prints how long after the waiter
//! started it was listed.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use lock_testkit::{EtcdCluster, MariadbServer, PostgresServer, RedisServer, SeaweedfsServer};

use crate::common::{eventually, json, stdout};
use crate::run_lock_delay::Target;

const NAME: &str = "job:waited";

/// `distlock TARGET run NAME --note NOTE ARGS -- CMD...`, not waited for.
fn spawn_run(target: &Target, note: &str, args: &[&str], command: &[&str]) -> Child {
    target
        .command()
        .args(["run", NAME, "--note", note])
        .args(args)
        .arg("--")
        .args(command)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn distlock run")
}

/// The waiters `show --json` lists for [`NAME`].
fn waiting(target: &Target) -> Vec<serde_json::Value> {
    let doc = json(&target.output(&["--json", "show", NAME]));
    doc["locks"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|lock| lock["waiting"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// The scenario on `target`; answers how long after the waiter started it was listed.
fn a_waiting_run_is_listed_by_name(target: &Target) -> Duration {
    let mut first = spawn_run(target, "first", &["--lease", "2s"], &["sleep", "60"]);
    assert!(
        eventually(Duration::from_secs(15), || {
            json(&target.output(&["--json", "show", NAME]))["locks"]
                .as_array()
                .is_some_and(|locks| !locks.is_empty())
        }),
        "the first run never held {NAME}"
    );
    let started = Instant::now();
    let mut second = spawn_run(target, "second", &["--wait", "60s"], &["true"]);
    let pid = u64::from(second.id());
    let listed = eventually(Duration::from_secs(15), || {
        waiting(target)
            .iter()
            .any(|w| w["pid"] == pid && w["note"] == "second" && w["since_ms"].is_u64())
    });
    let after = started.elapsed();
    assert!(
        listed,
        "the waiting run is not listed: {:#?}",
        waiting(target)
    );
    let text = stdout(&target.output(&["show", NAME]));
    assert!(
        text.contains("waiting") && text.contains(&format!("pid {pid}")) && text.contains("second"),
        "{text}"
    );
    let ls = json(&target.output(&["--json", "ls"]));
    let row = crate::common::find(
        &ls,
        NAME,
        ls["locks"][0]["kind"].as_str().unwrap_or("mutex"),
    );
    assert!(
        row["waiting"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w["pid"] == pid)),
        "ls lists the waiter under {NAME}: {row:#}"
    );
    // The holder dies; its lease runs out; the waiter gets the lock, runs, and is gone.
    let _ = first.kill();
    let _ = first.wait();
    let status = second.wait().expect("the second run");
    assert!(status.success(), "the second run: {status:?}");
    assert!(
        eventually(Duration::from_secs(10), || {
            let doc = json(&target.output(&["--json", "ls"]));
            doc["locks"]
                .as_array()
                .is_some_and(|locks| locks.iter().all(|l| l["waiting"].is_null()))
        }),
        "a waiter still listed after its wait"
    );
    eprintln!("the waiting run was listed {after:?} after it started");
    after
}

#[test]
fn redis_a_waiting_run_is_listed_by_name() {
    let server = RedisServer::start().expect("redis-server");
    a_waiting_run_is_listed_by_name(&Target::url(server.url()));
}

#[test]
fn redlock_a_waiting_run_is_listed_by_name() {
    let (_servers, urls) = crate::run_backends::masters();
    a_waiting_run_is_listed_by_name(&Target::redlock(urls));
}

#[test]
fn postgres_a_waiting_run_is_listed_by_name() {
    let server = PostgresServer::start().expect("postgres");
    a_waiting_run_is_listed_by_name(&Target::migrated(server.url()));
}

#[test]
fn mariadb_a_waiting_run_is_listed_by_name() {
    let server = MariadbServer::start().expect("mariadb");
    a_waiting_run_is_listed_by_name(&Target::migrated(server.url()));
}

#[test]
fn etcd_a_waiting_run_is_listed_by_name() {
    let cluster = EtcdCluster::builder().members(1).start().expect("etcd");
    a_waiting_run_is_listed_by_name(&Target::url(crate::etcd::urls(&cluster).join(",")));
}

#[test]
fn s3_a_waiting_run_is_listed_by_name() {
    let server = SeaweedfsServer::start().expect("start seaweedfs");
    a_waiting_run_is_listed_by_name(&Target::s3(&server));
}
