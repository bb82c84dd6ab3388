//! `release` on PostgreSQL: by token through lock-postgres's own release (a wrong token changes
//! nothing; the holder's wakes a waiter with the library's NOTIFY; a semaphore holder's token
//! returns its permits), and advisory locks: `--token` refused naming the session's pid,
//! `--force` on a terminal terminates that backend.

use std::time::{Duration, Instant};

use lock_core::{Backoff, Locker};
use lock_postgres::advisory_key;

use super::{lock, locker, server, session};
use crate::common::{distlock, hold, json, stderr};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_token_wakes_waiters_and_advisory_locks_are_refused() {
    let server = server();
    let url = server.url();
    let urls = vec![url.clone()];
    let holder = locker(&url);
    let mut guard = hold(&holder, "job:nightly").await;
    let token = guard.lease().token().to_hex().as_str().to_owned();

    let u = urls.clone();
    let wrong = tokio::task::spawn_blocking(move || {
        distlock(
            &u,
            &[
                "release",
                "job:nightly",
                "--token",
                "0123456789abcdef0123456789abcdef",
            ],
        )
    })
    .await
    .expect("run");
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    assert!(
        stderr(&wrong).contains("another token"),
        "{}",
        stderr(&wrong)
    );
    assert!(
        guard.extend(Duration::from_secs(30)).await.is_ok(),
        "the holder still owns it"
    );

    let u = urls.clone();
    let forced =
        tokio::task::spawn_blocking(move || distlock(&u, &["release", "job:nightly", "--force"]))
            .await
            .expect("run");
    assert_eq!(forced.status.code(), Some(1));
    assert!(stderr(&forced).contains("terminal"), "{}", stderr(&forced));

    // A waiter whose polling alone would take 10 s: waking sooner means it was announced.
    let waiter = Locker::builder(lock(&url))
        .backoff(Backoff::new(
            Duration::from_secs(10),
            Duration::from_secs(10),
        ))
        .build();
    let waiting = tokio::spawn(async move {
        let guard = waiter
            .lock("job:nightly")
            .wait(Duration::from_secs(60))
            .acquire()
            .await
            .expect("granted after the release");
        (Instant::now(), guard)
    });
    tokio::time::sleep(Duration::from_millis(800)).await; // the waiter listens and sleeps
    let u = urls.clone();
    let t = token.clone();
    let released = tokio::task::spawn_blocking(move || {
        distlock(&u, &["--json", "release", "job:nightly", "--token", &t])
    })
    .await
    .expect("run");
    let released_at = Instant::now();
    let doc = json(&released);
    assert_eq!(doc["released"], true, "{doc:#}");
    assert_eq!(doc["token"], token.as_str());
    let (granted, next) = waiting.await.expect("waiter");
    assert!(
        granted.saturating_duration_since(released_at) < Duration::from_secs(5),
        "the waiter was woken, not left to its 10 s backoff"
    );
    assert_ne!(next.lease().token().to_hex().as_str(), token);
    assert!(
        guard.release().await.is_err(),
        "the old guard no longer owns it"
    );

    // A semaphore holder's token (as `show` lists it) returns its permits.
    let permit = holder
        .semaphore("pool", 1)
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .expect("permit");
    let permit_token = permit.lease().token().to_hex().as_str().to_owned();
    let u = urls.clone();
    let out = tokio::task::spawn_blocking(move || {
        distlock(&u, &["release", "pool", "--token", &permit_token])
    })
    .await
    .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let again = holder
        .semaphore("pool", 1)
        .lease(Duration::from_secs(30))
        .wait(Duration::from_secs(1))
        .acquire()
        .await;
    assert!(again.is_ok(), "the permit was returned");

    // An advisory lock has no token: refused, naming the session that holds it.
    let (billing, pid) = session(&url, "billing-worker").await;
    billing
        .execute("SELECT pg_advisory_lock($1)", &[&advisory_key("billing")])
        .await
        .expect("advisory lock");
    let u = urls.clone();
    let refused = tokio::task::spawn_blocking(move || {
        distlock(
            &u,
            &[
                "release",
                "billing",
                "--token",
                "0123456789abcdef0123456789abcdef",
            ],
        )
    })
    .await
    .expect("run");
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("backend pid {pid}")) && err.contains("advisory"),
        "{err}"
    );
    assert!(!billing.is_closed(), "the session is left alone");
    drop((next, permit, again));
}

/// `release --force` of an advisory lock on a terminal: the question names the backend; `no`
/// leaves it; `yes` terminates it, and the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_terminates_the_holding_backend() {
    let server = server();
    let url = server.url();
    let (billing, pid) = session(&url, "billing-worker").await;
    billing
        .execute("SELECT pg_advisory_lock($1)", &[&advisory_key("stuck")])
        .await
        .expect("advisory lock");
    let u = url.clone();
    let (code, screen) =
        tokio::task::spawn_blocking(move || crate::release_force::force(&u, "stuck", "no"))
            .await
            .expect("run");
    assert_eq!(code, Some(1), "{screen}");
    assert!(screen.contains(&format!("backend pid {pid}")), "{screen}");
    assert!(screen.contains("billing-worker"), "{screen}");
    assert!(!billing.is_closed(), "left alone after \"no\"");

    let u = url.clone();
    let (code, screen) =
        tokio::task::spawn_blocking(move || crate::release_force::force(&u, "stuck", "yes"))
            .await
            .expect("run");
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("terminated backend pid"), "{screen}");
    let ended = billing.query_one("SELECT 1", &[]).await;
    assert!(ended.is_err(), "the session was terminated");
    let u = url.clone();
    let doc =
        tokio::task::spawn_blocking(move || json(&distlock(&[u], &["--json", "show", "stuck"])))
            .await
            .expect("run");
    assert_eq!(doc["held"], false, "{doc:#}");
}
