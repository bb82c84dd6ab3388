//! `distlock revoke` against `distlock run` on every backend that can name a grant: the holder
//! is told at its next renewal, stops its command and releases (exit 124), so a waiting run gets
//! the lock at once; with `--ignore-revocation` the holder keeps it. Each test prints how long
//! the request took to reach the holder (the figure the docs quote).

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use lock_testkit::{EtcdCluster, MariadbServer, PostgresServer, RedisServer, SeaweedfsServer};

use crate::common::stderr;
use crate::run_killed::pid_in;
use crate::run_lock_delay::Target;

/// `distlock TARGET run NAME --lease 3s ARGS -- sh -c SCRIPT`, its stderr kept.
fn spawn_run(target: &Target, name: &str, args: &[&str], script: &str) -> Child {
    target
        .command()
        .args(["run", name, "--lease", "3s", "--wait", "30s"])
        .args(args)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn distlock")
}

/// The scenario on `target`; answers how long the request took to end the holder's run.
fn a_revoked_run_gives_the_lock_up(target: &Target) -> Duration {
    let dir = tempfile::tempdir().expect("tempdir");
    let started = dir.path().join("started");
    let mut holder = spawn_run(
        target,
        "job:revoked",
        &[],
        &format!("echo $$ > {}; sleep 1000", started.display()),
    );
    pid_in(&started);
    let asked = target.output(&["revoke", "job:revoked", "--note", "maintenance"]);
    assert!(asked.status.success(), "{}", stderr(&asked));
    let at = Instant::now();
    // Looked at every 2 ms (bounded by 15 s), so the figure is the delivery's, not the poll's.
    while at.elapsed() < Duration::from_secs(15) && matches!(holder.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let took = at.elapsed();
    assert!(
        matches!(holder.try_wait(), Ok(Some(_))),
        "the revoked run did not end"
    );
    let out = holder.wait_with_output().expect("the holder's output");
    assert_eq!(out.status.code(), Some(124), "the lost code");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("asked to give the lock") && said.contains("maintenance"),
        "{said}"
    );
    // Released, not left to its lease: a run that tries once gets it.
    let next = target.output(&["run", "job:revoked", "--wait", "0s", "--", "true"]);
    assert!(next.status.success(), "{}", stderr(&next));
    // Nobody holds it now: nobody to ask.
    let nobody = target.output(&["revoke", "job:revoked"]);
    assert_eq!(nobody.status.code(), Some(1));

    // --ignore-revocation keeps the lock.
    let kept = dir.path().join("kept");
    let mut stubborn = spawn_run(
        target,
        "job:kept",
        &["--ignore-revocation"],
        &format!("echo $$ > {}; sleep 1000", kept.display()),
    );
    pid_in(&kept);
    let asked = target.output(&["revoke", "job:kept", "--note", "drain"]);
    assert!(asked.status.success(), "{}", stderr(&asked));
    std::thread::sleep(Duration::from_millis(2500)); // two renewals of its 3 s lease
    assert!(
        matches!(stubborn.try_wait(), Ok(None)),
        "a run that ignores revocation ended"
    );
    let busy = target.output(&["run", "job:kept", "--wait", "0s", "--", "true"]);
    assert_eq!(busy.status.code(), Some(75), "{}", stderr(&busy));
    // Operators see the pending request on the hold's own row, not a lock of its own.
    let listing = crate::common::json(&target.output(&["--json", "ls"]));
    let names: Vec<&str> = listing["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .filter_map(|l| l["name"].as_str())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains(":distlock-revoke")),
        "{names:?}"
    );
    let kept_row = crate::common::find(&listing, "job:kept", "mutex");
    assert!(
        kept_row["revocation"]["fencing_token"].is_u64(),
        "{kept_row:#}"
    );
    let shown = crate::common::json(&target.output(&["--json", "show", "job:kept"]));
    assert!(
        shown["locks"][0]["revocation"]["fencing_token"].is_u64(),
        "{shown:#}"
    );
    let _ = stubborn.kill();
    let _ = stubborn.wait();
    eprintln!("the revoked run ended {took:?} after `distlock revoke` (lease 3s)");
    took
}

#[test]
fn redis_a_revoked_run_gives_the_lock_up() {
    let server = RedisServer::start().expect("redis-server");
    a_revoked_run_gives_the_lock_up(&Target::url(server.url()));
}

#[test]
fn postgres_a_revoked_run_gives_the_lock_up() {
    let server = PostgresServer::start().expect("postgres");
    a_revoked_run_gives_the_lock_up(&Target::migrated(server.url()));
}

#[test]
fn mariadb_a_revoked_run_gives_the_lock_up() {
    let server = MariadbServer::start().expect("mariadb");
    a_revoked_run_gives_the_lock_up(&Target::migrated(server.url()));
}

#[test]
fn etcd_a_revoked_run_gives_the_lock_up() {
    let cluster = EtcdCluster::builder().members(1).start().expect("etcd");
    a_revoked_run_gives_the_lock_up(&Target::url(crate::etcd::urls(&cluster).join(",")));
}

#[test]
fn s3_a_revoked_run_gives_the_lock_up() {
    let server = SeaweedfsServer::start().expect("start seaweedfs");
    a_revoked_run_gives_the_lock_up(&Target::s3(&server));
}

#[test]
fn redlock_refuses_revoke() {
    let (_servers, urls) = crate::run_backends::masters();
    let target = Target::redlock(urls);
    let refused = target.output(&["revoke", "job:any"]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("revocation"),
        "{}",
        stderr(&refused)
    );
}
