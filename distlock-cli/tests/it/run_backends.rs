//! `run` and `run --leader` on etcd and on Redlock, through the same scenarios as on Redis
//! (`run_killed.rs`, `run_leader.rs`): commands under one lock never overlap across processes,
//! and the holder's `--note` shows in `ls` where the store keeps notes; a lease released by the
//! operator (`release --token`) stops the command's whole group with the "lost" code; a
//! `kill -9` of `distlock run` takes its command along; three candidates fail over.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lock_testkit::{EtcdCluster, RedisServer};

use crate::common::eventually;
use crate::run_killed::{alive, killed_run_takes_its_command, pid_in};
use crate::run_leader::three_candidates_fail_over;

/// `distlock TARGET ARGS...`, run to its end.
pub(crate) fn distlock_on(target: &[&str], args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_distlock"))
        .args(target)
        .args(args)
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_PREFIX")
        .stdin(Stdio::null())
        .output()
        .expect("run distlock")
}

/// `distlock TARGET run NAME ARGS -- sh -c SCRIPT`, not waited for.
fn spawn_run(target: &[&str], name: &str, args: &[&str], script: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_distlock"))
        .args(target)
        .args(["run", name])
        .args(args)
        .args(["--", "sh", "-c", script])
        .env_remove("DISTLOCK_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn distlock")
}

/// The lines the commands appended to `file`.
fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Three `run`s of one name at once, each with `--note`: their commands run one after the
/// other (each one's start and end lines are next to each other). With `notes`, `ls` shows
/// the running holder's note.
fn runs_never_overlap(target: &[&str], notes: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("runs");
    let mut runs: Vec<Child> = (0..3)
        .map(|i| {
            let script = format!(
                "echo start {i} >> {f}; sleep 0.4; echo end {i} >> {f}",
                f = file.display()
            );
            spawn_run(
                target,
                "job:exclusive",
                &[
                    "--lease",
                    "5s",
                    "--wait",
                    "30s",
                    "--note",
                    &format!("batch {i}"),
                ],
                &script,
            )
        })
        .collect();
    if notes {
        let mut seen = serde_json::Value::Null;
        assert!(
            eventually(Duration::from_secs(15), || {
                let listing = crate::common::json(&distlock_on(target, &["--json", "ls"]));
                seen = crate::common::locks(&listing)
                    .into_iter()
                    .find(|l| l["name"] == "job:exclusive")
                    .map(|l| l["holder"].clone())
                    .unwrap_or_default();
                seen["note"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("batch "))
            }),
            "the holder's note in ls: {seen:#}"
        );
        assert!(seen["pid"].as_u64().is_some(), "{seen:#}");
    }
    for run in &mut runs {
        let status = run.wait().expect("wait");
        assert!(status.success(), "{status:?}");
    }
    let lines = lines(&file);
    assert_eq!(lines.len(), 6, "{lines:?}");
    for pair in lines.chunks(2) {
        let who = pair[0].strip_prefix("start ").expect("a start first");
        assert_eq!(pair[1], format!("end {who}"), "overlap: {lines:?}");
    }
}

/// `run` with a child in its command; the operator releases the lease with its token (read
/// from `ls`): distlock exits with the lost code, and the command's child is stopped too.
fn released_lease_stops_the_group(target: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let child = dir.path().join("child.pid");
    let script = format!("sleep 1000 & echo $! > {}; wait", child.display());
    let mut run = spawn_run(
        target,
        "job:released",
        &["--lease", "2s", "--kill-after", "1s"],
        &script,
    );
    let child_pid = pid_in(&child);
    let listing = crate::common::json(&distlock_on(target, &["--json", "ls", "job:released"]));
    let token = crate::common::find(&listing, "job:released", "mutex")["token"]
        .as_str()
        .expect("a token")
        .to_owned();
    let released = distlock_on(target, &["release", "job:released", "--token", &token]);
    assert!(
        released.status.success(),
        "{}",
        crate::common::stderr(&released)
    );
    let at = Instant::now();
    let mut status = None;
    // Bounded: the lease (found lost at the next renewal), the grace, and a margin.
    assert!(eventually(Duration::from_secs(10), || {
        status = run.try_wait().expect("wait");
        status.is_some()
    }));
    eprintln!("stopped {:?} after the release", at.elapsed());
    assert_eq!(status.and_then(|s| s.code()), Some(124), "the lost code");
    assert!(
        eventually(Duration::from_secs(2), || !alive(child_pid)),
        "the command's child (pid {child_pid}) outlived the lost lease"
    );
}

/// `--url` with every etcd member, as `etcd://`.
fn etcd_url(cluster: &EtcdCluster) -> String {
    crate::etcd::urls(cluster).join(",")
}

#[test]
fn etcd_runs_never_overlap_and_their_notes_show() {
    let cluster = EtcdCluster::builder().members(3).start().expect("etcd");
    runs_never_overlap(&["--url", &etcd_url(&cluster)], true);
}

#[test]
fn etcd_a_released_lease_stops_the_group() {
    let cluster = EtcdCluster::builder().members(3).start().expect("etcd");
    released_lease_stops_the_group(&["--url", &etcd_url(&cluster)]);
}

#[test]
fn etcd_a_killed_run_takes_its_command_along() {
    let cluster = EtcdCluster::builder().members(3).start().expect("etcd");
    killed_run_takes_its_command(&["--url", &etcd_url(&cluster)]);
}

#[test]
fn etcd_three_candidates_fail_over_and_ls_shows_the_election() {
    let cluster = EtcdCluster::builder().members(3).start().expect("etcd");
    let url = etcd_url(&cluster);
    let target = ["--url", url.as_str()];
    let failover = three_candidates_fail_over(&target, "cron:etcd", true);
    eprintln!("etcd failover after kill -9: {failover:?}");
}

#[test]
fn etcd_ls_shows_an_election_with_its_leader() {
    let cluster = EtcdCluster::builder().members(3).start().expect("etcd");
    let url = etcd_url(&cluster);
    let target = ["--url", url.as_str()];
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("starts");
    let mut candidate =
        crate::run_leader::candidate_on(&target, "cron:shown", &file, &["--value", "pod-x"]);
    let start = crate::run_leader::wait_starts(&file, 1, Duration::from_secs(15))[0];
    let listing = crate::common::json(&distlock_on(&target, &["--json", "ls"]));
    let election = crate::common::find(&listing, "cron:shown", "election");
    assert_eq!(election["leader"]["value"], "pod-x", "{election:#}");
    assert_eq!(election["leader"]["term"], start.term);
    let _ = candidate.kill();
    let _ = candidate.wait();
}

/// Three Redis masters, and the `--redlock --url a,b,c` arguments naming them.
pub(crate) fn masters() -> (Vec<RedisServer>, String) {
    let servers: Vec<RedisServer> = (0..3)
        .map(|_| RedisServer::start().expect("redis-server"))
        .collect();
    let urls = servers
        .iter()
        .map(RedisServer::url)
        .collect::<Vec<_>>()
        .join(",");
    (servers, urls)
}

#[test]
fn redlock_runs_never_overlap() {
    let (_servers, urls) = masters();
    runs_never_overlap(&["--redlock", "--url", &urls], false);
}

#[test]
fn redlock_a_released_lease_stops_the_group() {
    let (_servers, urls) = masters();
    released_lease_stops_the_group(&["--redlock", "--url", &urls]);
}

#[test]
fn redlock_three_candidates_fail_over() {
    let (_servers, urls) = masters();
    let failover =
        three_candidates_fail_over(&["--redlock", "--url", &urls], "cron:redlock", false);
    eprintln!("Redlock failover after kill -9: {failover:?}");
}

#[test]
fn redlock_leader_shows_the_value() {
    let (_servers, urls) = masters();
    let target = ["--redlock", "--url", urls.as_str()];
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("starts");
    let mut candidate =
        crate::run_leader::candidate_on(&target, "cron:shown", &file, &["--value", "pod-r"]);
    let start = crate::run_leader::wait_starts(&file, 1, Duration::from_secs(15))[0];
    let shown = crate::run_leader::leader_doc(&target, "cron:shown");
    let _ = candidate.kill();
    let _ = candidate.wait();
    assert_eq!(shown["leader"]["value"], "pod-r", "{shown:#}");
    assert_eq!(shown["leader"]["term"], start.term, "{shown:#}");
}
