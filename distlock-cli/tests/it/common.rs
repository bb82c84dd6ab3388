//! The one place of shared setup: running the `distlock` binary against test servers, and
//! taking locks through the library.

use std::process::{Command, Output};
use std::time::Duration;

use lock_core::{Guard, Locker};
use lock_redis::RedisLock;

/// `distlock --url URL ARGS...`, run to its end, with no terminal on stdin.
pub(crate) fn distlock(urls: &[String], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_distlock"))
        .arg("--url")
        .arg(urls.join(","))
        .args(args)
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_PREFIX")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run distlock")
}

/// stdout as text.
pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// stderr as text.
pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// stdout parsed as one JSON document; fails the test with stderr otherwise.
pub(crate) fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "distlock failed: {:?} {}",
        output.status,
        stderr(output)
    );
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

/// A locker on a single server (`urls` of one) or a cluster (several).
pub(crate) fn locker(urls: &[String]) -> Locker {
    let builder = RedisLock::builder()
        .connect_timeout(Duration::from_secs(3))
        .command_timeout(Duration::from_secs(2));
    let builder = if urls.len() > 1 {
        builder.cluster_urls(urls.iter().cloned())
    } else {
        builder.url(urls[0].clone())
    };
    Locker::new(builder.build().expect("lock"))
}

/// A locker on the store `url` names, whatever its backend (by its scheme): Redis, etcd
/// (`etcd://`, `http://`) or PostgreSQL.
pub(crate) fn locker_for(url: &str) -> Locker {
    if let Some(member) = url.strip_prefix("etcd://") {
        let lock = lock_etcd::EtcdLock::builder()
            .endpoint(format!("http://{member}"))
            .connect_timeout(Duration::from_secs(3))
            .command_timeout(Duration::from_secs(2))
            .build()
            .expect("etcd lock");
        return Locker::new(lock);
    }
    if url.starts_with("http://") {
        let lock = lock_etcd::EtcdLock::builder()
            .endpoint(url)
            .build()
            .expect("etcd lock");
        return Locker::new(lock);
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Locker::new(crate::postgres::lock(url));
    }
    locker(&[url.to_owned()])
}

/// Holds `name` with a renewed 30 s lease.
pub(crate) async fn hold(locker: &Locker, name: &str) -> Guard {
    locker
        .lock(name)
        .lease(Duration::from_secs(30))
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("acquire")
}

/// The locks of a `ls --json` / `show --json` document.
pub(crate) fn locks(doc: &serde_json::Value) -> Vec<serde_json::Value> {
    doc["locks"].as_array().cloned().unwrap_or_default()
}

/// The lock of `kind` named `name` in a document.
pub(crate) fn find(doc: &serde_json::Value, name: &str, kind: &str) -> serde_json::Value {
    locks(doc)
        .into_iter()
        .find(|l| l["name"] == name && l["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} {name:?} in {doc:#}"))
}

/// A plain command on a server (single or the node owning the key) by URL, synchronously.
pub(crate) fn redis_conn(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .expect("url")
        .get_connection_with_timeout(Duration::from_secs(3))
        .expect("connect")
}

/// Sends one command to a single server (`urls` of one) or a cluster (routed by key).
pub(crate) fn query<T: redis::FromRedisValue>(urls: &[String], cmd: &redis::Cmd) -> T {
    if urls.len() > 1 {
        let mut conn = redis::cluster::ClusterClient::new(urls.to_vec())
            .expect("urls")
            .get_connection()
            .expect("connect to the cluster");
        cmd.query(&mut conn).expect("cluster command")
    } else {
        cmd.query(&mut redis_conn(&urls[0])).expect("command")
    }
}

/// The token value distlock stored for a guard's lease.
pub(crate) fn token_of(guard: &Guard) -> String {
    lock_redis::token_value(guard.lease().token()).to_string()
}

/// Polls `check` every 50 ms for at most `limit`; whether it came true.
pub(crate) fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    check()
}
