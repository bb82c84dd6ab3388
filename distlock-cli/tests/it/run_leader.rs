//! `run --leader`: candidates campaign, the leader's command runs with its term, a lost
//! leadership stops the command's whole group and the candidate campaigns again, and a
//! `kill -9` of the leading `distlock` takes its command with it (the guardian) while another
//! candidate takes over within the lease and a second. `--once` keeps the single-run exit.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lock_testkit::RedisServer;

use crate::common::eventually;

/// One start of the command: the shell's pid, its `sleep` child's pid, the term it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Start {
    pub(crate) shell: u32,
    pub(crate) child: u32,
    pub(crate) term: u64,
}

/// The starts the commands wrote to `file`, in order.
pub(crate) fn starts(file: &Path) -> Vec<Start> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace().map(str::parse::<u64>);
            let (Some(Ok(shell)), Some(Ok(child)), Some(Ok(term))) =
                (words.next(), words.next(), words.next())
            else {
                return None;
            };
            Some(Start {
                shell: u32::try_from(shell).ok()?,
                child: u32::try_from(child).ok()?,
                term,
            })
        })
        .collect()
}

/// Whether process `pid` is alive (a zombie counts as gone).
pub(crate) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

/// The parent of process `pid` (the `distlock` that started a command).
pub(crate) fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Waits (at most `limit`) until `file` holds `count` starts; returns them.
pub(crate) fn wait_starts(file: &Path, count: usize, limit: Duration) -> Vec<Start> {
    let mut seen = Vec::new();
    let came = eventually(limit, || {
        seen = starts(file);
        seen.len() >= count
    });
    assert!(came, "{count} starts within {limit:?}; saw {seen:?}");
    seen
}

/// A candidate: `distlock run NAME --leader --lease 2s --kill-after 1s ARGS -- sh -c SCRIPT`, where
/// the command appends its start to `file` and waits on a child.
fn candidate(url: &str, name: &str, file: &Path, extra: &[&str]) -> Child {
    candidate_on(&["--url", url], name, file, extra)
}

/// [`candidate`] on the store `target` names (`--url ...`, and `--redlock` for Redlock).
pub(crate) fn candidate_on(target: &[&str], name: &str, file: &Path, extra: &[&str]) -> Child {
    let script = format!(
        "sleep 1000 & echo \"$$ $! $DISTLOCK_TERM\" >> {}; wait",
        file.display()
    );
    Command::new(env!("CARGO_BIN_EXE_distlock"))
        .args(target)
        .args(["run", name, "--leader", "--lease", "2s"])
        .args(["--kill-after", "1s"])
        .args(extra)
        .args(["--", "sh", "-c", &script])
        .env_remove("DISTLOCK_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn distlock")
}

/// Kills the candidates still running, by their PIDs (their guardians end the commands).
pub(crate) fn end_all(candidates: &mut [Child]) {
    for c in candidates {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// The leading candidate (the one that started `leading`) is killed outright (`kill -9`): its
/// command and the command's child die with it, and another candidate leads within the lease
/// (2 s) and a second, with a larger term: the `nth` start in `file`. The candidates left, and
/// that start.
pub(crate) fn killed_leader_is_replaced(
    candidates: Vec<Child>,
    file: &Path,
    leading: Start,
    nth: usize,
) -> (Vec<Child>, Start) {
    let leader_pid = parent(leading.shell).expect("the leading distlock");
    let (mut killed, others): (Vec<Child>, Vec<Child>) =
        candidates.into_iter().partition(|c| c.id() == leader_pid);
    assert_eq!(killed.len(), 1, "the leader is one of the candidates");
    killed[0].kill().expect("SIGKILL the leading distlock");
    let at = Instant::now();
    let _ = killed[0].wait();
    assert!(
        eventually(Duration::from_secs(2), || !alive(leading.shell)
            && !alive(leading.child)),
        "the killed leader's command outlived it"
    );
    let next = wait_starts(file, nth, Duration::from_secs(3))[nth - 1];
    let failover = at.elapsed();
    assert!(
        failover <= Duration::from_secs(3),
        "a new leader within lease + 1 s; took {failover:?}"
    );
    assert!(
        next.term > leading.term,
        "terms grow: {leading:?} then {next:?}"
    );
    let new_leader = parent(next.shell);
    assert!(
        others.iter().any(|c| Some(c.id()) == new_leader),
        "a surviving candidate leads"
    );
    eprintln!("failover after kill -9: {failover:?}");
    (others, next)
}

#[test]
fn candidates_hand_the_leadership_on_and_a_killed_leader_takes_its_command_along() {
    let server = RedisServer::start().expect("redis-server");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("starts");
    let name = "cron:leader";
    let mut candidates = vec![
        candidate(&server.url(), name, &file, &[]),
        candidate(&server.url(), name, &file, &[]),
    ];
    let first = wait_starts(&file, 1, Duration::from_secs(15))[0];

    // The leadership is taken away: the leader's command and its child are stopped, and the
    // candidates campaign on; one leads again, with a larger term, once the key expires.
    server
        .command(&["SET", name, "stolen", "PX", "1500"])
        .expect("take the key away");
    let second = wait_starts(&file, 2, Duration::from_secs(15))[1];
    assert!(
        !alive(first.shell) && !alive(first.child),
        "the first term's command (or its child) outlived the lost leadership"
    );
    assert!(
        second.term > first.term,
        "terms grow: {first:?} then {second:?}"
    );
    for c in &mut candidates {
        assert!(
            c.try_wait().expect("try_wait").is_none(),
            "a candidate exited instead of campaigning again"
        );
    }

    // The leading distlock is killed outright: its command dies with it, and the other
    // candidate leads within the lease (2 s) and a second.
    let (mut others, third) = killed_leader_is_replaced(candidates, &file, second, 3);
    assert_eq!(
        parent(third.shell),
        Some(others[0].id()),
        "the survivor leads"
    );
    end_all(&mut others);
}

#[test]
fn once_exits_with_the_lost_code_and_wait_needs_once() {
    let server = RedisServer::start().expect("redis-server");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("starts");
    let name = "cron:once";
    let mut once = candidate(&server.url(), name, &file, &["--once", "--wait", "10s"]);
    let start = wait_starts(&file, 1, Duration::from_secs(15))[0];
    server
        .command(&["SET", name, "stolen", "PX", "60000"])
        .expect("take the key away");
    let mut status = None;
    // Bounded: the lease (found at the next renewal), the grace, and a margin.
    assert!(eventually(Duration::from_secs(10), || {
        status = once.try_wait().expect("try_wait");
        status.is_some()
    }));
    assert_eq!(status.and_then(|s| s.code()), Some(124), "the lost code");
    assert!(!alive(start.shell) && !alive(start.child));
    assert_eq!(starts(&file).len(), 1, "--once campaigned only once");

    // --wait bounds a single campaign only.
    let output = crate::common::distlock(
        &[server.url()],
        &["run", name, "--leader", "--wait", "1s", "--", "true"],
    );
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        crate::common::stderr(&output)
    );
}

#[test]
fn leader_names_the_candidate_that_leads() {
    let server = RedisServer::start().expect("redis-server");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("starts");
    let name = "cron:shown";
    let urls = [server.url()];
    let nobody = crate::common::distlock(&urls, &["--json", "leader", name]);
    assert_eq!(
        crate::common::json(&nobody)["leader"],
        serde_json::Value::Null
    );

    let mut candidates = vec![candidate(&server.url(), name, &file, &["--value", "pod-a"])];
    let start = wait_starts(&file, 1, Duration::from_secs(15))[0];
    let doc = crate::common::json(&crate::common::distlock(&urls, &["--json", "leader", name]));
    assert_eq!(doc["leader"]["term"], start.term, "{doc:#}");
    assert_eq!(doc["leader"]["value"], "pod-a", "{doc:#}");
    assert!(doc["leader"]["since_ms"].as_u64().is_some(), "{doc:#}");
    let text = crate::common::distlock(&urls, &["leader", name]);
    let shown = crate::common::stdout(&text);
    assert!(
        shown.contains(&start.term.to_string()) && shown.contains("pod-a"),
        "{shown}"
    );
    end_all(&mut candidates);
}

/// Three candidates for `name` on the store `target` names: one leads; when its `distlock` is
/// killed outright, its command dies with it and another leads within the lease (2 s) and a
/// second, with a larger term. With `names_leader`, `leader NAME` names the leader's value
/// meanwhile. Returns the failover time.
pub(crate) fn three_candidates_fail_over(
    target: &[&str],
    name: &str,
    names_leader: bool,
) -> Duration {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("starts");
    let mut candidates: Vec<Child> = ["pod-a", "pod-b", "pod-c"]
        .iter()
        .map(|value| candidate_on(target, name, &file, &["--value", value]))
        .collect();
    let first = wait_starts(&file, 1, Duration::from_secs(15))[0];
    let leader_pid = parent(first.shell).expect("the leading distlock");
    let position = candidates
        .iter()
        .position(|c| c.id() == leader_pid)
        .expect("the leader is a candidate");
    if names_leader {
        let shown = leader_doc(target, name);
        assert_eq!(
            shown["leader"]["value"],
            ["pod-a", "pod-b", "pod-c"][position],
            "{shown:#}"
        );
        assert_eq!(shown["leader"]["term"], first.term, "{shown:#}");
    }

    let mut killed = candidates.remove(position);
    killed.kill().expect("SIGKILL the leading distlock");
    let at = Instant::now();
    let _ = killed.wait();
    assert!(
        eventually(Duration::from_secs(2), || !alive(first.shell)
            && !alive(first.child)),
        "the killed leader's command outlived it"
    );
    let second = wait_starts(&file, 2, Duration::from_secs(3))[1];
    let failover = at.elapsed();
    assert!(
        failover <= Duration::from_secs(3),
        "a new leader within lease + 1 s; took {failover:?}"
    );
    assert!(
        second.term > first.term,
        "terms grow: {first:?} then {second:?}"
    );
    let leader_pid = parent(second.shell).expect("the new leading distlock");
    assert!(
        candidates.iter().any(|c| c.id() == leader_pid),
        "a survivor leads"
    );
    end_all(&mut candidates);
    failover
}

/// `distlock TARGET --json leader NAME`, parsed.
pub(crate) fn leader_doc(target: &[&str], name: &str) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .args(target)
        .args(["--json", "leader", name])
        .env_remove("DISTLOCK_URL")
        .stdin(Stdio::null())
        .output()
        .expect("run distlock");
    crate::common::json(&output)
}
