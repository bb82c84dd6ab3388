//! The fair lock when a waiter fails mid-queue: a waiting process that is SIGKILLed stops
//! holding the others back within its entry's expiry (not its lease), and a waiter whose
//! attempt times out after the server ran it leaves no entry behind.

use std::process::Stdio;
use std::time::Duration;

use lock_core::{FAIR_ENTRY_TTL, Kind, Locker};
use lock_redis::RedisLock;
use lock_testkit::{FaultProxy, RedisServer};
use redis::aio::MultiplexedConnection;
use tokio::time::{Instant, sleep};

use crate::common::{locker_on, raw, server, slow_polling_on};

const NAME: &str = "job";
const URL_VAR: &str = "DISTLOCK_TEST_WAITER_URL";
/// The lease the waiters ask for: far longer than an entry lasts, so a test that waits about
/// an entry's life cannot pass by waiting for a lease.
const LONG_LEASE: Duration = Duration::from_secs(60);

/// The queue and the entries of `NAME`: `(queue, entries)`.
fn queue_keys(server: &RedisServer) -> (String, String) {
    let keys = RedisLock::from_url(&server.url())
        .expect("url")
        .lock_keys(NAME)
        .of_kind(Kind::Fair { queued: true });
    (keys[2].clone(), keys[3].clone())
}

/// The tokens in the queue, first first.
async fn queued(conn: &mut MultiplexedConnection, queue: &str) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(queue)
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .expect("ZRANGE")
}

/// Polls (every 10 ms, at most `limit`) until the queue holds `n` tokens; them, or panics.
async fn until_queued(
    conn: &mut MultiplexedConnection,
    queue: &str,
    n: usize,
    limit: Duration,
) -> Vec<String> {
    let until = Instant::now() + limit;
    loop {
        let tokens = queued(conn, queue).await;
        if tokens.len() == n {
            return tokens;
        }
        assert!(
            Instant::now() < until,
            "the queue never held {n} waiters: {tokens:?}"
        );
        sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_waiter_holds_the_queue_back_only_until_its_entry_lapses() {
    let server = server();
    let (queue, _) = queue_keys(&server);
    let mut conn = raw(&server).await;
    let holder = locker_on(&server)
        .fair(NAME)
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("free");

    // A process that queues first (see `queued_waiter_process`); killed by its PID if this test
    // fails before it does.
    let mut child = tokio::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            lock_testkit::child_test!(queued_waiter_process).as_str(),
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(URL_VAR, server.url())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the waiter process");
    let dead = until_queued(&mut conn, &queue, 1, Duration::from_secs(20)).await;

    // A waiter of another process, behind it.
    let next = tokio::spawn({
        let locker = slow_polling_on(&server);
        async move {
            let asked = Instant::now();
            let guard = locker
                .fair(NAME)
                .fixed_ttl(LONG_LEASE)
                .wait(Duration::from_secs(20))
                .await;
            (guard, asked)
        }
    });
    let line = until_queued(&mut conn, &queue, 2, Duration::from_secs(5)).await;
    assert_eq!(
        line[0], dead[0],
        "the process to be killed is first in line"
    );

    child.start_kill().expect("SIGKILL by PID");
    let status = child.wait().await.expect("reaped");
    assert!(!status.success(), "killed, not finished: {status}");
    let released = Instant::now();
    holder.release().await.expect("ours");

    let (guard, _asked) = next.await.expect("no panic");
    let guard = guard.expect("granted once the dead waiter's entry lapsed");
    let waited = released.elapsed();
    eprintln!("granted {waited:?} after the release, past a SIGKILLed head of the queue");
    assert!(
        waited < FAIR_ENTRY_TTL + Duration::from_secs(2),
        "held back no longer than the dead waiter's entry ({FAIR_ENTRY_TTL:?}) plus a retry, \
         not its lease ({LONG_LEASE:?}): {waited:?}"
    );
    assert!(
        queued(&mut conn, &queue).await.is_empty(),
        "the dead waiter's entry is gone"
    );
    guard.release().await.expect("ours");
}

/// The waiter process of the test above: queues for the held lock and waits until killed.
#[tokio::test]
#[ignore = "run as a child process by a_sigkilled_waiter_holds_the_queue_back_only_until_its_entry_lapses"]
async fn queued_waiter_process() {
    let Ok(url) = std::env::var(URL_VAR) else {
        return;
    };
    let locker = Locker::new(RedisLock::from_url(&url).expect("url"));
    // Bounded: killed long before; if not, it gives up after 60 s.
    let answer = locker
        .fair(NAME)
        .fixed_ttl(LONG_LEASE)
        .wait(Duration::from_secs(60))
        .await;
    drop(answer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_attempt_times_out_leaves_no_entry() {
    let server = server();
    let (queue, entries) = queue_keys(&server);
    let mut conn = raw(&server).await;
    let holder = locker_on(&server)
        .fair(NAME)
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("free");

    // The waiter talks to the server through the proxy, with a short command timeout.
    let proxy = FaultProxy::start(server.addr()).expect("proxy");
    let waiter = Locker::new(
        RedisLock::builder()
            .url(proxy.url())
            .connect_timeout(Duration::from_secs(3))
            .command_timeout(Duration::from_millis(350))
            .build()
            .expect("url"),
    );
    let wait = Duration::from_millis(2_600);
    let waiting = tokio::spawn(async move {
        waiter
            .fair(NAME)
            .fixed_ttl(LONG_LEASE)
            .wait(wait)
            .await
            .map(drop)
    });
    let token = until_queued(&mut conn, &queue, 1, Duration::from_secs(5)).await[0].clone();
    let lapses = |conn: &mut MultiplexedConnection| {
        let mut conn = conn.clone();
        let (entries, token) = (entries.clone(), token.clone());
        async move {
            redis::cmd("ZSCORE")
                .arg(entries)
                .arg(token)
                .query_async::<Option<f64>>(&mut conn)
                .await
                .expect("ZSCORE")
        }
    };
    let first = lapses(&mut conn).await.expect("queued");

    // From now on every round trip takes 400 ms: the waiter's next attempt (its entry's
    // renewal, due within half an entry's life) reaches the server after 200 ms and runs there,
    // and its answer comes after the waiter stopped waiting for it at 350 ms.
    proxy.set_latency(Duration::from_millis(200));
    let mut renewed = false;
    let watch_until = Instant::now() + FAIR_ENTRY_TTL;
    while !waiting.is_finished() && Instant::now() < watch_until {
        match lapses(&mut conn).await {
            Some(score) if score > first => renewed = true,
            Some(_) => {}
            None => break,
        }
        sleep(Duration::from_millis(5)).await;
    }
    let answer = waiting.await.expect("no panic");
    let gave_up = Instant::now();
    assert!(answer.is_err(), "not granted: the lock is held: {answer:?}");
    assert!(
        renewed,
        "the timed-out attempt ran on the server (it renewed the entry)"
    );

    // The waiter withdrew what it left (through the slow proxy, where a new connection takes a
    // few 400 ms round trips): the queue is empty well before any entry seen in it would have
    // lapsed (its key expires with its last entry, so a lapsed queue looks empty too).
    let mut lapse_ms = 0_u64;
    let emptied_ms = loop {
        let seen: Vec<(String, u64)> = redis::cmd("ZRANGE")
            .arg(&entries)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await
            .expect("ZRANGE");
        lapse_ms = seen.iter().map(|(_, at)| *at).fold(lapse_ms, u64::max);
        let (secs, micros): (u64, u64) = redis::cmd("TIME")
            .query_async(&mut conn)
            .await
            .expect("TIME");
        if queued(&mut conn, &queue).await.is_empty() && seen.is_empty() {
            break Some(secs * 1_000 + micros / 1_000);
        }
        if gave_up.elapsed() > FAIR_ENTRY_TTL {
            break None;
        }
        sleep(Duration::from_millis(20)).await;
    };
    eprintln!(
        "queue empty {:?} after the waiter gave up (server ms {emptied_ms:?}); the last entry \
         seen would have lapsed at {lapse_ms}",
        gave_up.elapsed()
    );
    let emptied_ms = emptied_ms.expect("the timed-out waiter's entries are gone");
    assert!(
        emptied_ms + 500 < lapse_ms,
        "the timed-out waiter's entries were withdrawn, not left to lapse: emptied at {emptied_ms}, \
         the last would have lapsed at {lapse_ms}"
    );

    // Nobody ahead: a single try, which is granted only when nobody queues, gets the lock.
    proxy.heal();
    holder.release().await.expect("ours");
    let next = locker_on(&server)
        .fair(NAME)
        .try_acquire()
        .await
        .expect("answers")
        .expect("free, with nobody queued");
    next.release().await.expect("ours");
}
