//! A cluster that cannot serve gives a typed error within the configured timeouts: every
//! member down, no quorum, a wrong endpoint, bad credentials. Nothing hangs.

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{LockError, Op, Token};
use lock_etcd::EtcdLock;
use lock_testkit::{EtcdCluster, free_port};

use crate::common::{lock_on, one_member};

const TTL: Duration = Duration::from_secs(5);
/// The lock's connect and command timeouts in these tests.
const TIMEOUT: Duration = Duration::from_millis(800);
/// The bound on a refused authentication (bcrypt on the server).
const AUTH_TIMEOUT: Duration = Duration::from_secs(10);
/// The bound on an answer: a few timeouts (connect, then a request), never a hang.
const BOUND: Duration = Duration::from_secs(5);

fn lock_with_timeouts(endpoints: Vec<String>) -> EtcdLock {
    EtcdLock::builder()
        .endpoints(endpoints)
        .connect_timeout(TIMEOUT)
        .command_timeout(TIMEOUT)
        .build()
        .expect("valid endpoints")
}

/// A try on `lock`, which must end within [`BOUND`] with an error a caller can act on.
async fn try_fails(lock: &EtcdLock, name: &str) -> LockError {
    let token = Token::generate().expect("rng");
    let answer = tokio::time::timeout(BOUND, lock.try_acquire(name, token, TTL))
        .await
        .unwrap_or_else(|_| panic!("try_acquire on {name} hung past {BOUND:?}"));
    match answer {
        Err(err) => err,
        Ok(attempt) => panic!("a cluster that cannot serve answered {attempt:?}"),
    }
}

fn assert_unavailable(err: &LockError) {
    assert!(
        matches!(err, LockError::Timeout { .. } | LockError::Backend { .. }),
        "expected a timeout or a backend error, got {err:?}"
    );
    assert!(
        err.is_retryable(),
        "an unavailable cluster is retryable: {err:?}"
    );
}

#[tokio::test]
async fn every_member_down_is_a_retryable_error() {
    let mut cluster = one_member();
    let lock = lock_with_timeouts(cluster.endpoints());
    let token = Token::generate().expect("rng");
    assert!(matches!(
        lock.try_acquire("before", token, TTL).await,
        Ok(Attempt::Acquired(_))
    ));
    cluster.kill(0);
    assert_unavailable(&try_fails(&lock, "down").await);
    let ping = tokio::time::timeout(BOUND, lock.ping())
        .await
        .expect("ping hung");
    assert!(ping.is_err(), "ping of a dead cluster succeeded");
}

#[tokio::test]
async fn no_quorum_is_a_retryable_error() {
    let mut cluster = EtcdCluster::builder().members(3).start().expect("start");
    let survivor = cluster.leader().expect("leader");
    let lock = lock_with_timeouts(vec![cluster.member(survivor).endpoint()]);
    let token = Token::generate().expect("rng");
    assert!(matches!(
        lock.try_acquire("before", token, TTL).await,
        Ok(Attempt::Acquired(_))
    ));
    for i in (0..3).filter(|i| *i != survivor) {
        cluster.kill(i);
    }
    assert_unavailable(&try_fails(&lock, "no-quorum").await);
}

#[tokio::test]
async fn a_wrong_endpoint_is_a_retryable_error() {
    let nothing = format!("http://127.0.0.1:{}", free_port());
    let lock = lock_with_timeouts(vec![nothing]);
    assert_unavailable(&try_fails(&lock, "nowhere").await);
}

#[tokio::test]
async fn bad_credentials_are_refused_for_good() {
    let cluster = one_member();
    let admin = lock_on(&cluster);
    let mut client = admin.client().await.expect("connect");
    client
        .user_add("root", "rootpw", None)
        .await
        .expect("add root");
    client.role_add("root").await.expect("add role root");
    client
        .user_grant_role("root", "root")
        .await
        .expect("grant root");
    client.auth_enable().await.expect("enable auth");

    let wrong = EtcdLock::builder()
        .endpoints(cluster.endpoints())
        .user("root", "not-the-password")
        // etcd checks a password with bcrypt: on a loaded machine the refusal can take longer
        // than the 800 ms the other cases use, and a timeout would hide what is tested.
        .connect_timeout(AUTH_TIMEOUT)
        .command_timeout(AUTH_TIMEOUT)
        .build()
        .expect("valid settings");
    let err = try_fails(&wrong, "auth").await;
    assert!(
        matches!(
            err,
            LockError::Backend {
                op: Op::Connect,
                retryable: false,
                ..
            }
        ),
        "a wrong password must be a non-retryable connect error: {err:?}"
    );

    let right = EtcdLock::builder()
        .endpoints(cluster.endpoints())
        .user("root", "rootpw")
        .build()
        .expect("valid settings");
    let token = Token::generate().expect("rng");
    assert!(matches!(
        right.try_acquire("auth", token, TTL).await,
        Ok(Attempt::Acquired(_))
    ));
}
