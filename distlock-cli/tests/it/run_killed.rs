//! `run` whose `distlock` process is killed outright (`kill -9`, as the OOM killer or a
//! container runtime would): the command and everything it started die with it, so a second
//! `run` that gets the lock at the end of the lease never overlaps the first command. And a
//! lost lease stops the command's children, not only the command.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lock_testkit::RedisServer;

use crate::common::eventually;

/// Whether process `pid` is alive (a zombie, already dead, counts as gone).
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// The pid the command wrote into `file`, once it has.
pub(crate) fn pid_in(file: &Path) -> u32 {
    assert!(
        eventually(Duration::from_secs(15), || std::fs::read_to_string(file)
            .is_ok_and(|s| s.trim().parse::<u32>().is_ok())),
        "the command wrote {}",
        file.display()
    );
    std::fs::read_to_string(file)
        .expect("pid file")
        .trim()
        .parse()
        .expect("a pid")
}

/// `distlock TARGET run NAME --lease 2s -- sh -c SCRIPT`, not waited for; `target` names the
/// store (`--url ...`, and `--redlock` for Redlock).
pub(crate) fn run_on(target: &[&str], name: &str, script: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_distlock"))
        .args(target)
        .args(["run", name, "--lease", "2s", "--wait", "20s", "--"])
        .args(["sh", "-c", script])
        .env_remove("DISTLOCK_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn distlock")
}

#[test]
fn a_killed_distlock_takes_its_command_and_its_children_with_it() {
    let server = RedisServer::start().expect("redis-server");
    killed_run_takes_its_command(&["--url", &server.url()]);
}

/// `run` on the store `target` names, killed with SIGKILL: its command and the command's child
/// die with it, and a second `run` gets the lock once the lease ends, after the first command
/// stopped.
pub(crate) fn killed_run_takes_its_command(target: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (shell, child, beat) = (
        dir.path().join("shell.pid"),
        dir.path().join("child.pid"),
        dir.path().join("beat"),
    );
    // A shell that starts a child of its own and beats every 50 ms.
    let script = format!(
        "echo $$ > {shell}; sleep 1000 & echo $! > {child}; while :; do date > {beat}; sleep 0.05; done",
        shell = shell.display(),
        child = child.display(),
        beat = beat.display()
    );
    let mut first = run_on(target, "job:killed", &script);
    let (shell_pid, child_pid) = (pid_in(&shell), pid_in(&child));
    assert!(alive(shell_pid) && alive(child_pid));

    first.kill().expect("SIGKILL distlock by its PID");
    let killed = Instant::now();
    let _ = first.wait();
    assert!(
        eventually(Duration::from_secs(2), || !alive(shell_pid)
            && !alive(child_pid)),
        "the command (pid {shell_pid}) or its child (pid {child_pid}) outlived distlock"
    );
    eprintln!(
        "the command's group was gone {:?} after the kill",
        killed.elapsed()
    );

    // The lock is still held until its lease runs out; a second run gets it then and finds
    // the first command's beat stopped.
    let stopped_at = std::fs::metadata(&beat)
        .and_then(|m| m.modified())
        .expect("beat");
    let second_beat = dir.path().join("second");
    let mut second = run_on(
        target,
        "job:killed",
        &format!("date > {}", second_beat.display()),
    );
    assert!(
        eventually(Duration::from_secs(15), || second_beat.exists()),
        "the second run got the lock"
    );
    let _ = second.wait();
    let after = std::fs::metadata(&beat)
        .and_then(|m| m.modified())
        .expect("beat");
    assert_eq!(
        after, stopped_at,
        "the first command beat on after distlock died"
    );
    assert!(
        std::fs::metadata(&second_beat)
            .and_then(|m| m.modified())
            .expect("second")
            > stopped_at,
        "the second command ran after the first stopped"
    );
}

#[test]
fn a_lost_lease_stops_the_commands_children_too() {
    let server = RedisServer::start().expect("redis-server");
    lost_lease_stops_the_group(&server.url(), || {
        server
            .command(&["SET", "job:stolen", "stolen", "PX", "60000"])
            .expect("take the key away");
    });
}

/// `distlock run job:stolen` on the store at `url` loses its lease when `steal` runs (once the
/// command started): distlock exits with the lost code, and the command's child is stopped too.
pub(crate) fn lost_lease_stops_the_group(url: &str, steal: impl FnOnce()) {
    let dir = tempfile::tempdir().expect("tempdir");
    let child = dir.path().join("child.pid");
    let script = format!("sleep 1000 & echo $! > {}; wait", child.display());
    let mut first = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .args([
            "--url",
            url,
            "run",
            "job:stolen",
            "--lease",
            "2s",
            "--kill-after",
            "1s",
            "--",
        ])
        .args(["sh", "-c", &script])
        .env_remove("DISTLOCK_URL")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn distlock");
    let child_pid = pid_in(&child);
    steal();
    let mut status = None;
    // Bounded: the lease (detection at the next renewal), the grace, and a margin.
    assert!(eventually(Duration::from_secs(10), || {
        status = first.try_wait().expect("wait");
        status.is_some()
    }));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(124),
        "distlock exits with the lost code"
    );
    assert!(
        eventually(Duration::from_secs(2), || !alive(child_pid)),
        "the command's child (pid {child_pid}) outlived the lost lease"
    );
}
