//! `run` on PostgreSQL: exclusion across `distlock` processes, a `kill -9` of `distlock` takes
//! its command along (run_killed.rs's scenario), and a lease the operator releases by token
//! stops the command's whole process group with the lost code.

use std::process::{Command, Stdio};

use super::{server, token_shown};
use crate::common::{distlock, stderr};

#[test]
fn processes_exclude_each_other() {
    let server = server();
    let dir = tempfile::tempdir().expect("tempdir");
    let (inside, overlap, runs) = (
        dir.path().join("inside"),
        dir.path().join("overlap"),
        dir.path().join("runs"),
    );
    // `mkdir` fails if another command is inside: an overlap is recorded.
    let script = format!(
        "mkdir {inside} || touch {overlap}; echo x >> {runs}; sleep 0.3; rmdir {inside}",
        inside = inside.display(),
        overlap = overlap.display(),
        runs = runs.display()
    );
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_distlock"))
                .args([
                    "--url",
                    &server.url(),
                    "run",
                    "job:exclusive",
                    "--lease",
                    "5s",
                ])
                .args(["--wait", "30s", "--", "sh", "-c", &script])
                .env_remove("DISTLOCK_URL")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn distlock")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("distlock ends");
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert!(!overlap.exists(), "two commands ran at once");
    let count = std::fs::read_to_string(&runs)
        .expect("runs")
        .lines()
        .count();
    assert_eq!(count, 4, "every command ran");
}

#[test]
fn a_killed_distlock_takes_its_command_with_it() {
    let server = server();
    crate::run_killed::killed_run_takes_its_command(&["--url", &server.url()]);
}

#[test]
fn a_lease_released_by_the_operator_stops_the_command_group() {
    let server = server();
    let url = server.url();
    crate::run_killed::lost_lease_stops_the_group(&url, || {
        let token = token_shown(&url, "job:stolen");
        let out = distlock(
            std::slice::from_ref(&url),
            &["release", "job:stolen", "--token", &token],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    });
}
