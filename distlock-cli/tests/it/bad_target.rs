//! A bad URL, a server that is down and a wrong password: one clear line on stderr, a
//! non-zero exit, never a panic — for every subcommand.

use std::net::TcpListener;

use lock_testkit::{PostgresServer, RedisServer};

use crate::common::{distlock, stderr};

/// A loopback port nobody listens on: bound, then freed.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port()
}

fn one_clear_line(urls: &[String], what: &str, expected_code: i32) {
    for args in [
        &["ls"][..],
        &["show", "a"],
        &["release", "a", "--token", "dl:0"],
        &["run", "a", "--", "true"],
        &["watch", "--iterations", "1"],
        &["migrate"],
    ] {
        let out = distlock(urls, args);
        let err = stderr(&out);
        assert_eq!(
            out.status.code(),
            Some(expected_code),
            "{what} {args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{what} {args:?}: {err}");
        assert!(err.starts_with("distlock: "), "{what} {args:?}: {err}");
        assert!(!err.contains("panicked"), "{what} {args:?}: {err}");
        assert!(out.stdout.is_empty(), "{what} {args:?}");
    }
}

#[test]
fn bad_url() {
    one_clear_line(&["ftp://127.0.0.1:1/".into()], "unknown scheme", 2);
    one_clear_line(&["127.0.0.1:6379".into()], "no scheme", 2);
    one_clear_line(&["redis://127.0.0.1:notaport/".into()], "bad Redis URL", 2);
    let out = distlock(&["ftp://127.0.0.1:1/".into()], &["ls"]);
    assert!(
        stderr(&out).contains("unknown URL scheme \"ftp\""),
        "the scheme is named: {}",
        stderr(&out)
    );
}

#[test]
fn server_down() {
    let port = closed_port();
    one_clear_line(&[format!("redis://127.0.0.1:{port}/")], "down", 69);
}

#[test]
fn wrong_password() {
    let server = RedisServer::builder()
        .password("s3cret")
        .start()
        .expect("redis-server");
    let url = format!("redis://:wrong@127.0.0.1:{}/", server.port());
    one_clear_line(&[url], "wrong password", 69);
    let out = distlock(&[server.url()], &["ls"]);
    assert!(
        out.status.success(),
        "the right password works: {}",
        stderr(&out)
    );
}

#[test]
fn postgres_server_down() {
    let port = closed_port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    one_clear_line(std::slice::from_ref(&url), "postgres down", 69);
    let out = distlock(&[url], &["ls"]);
    assert!(
        stderr(&out).contains("Connection refused"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn postgres_wrong_password() {
    let server = PostgresServer::builder()
        .password("s3cret")
        .start()
        .expect("postgres");
    let url = server.url_with_password("wrong");
    one_clear_line(&[url], "postgres wrong password", 69);
    let out = distlock(&[server.url()], &["migrate"]);
    assert!(
        out.status.success(),
        "the right password works: {}",
        stderr(&out)
    );
    let out = distlock(&[server.url_with_password("wrong")], &["ls"]);
    assert!(
        stderr(&out).contains("password authentication failed"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn postgres_bad_names_and_urls() {
    let server = PostgresServer::start().expect("postgres");
    let urls = [server.url()];
    let long = "n".repeat(5000);
    for args in [
        &["show", ""][..],
        &["show", &long],
        &["release", "", "--token", "0"],
        &["release", &long, "--token", "0"],
        &["run", "", "--", "true"],
        &["run", &long, "--", "true"],
        &["leader", ""],
        &["ls", "[unclosed"],
    ] {
        let out = distlock(&urls, args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("distlock: "), "{args:?}: {err}");
    }
    one_clear_line(
        &["postgres://127.0.0.1:5432/db,postgres://127.0.0.1:5433/db".into()],
        "two URLs",
        2,
    );
    one_clear_line(
        &["postgres://postgres@127.0.0.1:notaport/db".into()],
        "bad PostgreSQL URL",
        2,
    );
}

/// The same bad names are usage errors (exit 2, one line) on Redis as on PostgreSQL, MySQL and
/// object storage: the name is checked once, for every store, before it is looked up.
#[test]
fn redis_bad_names_are_usage_errors() {
    let server = RedisServer::start().expect("redis");
    let long = "n".repeat(1100);
    for args in [
        &["show", ""][..],
        &["show", &long],
        &["release", "", "--token", "dl:0"],
        &["release", &long, "--token", "dl:0"],
        &["run", "", "--", "true"],
    ] {
        let out = distlock(&[server.url()], args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
}

/// A port nobody listens on is named as refused on every backend (not a timeout, not a
/// client's debug dump): one line, the backend failure's exit code.
#[test]
fn a_refused_port_is_named_on_every_backend() {
    let port = closed_port();
    for url in [
        format!("redis://127.0.0.1:{port}/"),
        format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        format!("mysql://root@127.0.0.1:{port}/test"),
        format!("etcd://127.0.0.1:{port}"),
    ] {
        let out = distlock(std::slice::from_ref(&url), &["ls"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(69), "{url}: {err}");
        assert_eq!(err.lines().count(), 1, "{url}: {err}");
        assert!(err.to_lowercase().contains("refused"), "{url}: {err}");
        assert!(!err.contains("tonic::"), "{url}: a debug dump: {err}");
    }
}

/// A server of another kind on a Redis URL (here one that answers like an HTTP server) is
/// named as such, not as a parse error of its first byte.
#[test]
fn a_server_of_another_kind_is_named() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("port");
    let port = listener.local_addr().expect("addr").port();
    let answering = std::thread::spawn(move || {
        use std::io::{Read as _, Write as _};
        // Two connections at most (the command tries once); each gets an HTTP answer.
        for _ in 0..2 {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            let mut request = [0_u8; 512];
            let _ = conn.read(&mut request);
            let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let out = distlock(&[format!("redis://127.0.0.1:{port}/")], &["ls"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(69), "{err}");
    assert!(
        err.contains("does not answer in the Redis protocol"),
        "{err}"
    );
    drop(answering);
}

/// `--help` names the URL scheme of every backend the command takes.
#[test]
fn the_help_names_every_backends_url() {
    let out = distlock(&["redis://127.0.0.1:1/".into()], &["--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    for scheme in [
        "redis://",
        "rediss://",
        "valkey://",
        "etcd://",
        "postgres://",
        "mysql://",
        "mariadb://",
        "s3://",
    ] {
        assert!(
            help.contains(scheme),
            "--help does not name {scheme}:\n{help}"
        );
    }
    for backend in ["Redlock", "PostgreSQL", "MySQL", "etcd", "object storage"] {
        assert!(
            help.contains(backend),
            "--help does not name {backend}:\n{help}"
        );
    }
}
