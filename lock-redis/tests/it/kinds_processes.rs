//! The read-write lock and the semaphore across OS processes on one real redis-server.
//!
//! The test binary re-runs itself: a parent test starts copies of this executable that run
//! only one `#[ignore]`d child test each (`lock_testkit::run_test_in_processes`, or
//! `spawn_test_process` where the parent kills the child by its PID), with the server's URL
//! in the environment. Participants report to the parent through counters in the same Redis,
//! updated by small scripts in one atomic step with the check they make, so the parent judges
//! what every process saw. The read-write and permit loops also record every grant's valid
//! lease (`lock_testkit::history::record`), and the history checker judges them: no overlap
//! beside a writer, no more permit holds than permits, writers' tokens that grow.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::{Backoff, Kind, LockError, Locker};
use lock_redis::RedisLock;
use lock_testkit::history::Share;
use lock_testkit::history::record::{self, HistoryDir, Recorder};
use redis::aio::MultiplexedConnection;

use crate::common::{self, exists, incr, raw, server, zcard};

const URL_VAR: &str = "DISTLOCK_KINDS_URL";
/// `1` or `0`: the writer preference of the reader stream's readers.
const PREFERENCE_VAR: &str = "DISTLOCK_KINDS_WRITER_PREFERENCE";
/// How many permits a hanging permit holder takes.
const PERMITS_VAR: &str = "DISTLOCK_KINDS_PERMITS";

/// Enters a critical section: `INCRBY` this kind's "inside" counter (`KEYS[1]`) by `ARGV[2]`,
/// and in the same step checks what may not be inside with it: for a writer (`ARGV[1]` `w`)
/// nobody else at all, for a reader no writer (`KEYS[2]`), for permits (`ARGV[1]` `p`) no more
/// than `ARGV[3]`. A broken rule counts in `KEYS[3]`; `KEYS[4]` keeps the peak of `KEYS[1]`.
const ENTER: &str = r"
local mine = redis.call('INCRBY', KEYS[1], ARGV[2])
local other = tonumber(redis.call('GET', KEYS[2]) or '0')
if other > 0 or (ARGV[1] == 'w' and mine > 1) or (ARGV[1] == 'p' and mine > tonumber(ARGV[3])) then
  redis.call('INCR', KEYS[3])
end
if mine > tonumber(redis.call('GET', KEYS[4]) or '0') then
  redis.call('SET', KEYS[4], mine)
end
return mine
";

/// Leaves it: the same check once more (a writer that came in during the section is caught
/// here), then `DECRBY`.
const LEAVE: &str = r"
local mine = tonumber(redis.call('GET', KEYS[1]) or '0')
local other = tonumber(redis.call('GET', KEYS[2]) or '0')
if other > 0 or (ARGV[1] == 'w' and mine > 1) or (ARGV[1] == 'p' and mine > tonumber(ARGV[3])) then
  redis.call('INCR', KEYS[3])
end
return redis.call('DECRBY', KEYS[1], ARGV[2])
";

/// The counters one test's participants share (prefixed by the test's lock name).
struct Section {
    prefix: &'static str,
}

impl Section {
    fn key(&self, what: &str) -> String {
        format!("{}:{what}", self.prefix)
    }

    /// `role`: `r`, `w` or `p`; `amount`: 1, or a holder's permits; `max`: the permits.
    async fn run(
        &self,
        conn: &mut MultiplexedConnection,
        script: &str,
        role: &str,
        amount: u32,
        max: u32,
    ) {
        let (mine, other) = match role {
            "r" => ("readers-inside", "writers-inside"),
            "w" => ("writers-inside", "readers-inside"),
            _ => ("permits-inside", "nobody"),
        };
        let peak = format!("peak-{mine}");
        redis::Script::new(script)
            .key(self.key(mine))
            .key(self.key(other))
            .key(self.key("violations"))
            .key(self.key(&peak))
            .arg(role)
            .arg(amount)
            .arg(max)
            .invoke_async::<i64>(conn)
            .await
            .expect("the section script");
    }

    async fn enter(&self, conn: &mut MultiplexedConnection, role: &str, amount: u32, max: u32) {
        self.run(conn, ENTER, role, amount, max).await;
    }

    async fn leave(&self, conn: &mut MultiplexedConnection, role: &str, amount: u32, max: u32) {
        self.run(conn, LEAVE, role, amount, max).await;
    }
}

async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

async fn get_i64(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("GET")
        .arg(key)
        .query_async::<Option<i64>>(conn)
        .await
        .expect("GET")
        .unwrap_or(0)
}

/// The server's clock in milliseconds (the clock the scripts score expiries with).
async fn server_ms(conn: &mut MultiplexedConnection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await.expect("TIME");
    secs * 1000 + micros / 1000
}

/// Every member of the sorted set `key` with its score (whole server milliseconds).
async fn members(conn: &mut MultiplexedConnection, key: &str) -> Vec<(String, i64)> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(conn)
        .await
        .expect("ZRANGE")
}

/// Waits (at most `limit`, in 20 ms steps) until `key` holds at least `at_least`.
async fn wait_for_count(
    conn: &mut MultiplexedConnection,
    key: &str,
    at_least: i64,
    limit: Duration,
) {
    let started = Instant::now();
    while get_i64(conn, key).await < at_least {
        assert!(
            started.elapsed() < limit,
            "{key} did not reach {at_least} within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A start line for the processes of one test: each arrives, then waits (bounded) until all
/// `count` have, so their loops really run at the same time however slowly each one started.
async fn start_together(conn: &mut MultiplexedConnection, key: &str, count: usize) {
    incr(conn, key).await;
    wait_for_count(conn, key, count as i64, Duration::from_secs(30)).await;
}

fn url() -> Option<String> {
    std::env::var(URL_VAR).ok()
}

fn locker(url: &str) -> Locker {
    Locker::new(RedisLock::from_url(url).expect("url"))
}

fn lock_at(url: &str) -> RedisLock {
    RedisLock::from_url(url).expect("url")
}

// ---------------------------------------------------------------------------------------------
// Readers and writers in three processes.

const RW_PROCESSES: usize = 3;
const RW_ROUNDS: u32 = 10;
const RW: Section = Section { prefix: "rw" };

/// Three processes, each with two reader tasks and a writer task on one locker: a writer is
/// never inside with anyone, readers were inside together at some point, and every section
/// ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_processes_a_writer_is_alone_and_readers_share() {
    let server = server();
    let histories = HistoryDir::new().expect("the history directory");
    lock_testkit::run_test_in_processes(
        &lock_testkit::child_test!(rw_worker),
        &[(URL_VAR, server.url()), histories.env()],
        RW_PROCESSES,
        Duration::from_secs(120),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let verdict = histories.assert_correct(RW_PROCESSES * 3 * RW_ROUNDS as usize);
    assert!(verdict.most_shared > 1, "the recorded readers never shared");
    let mut conn = raw(&server).await;
    let processes = RW_PROCESSES as i64;
    let rounds = i64::from(RW_ROUNDS);
    assert_eq!(
        get_i64(&mut conn, &RW.key("violations")).await,
        0,
        "a writer was inside with a reader or another writer"
    );
    assert_eq!(
        get_i64(&mut conn, &RW.key("reads")).await,
        processes * 2 * rounds
    );
    assert_eq!(
        get_i64(&mut conn, &RW.key("writes")).await,
        processes * rounds
    );
    assert_eq!(get_i64(&mut conn, &RW.key("peak-writers-inside")).await, 1);
    let peak_readers = get_i64(&mut conn, &RW.key("peak-readers-inside")).await;
    assert!(
        peak_readers > 1,
        "readers never shared the lock (peak {peak_readers} inside at once)"
    );
    assert_eq!(get_i64(&mut conn, &RW.key("readers-inside")).await, 0);
    assert_eq!(get_i64(&mut conn, &RW.key("writers-inside")).await, 0);
}

/// One process of the test above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by across_processes_a_writer_is_alone_and_readers_share"]
async fn rw_worker() {
    let Some(url) = url() else { return };
    let locker = locker(&url);
    let recorder = Arc::new(Recorder::from_env().expect("the history directory"));
    start_together(&mut connect(&url).await, &RW.key("ready"), RW_PROCESSES).await;
    let tasks: Vec<_> = ["r", "r", "w"]
        .into_iter()
        .map(|role| {
            let (locker, url, recorder) = (locker.clone(), url.clone(), Arc::clone(&recorder));
            tokio::spawn(async move {
                let mut conn = connect(&url).await;
                for _ in 0..RW_ROUNDS {
                    let request = if role == "r" {
                        locker.read("rw")
                    } else {
                        locker.write("rw")
                    };
                    let requested_ns = record::monotonic_ns();
                    let guard = request
                        .wait(Duration::from_secs(60))
                        .await
                        .unwrap_or_else(|e| panic!("{role}: {e}"));
                    let start_ns = record::monotonic_ns();
                    RW.enter(&mut conn, role, 1, 0).await;
                    let hold = if role == "r" { 40 } else { 15 };
                    tokio::time::sleep(Duration::from_millis(hold)).await;
                    RW.leave(&mut conn, role, 1, 0).await;
                    let share = if role == "r" {
                        Share::Read
                    } else {
                        Share::Exclusive
                    };
                    recorder.lease("rw", &guard, (requested_ns, start_ns), share);
                    guard.release().await.expect("still ours");
                    incr(
                        &mut conn,
                        &RW.key(if role == "r" { "reads" } else { "writes" }),
                    )
                    .await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a worker task");
    }
}

// ---------------------------------------------------------------------------------------------
// A stream of overlapping readers and one writer.

const STREAM: Section = Section { prefix: "stream" };
const STREAM_HOLD: Duration = Duration::from_millis(300);

/// Starts the reader stream (2 processes × 2 staggered readers, each holding 300 ms and asking
/// again at once) with the given writer preference, waits until readers overlap, and returns
/// the stream's processes.
async fn start_stream(
    server: &lock_testkit::RedisServer,
    preference: bool,
) -> tokio::task::JoinHandle<Result<(), String>> {
    let stream = tokio::spawn(lock_testkit::run_test_in_processes(
        &lock_testkit::child_test!(reader_stream),
        &[
            (URL_VAR, server.url()),
            (PREFERENCE_VAR, u8::from(preference).to_string()),
        ],
        2,
        Duration::from_secs(90),
    ));
    let mut conn = raw(server).await;
    wait_for_count(
        &mut conn,
        &STREAM.key("peak-readers-inside"),
        3,
        Duration::from_secs(30),
    )
    .await;
    stream
}

async fn stop_stream(
    server: &lock_testkit::RedisServer,
    stream: tokio::task::JoinHandle<Result<(), String>>,
) {
    let mut conn = raw(server).await;
    incr(&mut conn, &STREAM.key("stop")).await;
    stream
        .await
        .expect("joined")
        .unwrap_or_else(|e| panic!("the reader stream: {e}"));
    assert_eq!(
        get_i64(&mut conn, &STREAM.key("violations")).await,
        0,
        "the writer was inside with readers"
    );
}

/// Writer preference: a writer gets in within a generous bound (5 s, with readers holding
/// 300 ms each) although readers keep overlapping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_overlapping_readers_does_not_starve_a_writer() {
    let server = server();
    let stream = start_stream(&server, true).await;
    let mut conn = raw(&server).await;
    let started = Instant::now();
    let guard = locker(&server.url())
        .write("stream")
        .wait(Duration::from_secs(20))
        .await
        .expect("the writer gets in");
    let waited = started.elapsed();
    STREAM.enter(&mut conn, "w", 1, 0).await;
    STREAM.leave(&mut conn, "w", 1, 0).await;
    guard.release().await.expect("ours");
    assert!(
        waited < Duration::from_secs(5),
        "the writer waited {waited:?} behind a stream of readers"
    );
    stop_stream(&server, stream).await;
}

/// The same stream without writer preference (on both sides) keeps a writer out for as long
/// as it flows: what the preference is for. (Here the readers overlap all the time, so the
/// writer's 3 s wait runs out; once the stream stops it gets in.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_writer_preference_a_stream_of_readers_starves_the_writer() {
    let server = server();
    let stream = start_stream(&server, false).await;
    let locker = locker(&server.url());
    let starved = locker
        .write("stream")
        .writer_preference(false)
        .wait(Duration::from_secs(3))
        .await
        .map(drop);
    assert!(
        matches!(starved, Err(LockError::Timeout { .. })),
        "without writer preference a writer got in through overlapping readers: {starved:?}"
    );
    stop_stream(&server, stream).await;
    locker
        .write("stream")
        .writer_preference(false)
        .wait(Duration::from_secs(10))
        .await
        .expect("the writer gets in once the stream stopped")
        .release()
        .await
        .expect("ours");
}

/// One process of the reader stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by the reader stream tests"]
async fn reader_stream() {
    let Some(url) = url() else { return };
    let preference = std::env::var(PREFERENCE_VAR).is_ok_and(|v| v == "1");
    let locker = locker(&url);
    let tasks: Vec<_> = (0..2u32)
        .map(|i| {
            let (locker, url) = (locker.clone(), url.clone());
            tokio::spawn(async move {
                let mut conn = connect(&url).await;
                tokio::time::sleep(STREAM_HOLD / 2 * i).await;
                let started = Instant::now();
                // Bounded: 200 sections or 60 s, whichever ends first, unless told to stop.
                for _ in 0..200 {
                    if get_i64(&mut conn, &STREAM.key("stop")).await > 0
                        || started.elapsed() > Duration::from_secs(60)
                    {
                        break;
                    }
                    let guard = locker
                        .read("stream")
                        .writer_preference(preference)
                        .wait(Duration::from_secs(30))
                        .await
                        .expect("a reader of the stream");
                    STREAM.enter(&mut conn, "r", 1, 0).await;
                    tokio::time::sleep(STREAM_HOLD).await;
                    STREAM.leave(&mut conn, "r", 1, 0).await;
                    guard.release().await.expect("ours");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a stream task");
    }
}

// ---------------------------------------------------------------------------------------------
// A reader killed while it holds.

/// A reader process SIGKILLed while it holds a renewed 1 s lease: a writer waiting from then
/// on gets in once the reader's share expires on the server, not before, and not long after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_readers_share_frees_the_writer_at_its_expiry() {
    let server = server();
    let mut conn = raw(&server).await;
    let readers_key = lock_at(&server.url())
        .lock_keys("hang")
        .of_kind(Kind::Read {
            writer_preference: true,
        })[1]
        .clone();
    let mut reader = lock_testkit::spawn_test_process(
        &lock_testkit::child_test!(hanging_reader),
        &[(URL_VAR, server.url())],
    )
    .expect("start the reader process");
    wait_for_count(&mut conn, "hang:in", 1, Duration::from_secs(30)).await;
    reader.start_kill().expect("SIGKILL the reader by its PID");
    reader.wait().await.expect("reaped");
    let killed_at = server_ms(&mut conn).await;
    let share = members(&mut conn, &readers_key).await;
    assert_eq!(share.len(), 1, "the killed reader's share: {share:?}");
    let expires_at = share[0].1;
    assert!(
        expires_at > killed_at && expires_at <= killed_at + 1_100,
        "the share outlives the kill by at most its 1 s lease: expires at {expires_at}, killed at {killed_at}"
    );
    let started = Instant::now();
    let writer = locker(&server.url())
        .write("hang")
        .wait(Duration::from_secs(20))
        .await
        .expect("the writer gets in after the dead reader's lease");
    let granted_at = server_ms(&mut conn).await;
    let waited = started.elapsed();
    assert!(
        granted_at >= expires_at,
        "the writer got in at {granted_at}, before the reader's share expired at {expires_at}"
    );
    assert!(
        granted_at <= expires_at + 3_000,
        "the writer got in {} ms after the share expired",
        granted_at - expires_at
    );
    let left = u64::try_from(expires_at - killed_at).unwrap_or(0);
    assert!(
        waited + Duration::from_millis(100) >= Duration::from_millis(left),
        "waited {waited:?} for a share {left} ms from its expiry"
    );
    writer.release().await.expect("ours");
}

/// The reader that is killed: it holds a renewed 1 s lease and waits to die.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by a_killed_readers_share_frees_the_writer_at_its_expiry"]
async fn hanging_reader() {
    let Some(url) = url() else { return };
    let locker = locker(&url);
    let _guard = locker
        .read("hang")
        .lease(Duration::from_secs(1))
        .await
        .expect("free");
    incr(&mut connect(&url).await, "hang:in").await;
    tokio::time::sleep(Duration::from_secs(60)).await; // bounded: the parent kills it first
}

// ---------------------------------------------------------------------------------------------
// Renewing one reader.

/// Redisson #7098/#2144: renewing one reader must not move another's expiry, nor cut the
/// readers' key short of it. A reader in another process holds a fixed 20 s share; ours,
/// renewed every 200 ms, moves only its own score.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewing_one_reader_leaves_the_others_expiry_untouched() {
    let server = server();
    let mut conn = raw(&server).await;
    let readers_key = lock_at(&server.url())
        .lock_keys("renew")
        .of_kind(Kind::Read {
            writer_preference: true,
        })[1]
        .clone();
    let other = tokio::spawn(lock_testkit::run_test_in_processes(
        &lock_testkit::child_test!(fixed_reader),
        &[(URL_VAR, server.url())],
        1,
        Duration::from_secs(60),
    ));
    wait_for_count(&mut conn, "renew:in", 1, Duration::from_secs(30)).await;
    let before = members(&mut conn, &readers_key).await;
    assert_eq!(before.len(), 1, "{before:?}");
    let (other_token, other_expiry) = before[0].clone();

    let locker = locker(&server.url());
    let ours = locker
        .read("renew")
        .lease(Duration::from_millis(600))
        .await
        .expect("readers share");
    let our_token = common::token_of(&ours);
    let score = |set: &[(String, i64)], token: &str| {
        set.iter()
            .find(|(member, _)| member == token)
            .map(|(_, score)| *score)
    };
    let first = score(&members(&mut conn, &readers_key).await, &our_token).expect("our share");
    tokio::time::sleep(Duration::from_millis(1_500)).await; // about 7 renewals
    let after = members(&mut conn, &readers_key).await;
    let renewed = score(&after, &our_token).expect("our share, renewed");
    assert!(
        renewed > first + 1_000,
        "our share was renewed: {first} then {renewed}"
    );
    assert_eq!(
        score(&after, &other_token),
        Some(other_expiry),
        "renewing our share moved the other reader's expiry"
    );
    let key_ttl = common::pttl(&mut conn, &readers_key).await;
    let other_left = other_expiry - server_ms(&mut conn).await;
    assert!(
        key_ttl + 50 >= other_left,
        "the readers' key expires in {key_ttl} ms, before the other reader's share ({other_left} ms)"
    );
    ours.release().await.expect("ours");
    assert_eq!(
        score(&members(&mut conn, &readers_key).await, &other_token),
        Some(other_expiry),
        "our release touched the other reader"
    );
    incr(&mut conn, "renew:done").await;
    other
        .await
        .expect("joined")
        .unwrap_or_else(|e| panic!("the other reader: {e}"));
}

/// The other reader: a fixed 20 s share, released when the parent says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by renewing_one_reader_leaves_the_others_expiry_untouched"]
async fn fixed_reader() {
    let Some(url) = url() else { return };
    let locker = locker(&url);
    let mut conn = connect(&url).await;
    let guard = locker
        .read("renew")
        .fixed_ttl(Duration::from_secs(20))
        .await
        .expect("free");
    incr(&mut conn, "renew:in").await;
    wait_for_count(&mut conn, "renew:done", 1, Duration::from_secs(30)).await;
    guard
        .release()
        .await
        .expect("our share outlived the other reader's renewals");
}

// ---------------------------------------------------------------------------------------------
// The semaphore in three processes.

const PERMIT_PROCESSES: usize = 3;
const PERMIT_ROUNDS: u32 = 8;
const MAX: u32 = 3;
const PERMITS: Section = Section { prefix: "permits" };

/// Three processes × two tasks take 1 or 2 of 3 permits in a loop: never more than 3 in use
/// (checked in the same step as each entry and exit), more than one at some point, and all
/// free at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_processes_never_more_than_max_permits() {
    let server = server();
    let histories = HistoryDir::new().expect("the history directory");
    lock_testkit::run_test_in_processes(
        &lock_testkit::child_test!(permit_worker),
        &[(URL_VAR, server.url()), histories.env()],
        PERMIT_PROCESSES,
        Duration::from_secs(120),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // Each task takes 1 and 2 permits in turn: a grant of k permits is k holds.
    let holds = PERMIT_PROCESSES * 2 * PERMIT_ROUNDS as usize * 3 / 2;
    let verdict = histories.assert_correct(holds);
    assert!(
        verdict.most_shared > 1,
        "the recorded permits were never shared"
    );
    let mut conn = raw(&server).await;
    assert_eq!(
        get_i64(&mut conn, &PERMITS.key("violations")).await,
        0,
        "more than {MAX} permits were in use"
    );
    let peak = get_i64(&mut conn, &PERMITS.key("peak-permits-inside")).await;
    assert!(
        (2..=i64::from(MAX)).contains(&peak),
        "peak of permits in use: {peak}"
    );
    assert_eq!(
        get_i64(&mut conn, &PERMITS.key("grants")).await,
        PERMIT_PROCESSES as i64 * 2 * i64::from(PERMIT_ROUNDS)
    );
    let available = locker(&server.url())
        .semaphore("permits", MAX)
        .available()
        .await
        .expect("available");
    assert_eq!(available, MAX);
}

/// One process of the test above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by across_processes_never_more_than_max_permits"]
async fn permit_worker() {
    let Some(url) = url() else { return };
    let locker = locker(&url);
    let recorder = Arc::new(Recorder::from_env().expect("the history directory"));
    start_together(
        &mut connect(&url).await,
        &PERMITS.key("ready"),
        PERMIT_PROCESSES,
    )
    .await;
    let tasks: Vec<_> = (0..2u32)
        .map(|task| {
            let (locker, url, recorder) = (locker.clone(), url.clone(), Arc::clone(&recorder));
            tokio::spawn(async move {
                let mut conn = connect(&url).await;
                for round in 0..PERMIT_ROUNDS {
                    let k = 1 + (round + task) % 2;
                    let requested_ns = record::monotonic_ns();
                    let guard = locker
                        .semaphore("permits", MAX)
                        .permits(k)
                        .wait(Duration::from_secs(60))
                        .await
                        .unwrap_or_else(|e| panic!("{k} permits: {e}"));
                    let start_ns = record::monotonic_ns();
                    PERMITS.enter(&mut conn, "p", k, MAX).await;
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    PERMITS.leave(&mut conn, "p", k, MAX).await;
                    for _ in 0..k {
                        let share = Share::Permit { max: MAX };
                        recorder.lease("permits", &guard, (requested_ns, start_ns), share);
                    }
                    guard.release().await.expect("ours");
                    incr(&mut conn, &PERMITS.key("grants")).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a permit task");
    }
}

/// Two holders (2 and 1 permits of 4, renewed 1 s leases) SIGKILLed while a third, here,
/// keeps its permit: their permits stay taken until their leases run out, then 3 are free
/// again beside the live holder, with nothing leaked; after its release, all 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_permit_holders_leak_nothing() {
    let server = server();
    let mut conn = raw(&server).await;
    let locker = locker(&server.url());
    let semaphore = || locker.semaphore("leak", 4);
    let live = semaphore().await.expect("free");
    let mut holders = Vec::new();
    for k in [2, 1] {
        holders.push(
            lock_testkit::spawn_test_process(
                &lock_testkit::child_test!(hanging_permit_holder),
                &[(URL_VAR, server.url()), (PERMITS_VAR, k.to_string())],
            )
            .expect("start a holder process"),
        );
    }
    wait_for_count(&mut conn, "leak:in", 2, Duration::from_secs(30)).await;
    assert_eq!(semaphore().available().await.expect("available"), 0);
    for holder in &mut holders {
        holder.start_kill().expect("SIGKILL a holder by its PID");
    }
    for holder in &mut holders {
        holder.wait().await.expect("reaped");
    }
    let killed = Instant::now();
    assert_eq!(
        semaphore().available().await.expect("available"),
        0,
        "the killed holders' renewed leases still hold their permits"
    );
    let mut available = 0;
    while available != 3 && killed.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        available = semaphore().available().await.expect("available");
    }
    assert_eq!(
        available, 3,
        "the killed holders' permits did not come back after their leases"
    );
    assert!(live.is_held());
    live.release().await.expect("ours");
    let all = semaphore()
        .permits(4)
        .try_acquire()
        .await
        .expect("try")
        .expect("all 4 permits at once after the holders' leases ran out");
    all.release().await.expect("ours");
}

/// A permit holder that is killed: it holds `PERMITS_VAR` of 4 on a renewed 1 s lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by killed_permit_holders_leak_nothing"]
async fn hanging_permit_holder() {
    let Some(url) = url() else { return };
    let k: u32 = std::env::var(PERMITS_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .expect("permits");
    let locker = locker(&url);
    let _guard = locker
        .semaphore("leak", 4)
        .permits(k)
        .lease(Duration::from_secs(1))
        .wait(Duration::from_secs(10))
        .await
        .expect("permits");
    incr(&mut connect(&url).await, "leak:in").await;
    tokio::time::sleep(Duration::from_secs(60)).await; // bounded: the parent kills it first
}

/// A waiter for 2 permits of 4 while another process holds 3: it stays out, and gets in soon
/// after that process releases — woken by the release (its polling would take 10 s, the
/// holder's renewed lease 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_for_k_permits_wakes_when_another_process_frees_them() {
    let server = server();
    let mut conn = raw(&server).await;
    let holder = tokio::spawn(lock_testkit::run_test_in_processes(
        &lock_testkit::child_test!(three_permit_holder),
        &[(URL_VAR, server.url())],
        1,
        Duration::from_secs(60),
    ));
    wait_for_count(&mut conn, "wake:in", 1, Duration::from_secs(30)).await;
    let slow_polling = Locker::builder(lock_at(&server.url()))
        .backoff(Backoff::new(
            Duration::from_secs(10),
            Duration::from_secs(10),
        ))
        .build();
    let waiter = tokio::spawn(async move {
        slow_polling
            .semaphore("wake", 4)
            .permits(2)
            .wait(Duration::from_secs(40))
            .await
            .map(|guard| (guard, Instant::now()))
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiter.is_finished(), "2 permits granted with 1 free");
    let told = Instant::now();
    incr(&mut conn, "wake:go").await;
    let (guard, granted) = tokio::time::timeout(Duration::from_secs(8), waiter)
        .await
        .expect("the waiter for 2 was not woken when 4 were free")
        .expect("the waiter task")
        .expect("granted");
    assert!(granted.duration_since(told) < Duration::from_secs(8));
    assert_eq!(guard.kind(), Kind::Semaphore { permits: 2, max: 4 });
    guard.release().await.expect("ours");
    holder
        .await
        .expect("joined")
        .unwrap_or_else(|e| panic!("the holder: {e}"));
}

/// The holder of 3 permits of 4, released when the parent says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by a_waiter_for_k_permits_wakes_when_another_process_frees_them"]
async fn three_permit_holder() {
    let Some(url) = url() else { return };
    let locker = locker(&url);
    let mut conn = connect(&url).await;
    let guard = locker.semaphore("wake", 4).permits(3).await.expect("free");
    incr(&mut conn, "wake:in").await;
    wait_for_count(&mut conn, "wake:go", 1, Duration::from_secs(30)).await;
    guard.release().await.expect("ours");
}

// ---------------------------------------------------------------------------------------------
// Dropped acquires.

/// Polls `future` `polls` times, 200 µs apart, then drops it.
async fn poll_then_drop<F: std::future::Future>(future: F, polls: usize) {
    let mut future = std::pin::pin!(future);
    for _ in 0..polls {
        if futures::poll!(future.as_mut()).is_ready() {
            return;
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// Read, write and semaphore acquires dropped at any point (from never polled to granted)
/// leave nothing in Redis: no reader, no waiting writer's record, no permit beside the
/// holder's; once the holder releases, the name's keys are gone and a writer, or all permits,
/// get in at once. (The dropped requests ask for 30 s leases, which leftovers would keep.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_acquires_leave_nothing_in_redis() {
    let server = server();
    let mut conn = raw(&server).await;
    let lock = lock_at(&server.url());
    let (holders, droppers) = (locker(&server.url()), locker(&server.url()));
    let lease = Duration::from_secs(30);
    let wait = Duration::from_secs(30);

    let rw = lock.lock_keys("dropped").of_kind(Kind::Write {
        writer_preference: true,
    });
    let (writer_key, readers_key, waiting_key) = (&rw[0], &rw[1], &rw[2]);
    let holder = holders.read("dropped").await.expect("free");
    for polls in 0..30 {
        let write = droppers.write("dropped").lease(lease).wait(wait);
        poll_then_drop(write.acquire(), polls).await;
        let read = droppers.read("dropped").lease(lease).wait(wait);
        poll_then_drop(read.acquire(), polls).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // the background cleanup
    assert_eq!(
        zcard(&mut conn, waiting_key).await,
        0,
        "a dropped writer left its waiting record"
    );
    let readers = members(&mut conn, readers_key).await;
    assert_eq!(
        readers.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(),
        [common::token_of(&holder).as_str()],
        "dropped readers left their shares"
    );
    holder.release().await.expect("ours");
    for key in [writer_key, readers_key, waiting_key] {
        assert!(!exists(&mut conn, key).await, "{key} left behind");
    }
    droppers
        .write("dropped")
        .try_acquire()
        .await
        .expect("try")
        .expect("a writer at once")
        .release()
        .await
        .expect("ours");

    let sem = lock
        .lock_keys("dropped-permits")
        .of_kind(Kind::Semaphore { permits: 1, max: 3 });
    let holder = holders
        .semaphore("dropped-permits", 3)
        .permits(2)
        .await
        .expect("free");
    for polls in 0..30 {
        let two = droppers
            .semaphore("dropped-permits", 3)
            .permits(2)
            .lease(lease)
            .wait(wait);
        poll_then_drop(two.acquire(), polls).await;
        let one = droppers
            .semaphore("dropped-permits", 3)
            .lease(lease)
            .wait(wait);
        poll_then_drop(one.acquire(), polls).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // the background cleanup
    assert_eq!(
        zcard(&mut conn, &sem[0]).await,
        1,
        "dropped permit requests left holders"
    );
    assert_eq!(
        holders
            .semaphore("dropped-permits", 3)
            .available()
            .await
            .expect("available"),
        1
    );
    holder.release().await.expect("ours");
    for key in &sem {
        assert!(!exists(&mut conn, key).await, "{key} left behind");
    }
    droppers
        .semaphore("dropped-permits", 3)
        .permits(3)
        .try_acquire()
        .await
        .expect("try")
        .expect("all permits at once")
        .release()
        .await
        .expect("ours");
}
