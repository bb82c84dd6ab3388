//! `run` with its lease stolen mid-run: the command is stopped (TERM) within the lease + 1 s,
//! never reaches the write it would have made later, and distlock exits with the "lost" code.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lock_testkit::{RedisCluster, RedisServer};

use crate::common::{eventually, query};

const LOST: i32 = 124;

fn stolen_mid_run(urls: &[String]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let started = dir.path().join("started");
    let late = dir.path().join("late");
    // Writes `started`, then `late` 20 s later unless it is stopped first.
    let script = format!(
        "touch {}; sleep 20; touch {}",
        started.display(),
        late.display()
    );
    let lease = Duration::from_secs(3);
    let mut child = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .args([
            "--url",
            &urls.join(","),
            "run",
            "batch:7",
            "--lease",
            "3s",
            "--kill-after",
            "1s",
            "--",
        ])
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn distlock");
    assert!(
        eventually(Duration::from_secs(15), || started.exists()),
        "the command started"
    );
    // Another holder takes the key.
    let _: () = query(
        urls,
        redis::cmd("SET")
            .arg("batch:7")
            .arg("dl:ffffffffffffffffffffffffffffffff")
            .arg("PX")
            .arg(60_000),
    );
    let stolen = Instant::now();
    let mut status = None;
    // Bounded: the lease (detection at the next renewal), the grace, and a generous margin.
    while stolen.elapsed() < lease + Duration::from_secs(10) {
        if let Some(s) = child.try_wait().expect("wait") {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let stopped_after = stolen.elapsed();
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("distlock did not stop the command");
    };
    let output = child.wait_with_output().expect("stderr");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(status.code(), Some(LOST), "{stderr}");
    assert!(stderr.contains("lost"), "{stderr}");
    // The command got TERM (sh dies on it at once) well before its grace ran out.
    assert!(
        stopped_after < lease + Duration::from_secs(1) + Duration::from_secs(1),
        "{stopped_after:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !late.exists(),
        "the command was killed before its later write"
    );
    let value: Option<String> = query(urls, redis::cmd("GET").arg("batch:7"));
    assert_eq!(
        value.as_deref(),
        Some("dl:ffffffffffffffffffffffffffffffff"),
        "the new holder is untouched"
    );
}

#[test]
fn single_server() {
    let server = RedisServer::start().expect("redis-server");
    stolen_mid_run(&[server.url()]);
}

#[test]
fn cluster() {
    let cluster = RedisCluster::start().expect("cluster");
    stolen_mid_run(&cluster.urls());
}
