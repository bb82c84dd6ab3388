//! Over TLS (`rediss://` with a private CA): `ls`, `release` and `run` work with `--tls-ca`;
//! without it the server's certificate does not verify: one line, a non-zero exit.

use std::time::Duration;

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_testkit::RedisServer;

use crate::common::{distlock, find, json, stderr, token_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_ca() {
    let server = RedisServer::builder()
        .tls(true)
        .start()
        .expect("TLS redis-server");
    let url = server.url();
    assert!(url.starts_with("rediss://"));
    let ca = server.ca_cert_path().expect("CA file");
    let ca_arg = ca.display().to_string();
    let lock = RedisLock::builder()
        .url(url.clone())
        .tls_ca_cert(server.ca_cert_pem().expect("CA").as_bytes().to_vec())
        .build()
        .expect("lock");
    let locker = Locker::new(lock);
    let guard = locker
        .lock("tls:job")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .expect("acquire over TLS");
    let token = token_of(&guard);

    let urls = vec![url.clone()];
    let (listed, untrusted, released, ran) = tokio::task::spawn_blocking(move || {
        (
            distlock(&urls, &["--tls-ca", &ca_arg, "--json", "ls"]),
            distlock(&urls, &["ls"]),
            distlock(
                &urls,
                &["--tls-ca", &ca_arg, "release", "tls:job", "--token", &token],
            ),
            distlock(
                &urls,
                &[
                    "--tls-ca", &ca_arg, "run", "tls:job", "--wait", "2s", "--", "true",
                ],
            ),
        )
    })
    .await
    .expect("run distlock");
    assert_eq!(
        find(&json(&listed), "tls:job", "mutex")["token"],
        token_of(&guard).as_str()
    );
    assert_eq!(untrusted.status.code(), Some(69), "{}", stderr(&untrusted));
    assert_eq!(
        stderr(&untrusted).lines().count(),
        1,
        "{}",
        stderr(&untrusted)
    );
    assert_eq!(released.status.code(), Some(0), "{}", stderr(&released));
    assert_eq!(
        ran.status.code(),
        Some(0),
        "the lock was free again: {}",
        stderr(&ran)
    );
    assert!(
        guard.release().await.is_err(),
        "the guard lost it to the operator"
    );
}
