//! The command on MySQL / MariaDB (`mysql://` URLs): lock-mysql's lease table, migrated with
//! `distlock migrate`, on one throwaway MariaDB (lock-testkit): `ls` and `show` of every kind,
//! `release` by token (a wrong token changes nothing), and `run` excluding other processes.

use std::process::{Command, Stdio};
use std::time::Duration;

use lock_core::Locker;
use lock_mysql::MysqlLock;
use lock_testkit::MariadbServer;

use crate::common::{distlock, find, json, stderr};

fn locker(url: &str) -> Locker {
    Locker::new(
        MysqlLock::builder()
            .url(url)
            .connect_timeout(Duration::from_secs(3))
            .statement_timeout(Duration::from_secs(2))
            .build()
            .expect("lock"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_show_release_and_run() {
    let server = MariadbServer::start().expect("mariadb");
    let url = server.url();
    let urls = vec![url.clone()];
    let u = urls.clone();
    let migrated = tokio::task::spawn_blocking(move || distlock(&u, &["migrate"]))
        .await
        .expect("run");
    assert!(migrated.status.success(), "{}", stderr(&migrated));

    let holder = locker(&url);
    // A short lease, renewed every second: the holder sees the operator's release soon.
    let guard = holder
        .lock("order:1")
        .lease(Duration::from_secs(3))
        .acquire()
        .await
        .expect("acquire");
    let token = guard.lease().token().to_hex().as_str().to_owned();
    let reader = holder
        .read("report")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .expect("read share");
    let permit = holder
        .semaphore("pool", 3)
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .expect("permit");

    let u = urls.clone();
    let (listed, shown, wrong) = tokio::task::spawn_blocking(move || {
        (
            json(&distlock(&u, &["--json", "ls"])),
            json(&distlock(&u, &["--json", "show", "order:1"])),
            distlock(
                &u,
                &[
                    "release",
                    "order:1",
                    "--token",
                    "0123456789abcdef0123456789abcdef",
                ],
            ),
        )
    })
    .await
    .expect("run");
    let order = find(&listed, "order:1", "mutex");
    assert_eq!(order["token"], token.as_str(), "{listed:#}");
    assert_eq!(order["fencing_token"], guard.fencing_token(), "{listed:#}");
    assert!(
        order["since_ms"].as_u64().is_some(),
        "held since: {listed:#}"
    );
    assert_eq!(find(&listed, "report", "read-write")["readers"]["count"], 1);
    assert_eq!(find(&listed, "pool", "semaphore")["permits"]["used"], 1);
    assert_eq!(find(&shown, "order:1", "mutex")["token"], token.as_str());
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    assert!(guard.is_held());

    let u = urls.clone();
    let t = token.clone();
    let released =
        tokio::task::spawn_blocking(move || distlock(&u, &["release", "order:1", "--token", &t]))
            .await
            .expect("run");
    assert!(released.status.success(), "{}", stderr(&released));
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("the holder sees its lease released");
    drop((reader, permit));

    let u = urls.clone();
    let ran = tokio::task::spawn_blocking(move || exclusive_runs(&u[0]))
        .await
        .expect("run");
    assert!(ran, "two commands ran at once");
}

/// Three `distlock run` processes on one name; whether none overlapped and all ran.
fn exclusive_runs(url: &str) -> bool {
    let dir = tempfile::tempdir().expect("tempdir");
    let (inside, overlap, runs) = (
        dir.path().join("inside"),
        dir.path().join("overlap"),
        dir.path().join("runs"),
    );
    let script = format!(
        "mkdir {inside} || touch {overlap}; echo x >> {runs}; sleep 0.2; rmdir {inside}",
        inside = inside.display(),
        overlap = overlap.display(),
        runs = runs.display()
    );
    let children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_distlock"))
                .args(["--url", url, "run", "job:exclusive", "--lease", "5s"])
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
    let count = std::fs::read_to_string(&runs)
        .expect("runs")
        .lines()
        .count();
    !overlap.exists() && count == 3
}

/// `GET_LOCK` locks (lock-mysql's advisory mode) are listed by `ls` and `show` where the server
/// can tell who holds them: MariaDB with the `metadata_lock_info` plugin loaded. Without it they
/// are not listed, and the listing still answers (the README says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advisory_locks_are_listed_where_the_server_tells() {
    let server = MariadbServer::builder()
        .setting("plugin-load-add", "metadata_lock_info")
        .start()
        .expect("mariadb with metadata_lock_info");
    let plain = MariadbServer::start().expect("mariadb");
    for (server, listed) in [(&server, true), (&plain, false)] {
        let url = server.url();
        let u = vec![url.clone()];
        let migrated = tokio::task::spawn_blocking(move || distlock(&u, &["migrate"]))
            .await
            .expect("run");
        assert!(migrated.status.success(), "{}", stderr(&migrated));
        let lock = lock_mysql::MysqlAdvisoryLock::builder()
            .url(url.as_str())
            .build()
            .expect("lock");
        let guard = Locker::new(lock)
            .lock("nightly")
            .lease(Duration::from_secs(30))
            .acquire()
            .await
            .expect("GET_LOCK");
        let urls = vec![url];
        let (ls, show) = tokio::task::spawn_blocking(move || {
            (
                distlock(&urls, &["--json", "ls"]),
                distlock(&urls, &["--json", "show", "nightly"]),
            )
        })
        .await
        .expect("run");
        assert!(ls.status.success(), "{}", stderr(&ls));
        assert!(show.status.success(), "{}", stderr(&show));
        let (ls, show) = (json(&ls), json(&show));
        if listed {
            let held = find(&ls, "nightly", "advisory");
            assert!(held["holder"].to_string().contains("connection"), "{ls:#}");
            find(&show, "nightly", "advisory");
        } else {
            assert!(!ls.to_string().contains("nightly"), "{ls:#}");
        }
        guard.release().await.expect("released");
    }
}
