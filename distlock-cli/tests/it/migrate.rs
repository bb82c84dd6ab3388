//! `distlock migrate`: the `distlock` function library on a Redis server and on every master of
//! a Cluster, after which `redis-cli` alone writes fenced; a user without FUNCTION told the
//! scripts are used; lock-postgres's schema on PostgreSQL.

use std::time::Duration;

use lock_core::Locker;
use lock_testkit::{PostgresServer, RedisCluster, RedisServer};

use crate::common::{distlock, json, stderr, stdout};

#[test]
fn migrate_loads_the_library_once_and_redis_cli_writes_fenced() {
    let server = RedisServer::start().expect("redis-server");
    let urls = [server.url()];
    let first = distlock(&urls, &["migrate"]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(
        stdout(&first).trim(),
        "Redis: loaded the distlock library, version 1"
    );
    let again = json(&distlock(&urls, &["--json", "migrate"]));
    assert_eq!(again["functions"], true);
    assert_eq!(
        again["outcome"],
        "the distlock library, version 1, was loaded already"
    );
    let set =
        |token: &str| server.command(&["FCALL", "distlock_fenced_set", "1", "acct", token, "v"]);
    assert_eq!(set("5").expect("applied"), "OK");
    let stale = set("4").expect_err("stale").to_string();
    assert!(stale.contains("STALEFENCE"), "{stale}");
}

#[test]
fn migrate_loads_the_library_on_every_master_of_a_cluster() {
    let cluster = RedisCluster::start().expect("cluster");
    let out = distlock(&cluster.urls(), &["migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("loaded the distlock library"),
        "{}",
        stdout(&out)
    );
    for master in cluster.masters() {
        let listed = cluster.nodes()[master]
            .command(&["FUNCTION", "LIST", "LIBRARYNAME", "distlock"])
            .expect("FUNCTION LIST");
        assert!(listed.contains("distlock_fenced_set"), "{listed}");
    }
}

#[test]
fn migrate_without_the_function_command_says_scripts_are_used() {
    let server = RedisServer::start().expect("redis-server");
    server
        .command(&[
            "ACL",
            "SETUSER",
            "app",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-function",
            "-fcall",
            "-fcall_ro",
        ])
        .expect("ACL SETUSER");
    let url = server.url().replace("redis://", "redis://app:pw@");
    let out = distlock(&[url], &["migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("fenced writes use EVALSHA scripts"),
        "{}",
        stdout(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_installs_the_postgres_schema() {
    let server = PostgresServer::start().expect("postgres");
    let urls = [server.url()];
    // Before it, a run tells the operator to run `distlock migrate` (the command they are in).
    let before = distlock(&urls, &["run", "job", "--", "true"]);
    assert_eq!(before.status.code(), Some(69), "{}", stderr(&before));
    assert!(
        stderr(&before).contains("distlock migrate"),
        "{}",
        stderr(&before)
    );
    for _ in 0..2 {
        let out = distlock(&urls, &["migrate"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).starts_with("PostgreSQL: the distlock schema is at version"),
            "{}",
            stdout(&out)
        );
    }
    let doc = json(&distlock(&urls, &["--json", "migrate"]));
    assert_eq!(doc["schema_version"], lock_postgres::SCHEMA_VERSION);
    // The table is there: a lock needs nothing more.
    let lock = lock_postgres::PostgresLock::from_url(&server.url()).expect("url");
    let guard = Locker::new(lock)
        .lock("migrated")
        .wait(Duration::from_secs(10))
        .await
        .expect("acquire on the migrated schema");
    guard.release().await.expect("ours");
}

#[test]
fn migrate_on_a_postgres_nobody_listens_on_is_a_backend_failure() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    let out = distlock(&[url], &["--connect-timeout", "1s", "migrate"]);
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}
