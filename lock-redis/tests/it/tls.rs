//! TLS to Redis: locking works end to end over `rediss://` against a TLS-only redis-server
//! (grants, release, fencing, release announcements on the pub/sub connection), and a wrong
//! certificate or a plain client on the TLS port fails fast with a typed error.

#![cfg(feature = "tls")]

use std::time::{Duration, Instant};

use lock_core::{LockError, Locker, Op, TimeoutPhase};
use lock_redis::RedisLock;
use lock_testkit::{RedisServer, TestCertificates};

use crate::common::slow_polling;

const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Slack over the connect timeout for scheduling on a busy machine.
const SLACK: Duration = Duration::from_millis(1_500);

fn tls_server() -> RedisServer {
    RedisServer::builder()
        .tls(true)
        .start()
        .expect("start a TLS redis-server")
}

fn ca(server: &RedisServer) -> String {
    server
        .ca_cert_pem()
        .expect("a TLS server has a CA")
        .to_owned()
}

/// A lock over TLS trusting `ca`, with short timeouts so failures show fast.
fn lock_trusting(url: &str, ca: &str) -> RedisLock {
    RedisLock::builder()
        .url(url)
        .tls_ca_cert(ca)
        .connect_timeout(CONNECT_TIMEOUT)
        .command_timeout(CONNECT_TIMEOUT)
        .build()
        .expect("valid TLS settings")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locking_works_over_tls() {
    let server = tls_server();
    let url = server.url();
    assert!(url.starts_with("rediss://"));
    let holder_side = slow_polling(lock_trusting(&url, &ca(&server)));
    let waiter_side = slow_polling(lock_trusting(&url, &ca(&server)));

    let holder = holder_side.lock("a").await.expect("granted over TLS");
    let first = holder.fencing_token();
    let stored = server.command(&["GET", "a"]).expect("GET over TLS");
    assert_eq!(
        stored,
        lock_redis::token_value(holder.lease().token()).as_str()
    );
    assert!(
        holder_side
            .lock("a")
            .try_acquire()
            .await
            .expect("answered")
            .is_none(),
        "held"
    );

    let waiter = tokio::spawn(async move {
        let guard = waiter_side.lock("a").wait(Duration::from_secs(30)).await?;
        let token = guard.fencing_token();
        guard.release().await?; // an error if it was no longer ours
        Ok::<_, LockError>(token)
    });
    // The waiter's subscription reached the server over the TLS pub/sub connection.
    let channel = RedisLock::from_url(&url).expect("url").release_channel("a");
    let mut subscribed = false;
    for _ in 0..200 {
        let numsub = server
            .command(&["PUBSUB", "NUMSUB", &channel])
            .expect("PUBSUB");
        if numsub.lines().nth(1) == Some("1") {
            subscribed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(subscribed, "the waiter subscribed to {channel} over TLS");

    holder.release().await.expect("released over TLS");
    let second = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken by the announcement, not by a 10 s poll")
        .expect("no panic")
        .expect("granted");
    assert!(
        second > first,
        "fencing tokens increase: {first} then {second}"
    );
    let keys = server.command(&["KEYS", "*"]).expect("KEYS");
    assert!(
        keys.ends_with(":distlock-fence"),
        "only the fencing counter is left: {keys}"
    );
}

#[tokio::test]
async fn mutual_tls_presents_the_client_certificate() {
    let server = RedisServer::builder()
        .mutual_tls(true)
        .start()
        .expect("start a mutual-TLS redis-server");
    let certs = server.certificates().expect("certificates");
    let lock = RedisLock::builder()
        .url(server.url())
        .tls_ca_cert(certs.ca_cert_pem())
        .tls_client_cert(certs.client_cert_pem(), certs.client_key_pem())
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .expect("valid TLS settings");
    let guard = Locker::new(lock).lock("m").await.expect("granted");
    guard.release().await.expect("released");

    // The same CA without a client certificate is turned away, and saying so is final.
    let started = Instant::now();
    let err = Locker::new(lock_trusting(&server.url(), certs.ca_cert_pem()))
        .lock("m")
        .try_acquire()
        .await
        .expect_err("no client certificate");
    assert_rejected(&err, started);
}

#[tokio::test]
async fn an_untrusted_certificate_is_a_final_connect_error() {
    let server = tls_server();
    let other_ca = TestCertificates::generate().expect("a CA");
    for (what, lock) in [
        (
            "another CA",
            lock_trusting(&server.url(), other_ca.ca_cert_pem()),
        ),
        (
            "the system trust store",
            RedisLock::builder()
                .url(server.url())
                .connect_timeout(CONNECT_TIMEOUT)
                .build()
                .expect("url"),
        ),
    ] {
        let started = Instant::now();
        let err = Locker::new(lock)
            .lock("a")
            .try_acquire()
            .await
            .expect_err(what);
        assert_rejected(&err, started);
    }
    assert_eq!(server.command(&["DBSIZE"]).expect("DBSIZE"), "0");
}

#[tokio::test]
async fn a_plain_client_on_the_tls_port_fails_within_the_connect_timeout() {
    let server = tls_server();
    let plain = format!("redis://127.0.0.1:{}/", server.port());
    let lock = RedisLock::builder()
        .url(plain)
        .connect_timeout(CONNECT_TIMEOUT)
        .command_timeout(CONNECT_TIMEOUT)
        .build()
        .expect("url");
    let started = Instant::now();
    let err = Locker::new(lock)
        .lock("a")
        .try_acquire()
        .await
        .expect_err("a TLS port does not speak plain RESP");
    assert!(
        started.elapsed() < CONNECT_TIMEOUT + SLACK,
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            err,
            LockError::Backend { .. }
                | LockError::Timeout {
                    phase: TimeoutPhase::Connect | TimeoutPhase::Command,
                    ..
                }
        ),
        "{err:?}"
    );
    assert_eq!(server.command(&["DBSIZE"]).expect("DBSIZE"), "0");
}

#[test]
fn tls_settings_are_checked_when_building() {
    let pem = TestCertificates::generate().expect("a CA");
    for (what, builder) in [
        (
            "a CA for a plain URL",
            RedisLock::builder()
                .url("redis://127.0.0.1:1/")
                .tls_ca_cert(pem.ca_cert_pem()),
        ),
        (
            "a CA that is not PEM",
            RedisLock::builder()
                .url("rediss://127.0.0.1:1/")
                .tls_ca_cert("not a certificate"),
        ),
        (
            "a client key that is not PEM",
            RedisLock::builder()
                .url("rediss://127.0.0.1:1/")
                .tls_client_cert(pem.client_cert_pem(), "not a key"),
        ),
    ] {
        assert!(
            matches!(builder.build(), Err(LockError::InvalidInput { .. })),
            "{what}"
        );
    }
}

/// A certificate rejection: a connect-time backend error that says retrying cannot help, and
/// quickly (no hang until some timeout).
fn assert_rejected(err: &LockError, started: Instant) {
    assert!(
        started.elapsed() < CONNECT_TIMEOUT + SLACK,
        "{:?}",
        started.elapsed()
    );
    match err {
        LockError::Backend {
            op,
            retryable: false,
            ..
        } => assert!(matches!(op, Op::Connect | Op::Acquire), "{err:?}"),
        other => panic!("expected a final backend error, got {other:?}"),
    }
}
