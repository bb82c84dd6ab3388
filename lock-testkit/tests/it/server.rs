//! Integration tests of `lock-testkit` against the real `redis-server` binary.

use std::io;
use std::time::{Duration, Instant};

use crate::common::refuses;
use lock_testkit::{KeepData, RedisServer, free_port, redis_server_binary};

const SHORT: Duration = Duration::from_millis(200);

fn start() -> RedisServer {
    RedisServer::start().expect("start redis-server")
}

#[test]
fn binary_is_found() {
    assert!(redis_server_binary().is_file());
}

#[test]
fn free_ports_are_distinct_and_not_6379() {
    let a = free_port();
    let b = free_port();
    assert_ne!(a, b);
    assert_ne!(a, 6379);
    assert_ne!(b, 6379);
}

#[test]
fn start_answers_ping() {
    let server = start();
    assert_ne!(server.port(), 6379);
    assert_eq!(
        server.url(),
        format!("redis://127.0.0.1:{}/", server.port())
    );
    assert!(server.is_running());
    assert!(server.pid().is_some());
    assert_eq!(server.command(&["PING"]).expect("PING"), "PONG");
    assert_eq!(server.command(&["DBSIZE"]).expect("DBSIZE"), "0");
    assert_eq!(server.command(&["GET", "missing"]).expect("GET"), "(nil)");
    assert!(server.log_tail().contains("Ready to accept connections"));
}

#[test]
fn command_errors_are_errors() {
    let server = start();
    let err = server
        .command(&["NOSUCHCOMMAND"])
        .expect_err("unknown command");
    assert!(err.to_string().contains("unknown command"), "{err}");
    let err = server.command(&[]).expect_err("empty");
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn restart_keep_and_discard() {
    let mut server = start();
    let port = server.port();
    assert_eq!(server.command(&["SET", "k", "v"]).expect("SET"), "OK");
    let old_pid = server.pid();

    server.restart(KeepData::Keep).expect("restart keep");
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), old_pid);
    assert_eq!(
        server.command(&["GET", "k"]).expect("GET"),
        "v",
        "log:\n{}",
        server.log_tail()
    );

    server.restart(KeepData::Discard).expect("restart discard");
    assert_eq!(server.port(), port);
    assert_eq!(server.command(&["GET", "k"]).expect("GET"), "(nil)");
    assert_eq!(server.command(&["DBSIZE"]).expect("DBSIZE"), "0");
}

#[test]
fn stop_refuses_connections_and_start_again_reuses_port() {
    let mut server = start();
    let port = server.port();
    server.stop();
    assert!(!server.is_running());
    assert_eq!(server.pid(), None);
    assert!(refuses(port), "port {port} still accepts after stop");
    let err = server
        .command_with_timeout(&["PING"], SHORT)
        .expect_err("stopped");
    assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
    assert!(server.pause().is_err());
    server.stop(); // idempotent

    server.start_again().expect("start again");
    assert_eq!(server.port(), port);
    assert_eq!(server.command(&["PING"]).expect("PING"), "PONG");
    assert_eq!(
        server.start_again().expect_err("already running").kind(),
        io::ErrorKind::AlreadyExists
    );
}

#[test]
fn pause_times_out_and_resume_answers() {
    let server = start();
    server.pause().expect("pause");
    let began = Instant::now();
    let err = server
        .command_with_timeout(&["PING"], SHORT)
        .expect_err("paused server must not answer");
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "took {:?}",
        began.elapsed()
    );
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    assert!(server.is_running(), "a paused server is still running");

    server.resume().expect("resume");
    assert_eq!(server.command(&["PING"]).expect("PING"), "PONG");
}

#[test]
fn drop_kills_a_paused_server() {
    let server = start();
    let port = server.port();
    server.pause().expect("pause");
    drop(server);
    assert!(refuses(port), "port {port} still accepts after drop");
}

#[test]
fn two_servers_get_different_ports() {
    let a = start();
    let b = start();
    assert_ne!(a.port(), b.port());
    assert_ne!(a.dir(), b.dir());
    a.command(&["SET", "only-in-a", "1"]).expect("SET");
    assert_eq!(b.command(&["EXISTS", "only-in-a"]).expect("EXISTS"), "0");
}

#[test]
fn password_server() {
    let mut server = RedisServer::builder()
        .password("p@ss word")
        .start()
        .expect("start with password");
    assert_eq!(
        server.url(),
        format!("redis://:p%40ss%20word@127.0.0.1:{}/", server.port())
    );
    assert_eq!(server.command(&["PING"]).expect("PING"), "PONG");

    let anonymous = format!("redis://127.0.0.1:{}/", server.port());
    let mut con = redis::Client::open(anonymous)
        .expect("client")
        .get_connection_with_timeout(Duration::from_secs(2))
        .expect("connect");
    let denied: redis::RedisResult<String> = redis::cmd("GET").arg("x").query(&mut con);
    let err = denied.expect_err("no auth");
    assert!(err.to_string().contains("NOAUTH"), "{err}");

    server.command(&["SET", "k", "v"]).expect("SET");
    server.restart(KeepData::Keep).expect("restart keep");
    assert_eq!(server.command(&["GET", "k"]).expect("GET"), "v");
}

#[test]
fn cluster_enabled_server() {
    let server = RedisServer::builder()
        .cluster_enabled(true)
        .start()
        .expect("start cluster-enabled");
    assert_eq!(
        server
            .command(&["CLUSTER", "KEYSLOT", "foo"])
            .expect("KEYSLOT"),
        "12182"
    );
    assert!(server.dir().join("nodes.conf").is_file());
}

#[test]
fn extra_args_are_passed() {
    let server = RedisServer::builder()
        .arg("--maxmemory")
        .arg("1mb")
        .start()
        .expect("start with args");
    assert_eq!(
        server
            .command(&["CONFIG", "GET", "maxmemory"])
            .expect("CONFIG GET"),
        "maxmemory\n1048576"
    );
}

#[test]
fn bad_args_fail_with_log_tail() {
    let err = RedisServer::builder()
        .arg("--no-such-option")
        .arg("1")
        .start()
        .expect_err("bad option");
    let msg = err.to_string();
    assert!(msg.contains("rejected its configuration"), "{msg}");
    assert!(msg.contains("no-such-option"), "{msg}");
}

#[test]
fn server_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<RedisServer>();
}

#[tokio::test]
async fn usable_from_tokio() {
    let server = start();
    let client = redis::Client::open(server.url()).expect("client");
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .expect("async connect");
    let pong: String = redis::cmd("PING")
        .query_async(&mut con)
        .await
        .expect("PING");
    assert_eq!(pong, "PONG");
}
