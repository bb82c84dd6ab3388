//! `run` passes the lock name and the fencing token to the command, exits with the command's
//! code, releases the lock after it, and exits with the "busy" code when the lock stays held.

use std::time::Duration;

use lock_testkit::{RedisCluster, RedisServer};

use crate::common::{self, distlock, hold, locker, query, stderr, stdout};

const BUSY: i32 = 75;

async fn passes_the_token(urls: Vec<String>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let env_file = dir.path().join("env");
    let script = format!("env > {}; exit 3", env_file.display());
    let u = urls.clone();
    let out = tokio::task::spawn_blocking(move || {
        distlock(
            &u,
            &[
                "run",
                "report:daily",
                "--lease",
                "5s",
                "--",
                "sh",
                "-c",
                &script,
            ],
        )
    })
    .await
    .expect("run");
    assert_eq!(
        out.status.code(),
        Some(3),
        "the command's own code: {}",
        stderr(&out)
    );
    let env = std::fs::read_to_string(&env_file).expect("the command wrote its environment");
    let var = |name: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
    };
    assert_eq!(var("DISTLOCK_LOCK_NAME").as_deref(), Some("report:daily"));
    let token: u64 = var("DISTLOCK_FENCING_TOKEN")
        .expect("token")
        .parse()
        .expect("a number");
    let counter: String = query(
        &urls,
        redis::cmd("GET").arg("{report:daily}:distlock-fence"),
    );
    assert_eq!(token.to_string(), counter, "the token the grant issued");
    let held: Option<String> = query(&urls, redis::cmd("GET").arg("report:daily"));
    assert_eq!(held, None, "released when the command ended");

    // Held by someone else: busy after --wait, and the command never runs.
    let holder = locker(&urls);
    let guard = hold(&holder, "report:daily").await;
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let u = urls.clone();
    let out = tokio::task::spawn_blocking(move || {
        distlock(
            &u,
            &[
                "run",
                "report:daily",
                "--wait",
                "300ms",
                "--",
                "sh",
                "-c",
                &script,
            ],
        )
    })
    .await
    .expect("run");
    assert_eq!(out.status.code(), Some(BUSY), "{}", stderr(&out));
    assert!(!marker.exists());
    tokio::time::sleep(Duration::from_millis(10)).await;
    guard.release().await.expect("still ours");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server() {
    let server = RedisServer::start().expect("redis-server");
    passes_the_token(vec![server.url()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster() {
    let cluster = RedisCluster::start().expect("cluster");
    passes_the_token(cluster.urls()).await;
}

/// While the command runs, its grant describes the holder — this host, `distlock`'s process id
/// and the command as the note — and `show` prints it; the description goes with the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holder_is_described_while_the_command_runs() {
    let server = RedisServer::start().expect("redis-server");
    let urls = vec![server.url()];
    let binary = env!("CARGO_BIN_EXE_distlock");
    let mut child = std::process::Command::new(binary)
        .args(["--url", &urls[0], "run", "report:daily", "--", "sleep", "3"])
        .spawn()
        .expect("spawn distlock run");
    let u = urls.clone();
    let shown = tokio::task::spawn_blocking(move || {
        let mut holder = serde_json::Value::Null;
        let seen = common::eventually(Duration::from_secs(10), || {
            let doc = common::json(&distlock(&u, &["--json", "show", "report:daily"]));
            holder = common::locks(&doc)
                .into_iter()
                .find(|l| l["name"] == "report:daily")
                .map_or(serde_json::Value::Null, |l| l["holder"].clone());
            !holder.is_null()
        });
        assert!(seen, "show never printed a holder");
        holder
    })
    .await
    .expect("show");
    assert_eq!(shown["pid"], u64::from(child.id()), "{shown}");
    assert_eq!(shown["note"], "distlock run -- sleep 3", "{shown}");
    assert!(child.wait().expect("wait").success());
    // The description is the grant's note.
    let left: Option<String> = query(&urls, redis::cmd("GET").arg("{report:daily}:distlock-note"));
    assert_eq!(left, None, "deleted with the release");
}

/// The flags renamed before the first release (`--ttl` is `--lease`, `--grace`, which clashed
/// with the store grace period, is `--kill-after`) are refused with the new name, before
/// anything runs: usage's exit code 2, the command never started, no lock taken.
#[test]
fn the_old_flag_names_are_refused_with_the_new_ones() {
    let server = RedisServer::start().expect("redis");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ran").display().to_string();
    for (old, new) in [("--ttl", "--lease"), ("--grace", "--kill-after")] {
        let touch = format!("touch {path}");
        let out = distlock(
            &[server.url()],
            &["run", "renamed", old, "5s", "--", "sh", "-c", &touch],
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{old}: {err}");
        assert!(err.contains(new), "{old}: the new name is given: {err}");
        assert!(
            !std::path::Path::new(&path).exists(),
            "{old}: the command ran"
        );
    }
    let free = distlock(&[server.url()], &["show", "renamed"]);
    assert!(stdout(&free).contains("not held"), "{}", stdout(&free));
}
