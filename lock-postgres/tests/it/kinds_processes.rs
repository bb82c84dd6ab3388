//! The read-write lock and the semaphore of `PostgresLock` (the lease table) across OS
//! processes on one real PostgreSQL.
//!
//! The test binary re-runs itself: a parent test starts copies of this executable that run
//! only one `#[ignore]`d child test each (`lock_testkit::run_test_in_processes`, or
//! `spawn_test_process` where the parent kills the child by its PID), with the server's URL in
//! the environment. Participants report to the parent through a *witness* that is independent
//! of the lock's own tables: counter tables in the same database (`witness_*`), each entry to
//! and exit from a critical section one `UPDATE` of one row that also checks the rule (so two
//! processes' checks are serialised by the row lock, like the Redis tests' ENTER/LEAVE
//! scripts). The parent judges what every process saw. The read-write and permit loops also
//! record every grant's valid lease (`lock_testkit::history::record`), and the history checker
//! judges them: no overlap beside a writer, no more permit holds than permits, writers' tokens
//! that grow.
//!
//! A process that is to be killed locks through [`Recording`], which keeps in the witness a
//! lower bound, on the server's clock, of when what it holds lapses: the server time read just
//! before each granting or extending statement, plus the TTL that statement asked for (the
//! lease's expiry, set by the statement from the server's clock, is no earlier). That bound is
//! what "not before the TTL" is measured against, without reading the lock's own layout.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Capabilities, Handover, Lock, MultiAttempt, ReleaseWatch};
use lock_core::{Kind, Lease, LockError, Locker, Token, fair_entry_ttl};
use lock_postgres::PostgresLock;
use lock_testkit::PostgresServer;
use lock_testkit::fair_order;
use lock_testkit::history::Share;
use lock_testkit::history::record::{self, HistoryDir, Recorder};
use tokio::time::Instant;
use tokio_postgres::Client;

use crate::common;

/// The server's URL, for the child processes.
pub(crate) const URL_VAR: &str = "DISTLOCK_PG_PROCESSES_URL";

/// The witness: counters, critical sections, a sequence and the fair lock's grant records.
const WITNESS: &str = "
CREATE TABLE IF NOT EXISTS witness_counters (name text PRIMARY KEY, n int8 NOT NULL);
CREATE TABLE IF NOT EXISTS witness_sections (
    name         text PRIMARY KEY,
    readers      int8 NOT NULL DEFAULT 0,
    writers      int8 NOT NULL DEFAULT 0,
    permits      int8 NOT NULL DEFAULT 0,
    peak_readers int8 NOT NULL DEFAULT 0,
    peak_writers int8 NOT NULL DEFAULT 0,
    peak_permits int8 NOT NULL DEFAULT 0,
    violations   int8 NOT NULL DEFAULT 0
);
CREATE SEQUENCE IF NOT EXISTS witness_seq;
CREATE TABLE IF NOT EXISTS witness_fair (
    pid     int8 NOT NULL,
    task    int8 NOT NULL,
    asked   int8 NOT NULL,
    queued  int8,
    granted int8 NOT NULL,
    n       int8 NOT NULL
)";

/// Who enters a critical section.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role {
    Reader,
    Writer,
    /// `k` of `max` permits.
    Permits {
        k: u32,
        max: u32,
    },
}

/// Entering: count in and, in the same statement (on the row's old values), count a violation
/// if what is already inside may not be there with us: for a reader a writer, for a writer
/// anyone, for permits more than `max` in all with ours. Keeps the peak.
const ENTER_READER: &str = "
UPDATE witness_sections SET readers = readers + 1,
    peak_readers = greatest(peak_readers, readers + 1),
    violations = violations + CASE WHEN writers > 0 THEN 1 ELSE 0 END
WHERE name = $1";
const ENTER_WRITER: &str = "
UPDATE witness_sections SET writers = writers + 1,
    peak_writers = greatest(peak_writers, writers + 1),
    violations = violations + CASE WHEN writers > 0 OR readers > 0 THEN 1 ELSE 0 END
WHERE name = $1";
const ENTER_PERMITS: &str = "
UPDATE witness_sections SET permits = permits + $2,
    peak_permits = greatest(peak_permits, permits + $2),
    violations = violations + CASE WHEN permits + $2 > $3 THEN 1 ELSE 0 END
WHERE name = $1";

/// Leaving: the same check once more (someone who came in during the section is caught here),
/// then count out.
const LEAVE_READER: &str = "
UPDATE witness_sections SET readers = readers - 1,
    violations = violations + CASE WHEN writers > 0 THEN 1 ELSE 0 END
WHERE name = $1";
const LEAVE_WRITER: &str = "
UPDATE witness_sections SET writers = writers - 1,
    violations = violations + CASE WHEN writers > 1 OR readers > 0 THEN 1 ELSE 0 END
WHERE name = $1";
const LEAVE_PERMITS: &str = "
UPDATE witness_sections SET permits = permits - $2,
    violations = violations + CASE WHEN permits > $3 THEN 1 ELSE 0 END
WHERE name = $1";

async fn section_step(client: &Client, section: &str, role: Role, enter: bool) {
    let updated = match role {
        Role::Reader => {
            let sql = if enter { ENTER_READER } else { LEAVE_READER };
            client.execute(sql, &[&section]).await
        }
        Role::Writer => {
            let sql = if enter { ENTER_WRITER } else { LEAVE_WRITER };
            client.execute(sql, &[&section]).await
        }
        Role::Permits { k, max } => {
            let sql = if enter { ENTER_PERMITS } else { LEAVE_PERMITS };
            client
                .execute(sql, &[&section, &i64::from(k), &i64::from(max)])
                .await
        }
    }
    .expect("the witness's section update");
    assert_eq!(updated, 1, "the witness has no section {section}");
}

/// Enters the critical section `section` as `role` (see [`ENTER_READER`]).
pub(crate) async fn enter(client: &Client, section: &str, role: Role) {
    section_step(client, section, role, true).await;
}

/// Leaves it (see [`LEAVE_READER`]).
pub(crate) async fn leave(client: &Client, section: &str, role: Role) {
    section_step(client, section, role, false).await;
}

/// One section's row, as the parent reads it at the end.
#[derive(Debug)]
struct SectionRow {
    readers: i64,
    writers: i64,
    permits: i64,
    peak_readers: i64,
    peak_writers: i64,
    peak_permits: i64,
    violations: i64,
}

async fn section(client: &Client, name: &str) -> SectionRow {
    let row = client
        .query_one(
            "SELECT readers, writers, permits, peak_readers, peak_writers, peak_permits, \
             violations FROM witness_sections WHERE name = $1",
            &[&name],
        )
        .await
        .expect("a witness section");
    SectionRow {
        readers: row.get(0),
        writers: row.get(1),
        permits: row.get(2),
        peak_readers: row.get(3),
        peak_writers: row.get(4),
        peak_permits: row.get(5),
        violations: row.get(6),
    }
}

/// Adds 1 to the counter `name` (created at 0); the new value.
pub(crate) async fn incr(client: &Client, name: &str) -> i64 {
    client
        .query_one(
            "INSERT INTO witness_counters AS c (name, n) VALUES ($1, 1) \
             ON CONFLICT (name) DO UPDATE SET n = c.n + 1 RETURNING n",
            &[&name],
        )
        .await
        .expect("a witness counter")
        .get(0)
}

/// Raises the counter `name` to `value` if it is lower.
async fn raise(client: &Client, name: &str, value: i64) {
    client
        .execute(
            "INSERT INTO witness_counters AS c (name, n) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET n = greatest(c.n, excluded.n)",
            &[&name, &value],
        )
        .await
        .expect("a witness counter");
}

/// The counter `name` (0 if never counted).
pub(crate) async fn get(client: &Client, name: &str) -> i64 {
    client
        .query_opt("SELECT n FROM witness_counters WHERE name = $1", &[&name])
        .await
        .expect("a witness counter")
        .map_or(0, |row| row.get(0))
}

/// The server's clock (`clock_timestamp()`, the clock the lease table's expiries are set
/// from), in microseconds since the epoch.
pub(crate) async fn server_us(client: &Client) -> i64 {
    client
        .query_one(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8",
            &[],
        )
        .await
        .expect("the server's clock")
        .get(0)
}

/// A duration in whole microseconds.
pub(crate) fn us(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Waits (at most `limit`, in 20 ms steps) until the counter `name` reaches `at_least`.
pub(crate) async fn wait_for_count(client: &Client, name: &str, at_least: i64, limit: Duration) {
    let started = Instant::now();
    loop {
        let n = get(client, name).await;
        if n >= at_least {
            return;
        }
        assert!(
            started.elapsed() < limit,
            "{name} reached {n}, not {at_least}, within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A start line: each of `count` participants arrives, then waits (bounded) until all have.
pub(crate) async fn start_together(client: &Client, name: &str, count: usize) {
    incr(client, name).await;
    wait_for_count(
        client,
        name,
        i64::try_from(count).expect("small"),
        Duration::from_secs(30),
    )
    .await;
}

/// Migrates the lease table, creates the witness and the `sections`; a client for the parent.
pub(crate) async fn prepare(server: &PostgresServer, sections: &[&str]) -> Client {
    common::lock(server).await;
    let client = common::client(&server.url()).await;
    client.batch_execute(WITNESS).await.expect("the witness");
    for name in sections {
        client
            .execute(
                "INSERT INTO witness_sections (name) VALUES ($1) ON CONFLICT DO NOTHING",
                &[name],
            )
            .await
            .expect("a witness section");
    }
    client
}

/// The URL a child process was given; `None` when run other than by its parent test.
pub(crate) fn url() -> Option<String> {
    std::env::var(URL_VAR).ok()
}

/// A lock on `url` with a small pool (three processes share the server's 50 connections).
pub(crate) fn lock_at(url: &str) -> PostgresLock {
    PostgresLock::builder()
        .url(url)
        .pool_size(4)
        .connect_timeout(Duration::from_secs(5))
        .statement_timeout(Duration::from_secs(5))
        .build()
        .expect("build lock")
}

pub(crate) fn locker(url: &str) -> Locker {
    Locker::new(lock_at(url))
}

/// The next number of `witness_seq`, the sequence the fair order test's records are drawn from.
pub(crate) async fn nextval(client: &Client) -> i64 {
    client
        .query_one("SELECT nextval('witness_seq')", &[])
        .await
        .expect("nextval")
        .get(0)
}

/// A `PostgresLock` that reports to the witness. With a `key`: before every try and extend it
/// reads the server's clock, and after a grant or extend raises the counter `key` to that time
/// plus the TTL asked for (a lower bound of the lease's expiry on the server), after a busy
/// queued fair attempt to that time plus the entry's life (a lower bound of the entry's
/// lapse), and counts `key:granted`, `key:queued` (busy queued fair attempts) and
/// `key:extended`. In a task of `lock_testkit::fair_order::contend`, a request's first busy
/// answer takes a number from `witness_seq` ([`fair_order::mark_queued`]). Every other call is
/// passed through.
pub(crate) struct Recording {
    inner: PostgresLock,
    client: Arc<Client>,
    key: Option<String>,
}

impl Recording {
    pub(crate) async fn new(url: &str, key: Option<&str>) -> Self {
        Self {
            inner: lock_at(url),
            client: Arc::new(common::client(url).await),
            key: key.map(str::to_owned),
        }
    }

    async fn before(&self) -> Option<i64> {
        match self.key {
            Some(_) => Some(server_us(&self.client).await),
            None => None,
        }
    }

    async fn note(&self, what: &str, floor: i64) {
        if let Some(key) = &self.key {
            raise(&self.client, key, floor).await;
            incr(&self.client, &format!("{key}:{what}")).await;
        }
    }
}

#[async_trait]
impl Lock for Recording {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.try_acquire_kind(name, Kind::Mutex, token, ttl).await
    }
    async fn try_acquire_kind(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let before = self.before().await;
        let answer = self.inner.try_acquire_kind(name, kind, token, ttl).await;
        let busy = matches!(answer, Ok(Attempt::Busy { .. }));
        if let Some(before) = before {
            if matches!(answer, Ok(Attempt::Acquired(_))) {
                self.note("granted", before + us(ttl)).await;
            } else if busy && kind == (Kind::Fair { queued: true }) {
                self.note("queued", before + us(fair_entry_ttl(ttl))).await;
            }
        }
        // Any kind (the order test's plain-`lock` run marks its requests the same way).
        fair_order::mark_queued(&answer, || nextval(&self.client)).await;
        answer
    }
    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        self.inner.permits_in_use(name).await
    }
    async fn try_acquire_all(
        &self,
        names: &[Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<MultiAttempt, LockError> {
        self.inner.try_acquire_all(names, token, ttl).await
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        let before = self.before().await;
        let answer = self.inner.extend(lease, ttl).await;
        if let (Some(before), Ok(Some(_))) = (before, &answer) {
            self.note("extended", before + us(ttl)).await;
        }
        answer
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.inner.release(lease).await
    }
    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        self.inner.hand_over(lease, to, ttl).await
    }
    async fn extend_many(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Vec<Result<Option<Instant>, LockError>> {
        let before = self.before().await;
        let answers = self.inner.extend_many(leases).await;
        if let Some(before) = before {
            for ((_, ttl), answer) in leases.iter().zip(&answers) {
                if let Ok(Some(_)) = answer {
                    self.note("extended", before + us(*ttl)).await;
                }
            }
        }
        answers
    }
    async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        self.inner.watch(name).await
    }
    async fn watch_turn(
        &self,
        name: &str,
        token: &Token,
    ) -> Result<Option<ReleaseWatch>, LockError> {
        self.inner.watch_turn(name, token).await
    }
    async fn ping(&self) -> Result<(), LockError> {
        self.inner.ping().await
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
}

// ---------------------------------------------------------------------------------------------
// Readers and writers in three processes.

const RW_PROCESSES: usize = 3;
const RW_ROUNDS: u32 = 10;
/// The opening, where every process holds a read at once.
const RW_OPEN: &str = "rw-open";
/// The mixed rounds.
const RW: &str = "rw";

/// Three processes on one name. The opening: each takes a read and holds it until all three
/// are inside at once (readers share across processes), and while they are, a write is
/// refused to each. Then each runs two reader tasks and a writer task for 10 rounds each: a
/// writer is never inside with anyone (checked by the witness in the same step as each entry
/// and exit), readers were inside together (peak > 1), and every section ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_processes_a_writer_is_alone_and_readers_share() {
    let server = common::server();
    let client = prepare(&server, &[RW_OPEN, RW]).await;
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

    let processes = i64::try_from(RW_PROCESSES).expect("small");
    let rounds = i64::from(RW_ROUNDS);
    let open = section(&client, RW_OPEN).await;
    assert_eq!(open.violations, 0, "the opening: {open:?}");
    assert_eq!(
        open.peak_readers, processes,
        "every process's reader was inside at once: {open:?}"
    );
    assert_eq!(
        get(&client, "rw-open:refused").await,
        processes,
        "a write was granted while three processes read"
    );
    let mixed = section(&client, RW).await;
    eprintln!("the mixed rounds: {mixed:?}");
    assert_eq!(
        mixed.violations, 0,
        "a writer was inside with a reader or another writer: {mixed:?}"
    );
    assert_eq!(get(&client, "rw:reads").await, processes * 2 * rounds);
    assert_eq!(get(&client, "rw:writes").await, processes * rounds);
    assert_eq!(mixed.peak_writers, 1, "{mixed:?}");
    assert!(
        mixed.peak_readers > 1,
        "readers never shared the lock in the mixed rounds: {mixed:?}"
    );
    assert_eq!((mixed.readers, mixed.writers), (0, 0), "{mixed:?}");
    locker(&server.url())
        .write(RW)
        .try_acquire()
        .await
        .expect("try")
        .expect("a writer at once when everybody left")
        .release()
        .await
        .expect("ours");
}

/// One process of the test above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by across_processes_a_writer_is_alone_and_readers_share"]
async fn rw_worker() {
    let Some(url) = url() else { return };
    let locker = locker(&url);
    let client = common::client(&url).await;
    start_together(&client, "rw:ready", RW_PROCESSES).await;

    let opening = locker
        .read(RW)
        .wait(Duration::from_secs(30))
        .await
        .expect("a reader of the opening");
    enter(&client, RW_OPEN, Role::Reader).await;
    start_together(&client, "rw-open:in", RW_PROCESSES).await;
    let write = locker.write(RW).try_acquire().await.expect("try a write");
    assert!(write.is_none(), "a write was granted beside three readers");
    incr(&client, "rw-open:refused").await;
    start_together(&client, "rw-open:tried", RW_PROCESSES).await;
    leave(&client, RW_OPEN, Role::Reader).await;
    opening.release().await.expect("ours");

    let recorder = Arc::new(Recorder::from_env().expect("the history directory"));
    let tasks: Vec<_> = [Role::Reader, Role::Reader, Role::Writer]
        .into_iter()
        .map(|role| {
            let (locker, url, recorder) = (locker.clone(), url.clone(), Arc::clone(&recorder));
            tokio::spawn(async move {
                let client = common::client(&url).await;
                for _ in 0..RW_ROUNDS {
                    let request = match role {
                        Role::Reader => locker.read(RW),
                        _ => locker.write(RW),
                    };
                    let requested_ns = record::monotonic_ns();
                    let guard = request
                        .wait(Duration::from_secs(60))
                        .await
                        .unwrap_or_else(|e| panic!("{role:?}: {e}"));
                    let start_ns = record::monotonic_ns();
                    enter(&client, RW, role).await;
                    let hold = match role {
                        Role::Reader => 40,
                        _ => 15,
                    };
                    tokio::time::sleep(Duration::from_millis(hold)).await;
                    leave(&client, RW, role).await;
                    let share = match role {
                        Role::Reader => Share::Read,
                        _ => Share::Exclusive,
                    };
                    recorder.lease(RW, &guard, (requested_ns, start_ns), share);
                    guard.release().await.expect("still ours");
                    let count = match role {
                        Role::Reader => "rw:reads",
                        _ => "rw:writes",
                    };
                    incr(&client, count).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a worker task");
    }
}

// ---------------------------------------------------------------------------------------------
// The semaphore in three processes.

const PERMIT_PROCESSES: usize = 3;
const PERMIT_ROUNDS: u32 = 8;
const MAX: u32 = 3;
const PERMITS_OPEN: &str = "permits-open";
const PERMITS: &str = "permits";

/// Three processes on a semaphore of 3. The opening: each takes one permit and holds it until
/// all three are inside at once (the peak reaches the maximum), and while they are, one more
/// permit is refused to each. Then two tasks per process take 1 or 2 permits in a loop: never
/// more than 3 in use (checked by the witness in the same step as each entry and exit), every
/// grant ran, and all are free at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_processes_never_more_than_max_permits() {
    let server = common::server();
    let client = prepare(&server, &[PERMITS_OPEN, PERMITS]).await;
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

    let open = section(&client, PERMITS_OPEN).await;
    assert_eq!(open.violations, 0, "the opening: {open:?}");
    assert_eq!(
        open.peak_permits,
        i64::from(MAX),
        "the permits of every process were in use at once: {open:?}"
    );
    assert_eq!(
        get(&client, "permits-open:refused").await,
        i64::try_from(PERMIT_PROCESSES).expect("small"),
        "a fourth permit was granted"
    );
    let mixed = section(&client, PERMITS).await;
    eprintln!("the mixed rounds: {mixed:?}");
    assert_eq!(
        mixed.violations, 0,
        "more than {MAX} permits were in use: {mixed:?}"
    );
    assert!(
        (2..=i64::from(MAX)).contains(&mixed.peak_permits),
        "peak of permits in use in the mixed rounds: {mixed:?}"
    );
    assert_eq!(mixed.permits, 0, "{mixed:?}");
    assert_eq!(
        get(&client, "permits:grants").await,
        i64::try_from(PERMIT_PROCESSES * 2).expect("small") * i64::from(PERMIT_ROUNDS)
    );
    let available = locker(&server.url())
        .semaphore(PERMITS, MAX)
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
    let client = common::client(&url).await;
    start_together(&client, "permits:ready", PERMIT_PROCESSES).await;

    let one = Role::Permits { k: 1, max: MAX };
    let opening = locker
        .semaphore(PERMITS, MAX)
        .wait(Duration::from_secs(30))
        .await
        .expect("a permit of the opening");
    enter(&client, PERMITS_OPEN, one).await;
    start_together(&client, "permits-open:in", PERMIT_PROCESSES).await;
    let more = locker
        .semaphore(PERMITS, MAX)
        .try_acquire()
        .await
        .expect("try one more permit");
    assert!(more.is_none(), "a fourth permit of {MAX} was granted");
    incr(&client, "permits-open:refused").await;
    start_together(&client, "permits-open:tried", PERMIT_PROCESSES).await;
    leave(&client, PERMITS_OPEN, one).await;
    opening.release().await.expect("ours");

    let recorder = Arc::new(Recorder::from_env().expect("the history directory"));
    let tasks: Vec<_> = (0..2u32)
        .map(|task| {
            let (locker, url, recorder) = (locker.clone(), url.clone(), Arc::clone(&recorder));
            tokio::spawn(async move {
                let client = common::client(&url).await;
                for round in 0..PERMIT_ROUNDS {
                    let k = 1 + (round + task) % 2;
                    let requested_ns = record::monotonic_ns();
                    let guard = locker
                        .semaphore(PERMITS, MAX)
                        .permits(k)
                        .wait(Duration::from_secs(60))
                        .await
                        .unwrap_or_else(|e| panic!("{k} permits: {e}"));
                    let start_ns = record::monotonic_ns();
                    let role = Role::Permits { k, max: MAX };
                    enter(&client, PERMITS, role).await;
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    leave(&client, PERMITS, role).await;
                    for _ in 0..k {
                        let share = Share::Permit { max: MAX };
                        recorder.lease(PERMITS, &guard, (requested_ns, start_ns), share);
                    }
                    guard.release().await.expect("ours");
                    incr(&client, "permits:grants").await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a permit task");
    }
}

// ---------------------------------------------------------------------------------------------
// A holder killed while it holds.

/// The renewed lease of the holders that are killed.
const HANGING_LEASE: Duration = Duration::from_secs(1);
/// How long past the killed holder's lease the waiter may take to get in: a liveness bound
/// (the waiter retries at the holder's TTL), generous for a loaded machine, not a speed claim.
const LIVENESS_SLACK: Duration = Duration::from_secs(4);

/// Starts the child `test` (which holds on a [`Recording`] lock with key `key` and counts
/// `key:in` once it holds), waits until its lease was renewed twice, SIGKILLs it by its PID
/// and reaps it. Returns the server's clock after the kill and the floor of the killed
/// holder's lease expiry.
async fn kill_renewed_holder(
    server: &PostgresServer,
    client: &Client,
    test: &str,
    key: &str,
    env: &[(&str, String)],
) -> (i64, i64) {
    let mut env = env.to_vec();
    env.push((URL_VAR, server.url()));
    let mut child = lock_testkit::spawn_test_process(test, &env).expect("start the holder");
    wait_for_count(client, &format!("{key}:in"), 1, Duration::from_secs(30)).await;
    wait_for_count(
        client,
        &format!("{key}:extended"),
        2,
        Duration::from_secs(30),
    )
    .await;
    child.start_kill().expect("SIGKILL the holder by its PID");
    let status = child.wait().await.expect("reaped");
    assert!(!status.success(), "killed, not finished: {status}");
    let killed = server_us(client).await;
    let floor = get(client, key).await;
    assert!(
        floor > killed,
        "the killed holder's lease ends no earlier than {floor} µs, not after the kill at \
         {killed} µs: the test could not tell an early release"
    );
    (killed, floor)
}

/// A reader process SIGKILLed while it holds a renewed 1 s share: a writer of another process,
/// waiting from the kill on, gets in only once the share has run out on the server (its grant
/// is seen no earlier than the floor of the share's expiry), and not long after (within the
/// lease and a liveness slack of the kill).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_readers_share_frees_the_writer_at_its_ttl() {
    let server = common::server();
    let client = prepare(&server, &[]).await;
    let (killed, floor) = kill_renewed_holder(
        &server,
        &client,
        &lock_testkit::child_test!(hanging_reader),
        "hang-read",
        &[],
    )
    .await;
    let writer = locker(&server.url())
        .write("hang")
        .wait(Duration::from_secs(20))
        .await
        .expect("the writer gets in after the dead reader's lease");
    let granted = server_us(&client).await;
    eprintln!(
        "killed at {killed} µs; the share ran until at least {floor} µs (+{} ms); the writer \
         was granted by {granted} µs (+{} ms)",
        (floor - killed) / 1_000,
        (granted - killed) / 1_000
    );
    assert!(
        granted >= floor,
        "the writer was granted by {granted} µs, before the killed reader's share ended \
         (no earlier than {floor} µs)"
    );
    assert!(
        granted <= killed + us(HANGING_LEASE + LIVENESS_SLACK),
        "the writer got in {} ms after the kill, long past the reader's {HANGING_LEASE:?} \
         lease",
        (granted - killed) / 1_000
    );
    writer.release().await.expect("ours");
    locker(&server.url())
        .read("hang")
        .try_acquire()
        .await
        .expect("try")
        .expect("a reader at once after the writer left")
        .release()
        .await
        .expect("ours");
}

/// The reader that is killed: it holds a renewed 1 s share and waits to die.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by a_killed_readers_share_frees_the_writer_at_its_ttl"]
async fn hanging_reader() {
    let Some(url) = url() else { return };
    let locker = Locker::new(Recording::new(&url, Some("hang-read")).await);
    let _guard = locker
        .read("hang")
        .lease(HANGING_LEASE)
        .wait(Duration::from_secs(10))
        .await
        .expect("free");
    incr(&common::client(&url).await, "hang-read:in").await;
    tokio::time::sleep(Duration::from_secs(60)).await; // bounded: the parent kills it first
}

/// A holder of 2 permits of 3 (a renewed 1 s lease) SIGKILLed while this process holds the
/// third: a waiter for 2 gets in only once the killed holder's lease has run out on the
/// server, and not long after; nothing leaks (all 3 free once both live holders release).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_permit_holder_frees_its_permits_at_its_ttl() {
    let server = common::server();
    let client = prepare(&server, &[]).await;
    let url = server.url();
    let (holder_side, waiter_side) = (locker(&url), locker(&url));
    let live = holder_side
        .semaphore("hang-permits", 3)
        .await
        .expect("free");
    let (killed, floor) = kill_renewed_holder(
        &server,
        &client,
        &lock_testkit::child_test!(hanging_permit_holder),
        "hang-permits",
        &[],
    )
    .await;
    let waiter = waiter_side
        .semaphore("hang-permits", 3)
        .permits(2)
        .wait(Duration::from_secs(20))
        .await
        .expect("2 permits after the dead holder's lease");
    let granted = server_us(&client).await;
    eprintln!(
        "killed at {killed} µs; the permits were held until at least {floor} µs (+{} ms); the \
         waiter was granted by {granted} µs (+{} ms)",
        (floor - killed) / 1_000,
        (granted - killed) / 1_000
    );
    assert!(
        granted >= floor,
        "2 permits were granted by {granted} µs, before the killed holder's lease ended (no \
         earlier than {floor} µs)"
    );
    assert!(
        granted <= killed + us(HANGING_LEASE + LIVENESS_SLACK),
        "the waiter got in {} ms after the kill, long past the holder's {HANGING_LEASE:?} lease",
        (granted - killed) / 1_000
    );
    let available = || async {
        holder_side
            .semaphore("hang-permits", 3)
            .available()
            .await
            .expect("available")
    };
    assert_eq!(
        available().await,
        0,
        "the live holder's 1 and the waiter's 2"
    );
    waiter.release().await.expect("ours");
    assert_eq!(available().await, 2);
    assert!(live.is_held());
    live.release().await.expect("ours");
    assert_eq!(available().await, 3, "the killed holder's permits leaked");
}

/// The permit holder that is killed: 2 of 3 permits on a renewed 1 s lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by a_killed_permit_holder_frees_its_permits_at_its_ttl"]
async fn hanging_permit_holder() {
    let Some(url) = url() else { return };
    let locker = Locker::new(Recording::new(&url, Some("hang-permits")).await);
    let _guard = locker
        .semaphore("hang-permits", 3)
        .permits(2)
        .lease(HANGING_LEASE)
        .wait(Duration::from_secs(10))
        .await
        .expect("2 permits");
    incr(&common::client(&url).await, "hang-permits:in").await;
    tokio::time::sleep(Duration::from_secs(60)).await; // bounded: the parent kills it first
}
