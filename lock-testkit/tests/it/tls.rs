//! TLS servers: they answer over TLS with the kit's CA, and only over TLS.

use std::time::Duration;

use lock_testkit::{KeepData, RedisServer};

const SHORT: Duration = Duration::from_millis(500);

#[test]
fn a_tls_server_answers_over_tls_only() {
    let mut server = RedisServer::builder()
        .tls(true)
        .password("pw")
        .start()
        .expect("start a TLS redis-server");
    assert!(server.is_tls());
    assert_eq!(
        server.url(),
        format!("rediss://:pw@127.0.0.1:{}/", server.port())
    );
    assert_eq!(server.command(&["PING"]).expect("PING over TLS"), "PONG");
    let ca = server.ca_cert_pem().expect("a TLS server has a CA");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
    let path = server.ca_cert_path().expect("CA file");
    assert_eq!(std::fs::read_to_string(path).expect("read CA"), ca);

    // Plaintext on the TLS port gets no reply.
    let plain = format!("redis://:pw@127.0.0.1:{}/", server.port());
    let client = redis::Client::open(plain.as_str()).expect("url");
    let answered = client
        .get_connection_with_timeout(SHORT)
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
    assert!(answered.is_err(), "plaintext must not be served");

    // The certificates survive a restart (they live in the server's directory).
    server.command(&["SET", "k", "v"]).expect("SET");
    server.restart(KeepData::Keep).expect("restart");
    assert_eq!(server.command(&["GET", "k"]).expect("GET"), "v");
}

#[test]
fn a_mutual_tls_server_wants_the_client_certificate() {
    let server = RedisServer::builder()
        .mutual_tls(true)
        .start()
        .expect("start a mutual-TLS redis-server");
    // The kit's own client presents the client certificate.
    assert_eq!(server.command(&["PING"]).expect("PING"), "PONG");

    // Trusting the CA is not enough without a client certificate.
    let certs = server.certificates().expect("certificates");
    let client =
        redis::Client::build_with_tls(server.url(), certs.for_redis(false)).expect("client");
    let answered = client
        .get_connection_with_timeout(SHORT)
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
    assert!(answered.is_err(), "no client certificate, no service");
}

#[test]
fn tls_is_refused_for_cluster_nodes() {
    let err = RedisServer::builder()
        .tls(true)
        .cluster_enabled(true)
        .start()
        .expect_err("not supported");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}
