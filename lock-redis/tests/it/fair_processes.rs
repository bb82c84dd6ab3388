//! The fair lock across three OS processes, two tasks each, on one name: grants follow the order
//! in which the processes queued, and the processes get about the same number of grants.
//!
//! The test binary re-runs itself: the parent test starts `PROCESSES` copies of this executable
//! that run only the ignored `worker_process` test, with the server's URL in the environment.
//! Every request records, in a Redis list on the test's server, three numbers drawn from one
//! shared `INCR` sequence: just before it asks (`asked`), just after its first busy answer —
//! when its entry is certainly in the server's queue (`queued`; none if it was granted at its
//! first attempt) — and inside its critical section, once granted (`granted`). One sequence
//! orders all three kinds of event across the processes; the `granted` numbers are taken under
//! the lock, so they are in the order of the grants.
//!
//! `FAIRNESS_CHECK_KIND=lock` runs the same with the plain `lock` (expected to fail: that is
//! how the check was shown able to fail).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Handover, Lock, ReleaseWatch};
use lock_core::{Kind, Lease, LockError, Locker, Token};
use lock_redis::RedisLock;
use redis::aio::MultiplexedConnection;

use crate::common::{incr, raw, server};

const PROCESSES: usize = 3;
const TASKS: usize = 2;
/// Grants counted; every task stops at the first grant past this number.
const GRANTS: i64 = 120;
const NAME: &str = "fair-processes";
const URL_VAR: &str = "DISTLOCK_TEST_WORKER_URL";
const KIND_VAR: &str = "DISTLOCK_TEST_WORKER_KIND";
/// The shared sequence every number of a record comes from.
const SEQ: &str = "fairness:seq";
/// The grants counted so far (incremented under the lock).
const COUNT: &str = "fairness:count";
/// Processes ready to start (a barrier, so no process runs ahead while the others start up).
const READY: &str = "fairness:ready";
/// The records: `pid task asked queued granted n` (`queued` is `-` when there is none).
const RECORDS: &str = "fairness:records";

/// One granted request, as recorded by its process.
#[derive(Debug, Clone, Copy)]
struct Record {
    pid: u32,
    task: u32,
    asked: i64,
    queued: Option<i64>,
    granted: i64,
    /// Its place among the grants (1-based); beyond [`GRANTS`], a task's last, uncounted one.
    n: i64,
}

impl Record {
    fn parse(line: &str) -> Self {
        let fields: Vec<&str> = line.split(' ').collect();
        let number = |i: usize| -> i64 { fields[i].parse().expect("a number") };
        Self {
            pid: fields[0].parse().expect("a pid"),
            task: fields[1].parse().expect("a task"),
            asked: number(2),
            queued: (fields[3] != "-").then(|| number(3)),
            granted: number(4),
            n: number(5),
        }
    }
}

/// The check, over every pair of requests `x`, `y` of **different** processes: if `x` was in
/// the server's queue before `y` asked (`x.queued < y.asked`), then `x` was granted before `y`
/// (`x.granted < y.granted`).
///
/// Why this is the right amount of slack: between `asked` and its first attempt reaching the
/// server a request may be overtaken by any request that reaches the server in between — the
/// order of arrival is the server's, and the client cannot see it. But once `x` has had a busy
/// answer with its own entry in the queue (`queued`), every request that asks after that point
/// arrives behind it, and its process may not be granted the lock until `x`'s entry is gone:
/// granted to `x`, or withdrawn when `x` gives up (which fails the test anyway). Within one
/// process only the first waiting task holds an entry (the others queue locally, first-in
/// first-out), so pairs of one process are not checked here.
///
/// Returns the pairs that the rule covers and the pairs that broke it.
fn overtakings(records: &[Record]) -> (usize, Vec<(Record, Record)>) {
    let mut covered = 0;
    let mut broken = Vec::new();
    for x in records {
        let Some(queued) = x.queued else { continue };
        for y in records {
            if y.pid != x.pid && queued < y.asked {
                covered += 1;
                if y.granted < x.granted {
                    broken.push((*x, *y));
                }
            }
        }
    }
    (covered, broken)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_are_granted_in_the_order_they_queued_and_get_even_shares() {
    let kind = std::env::var("FAIRNESS_CHECK_KIND").unwrap_or_else(|_| "fair".to_owned());
    let server = server();
    lock_testkit::run_test_in_processes(
        &lock_testkit::child_test!(worker_process),
        &[(URL_VAR, server.url()), (KIND_VAR, kind.clone())],
        PROCESSES,
        Duration::from_secs(90),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    let mut conn = raw(&server).await;
    let lines: Vec<String> = redis::cmd("LRANGE")
        .arg(RECORDS)
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .expect("LRANGE");
    let records: Vec<Record> = lines.iter().map(|l| Record::parse(l)).collect();

    // The shares: grants 1..=GRANTS per process.
    let mut shares: BTreeMap<u32, i64> = BTreeMap::new();
    for r in &records {
        let share = shares.entry(r.pid).or_default();
        if r.n <= GRANTS {
            *share += 1;
        }
    }
    let counted: i64 = shares.values().sum();
    let (min, max) = (
        shares.values().copied().min().unwrap_or(0),
        shares.values().copied().max().unwrap_or(0),
    );
    let (covered, broken) = overtakings(&records);
    let queued = records.iter().filter(|r| r.queued.is_some()).count();
    eprintln!(
        "{kind}: {} grants recorded ({counted} counted), grants per process {:?}, most / fewest \
         {:.2}; {queued} requests queued; {covered} ordered pairs covered by the check, {} \
         broken",
        records.len(),
        shares.values().collect::<Vec<_>>(),
        max as f64 / min.max(1) as f64,
        broken.len()
    );
    for (x, y) in broken.iter().take(5) {
        eprintln!(
            "  pid {} task {} (asked at {}) was granted at {}, before pid {} task {} (queued at \
             {:?}, granted at {})",
            y.pid, y.task, y.asked, y.granted, x.pid, x.task, x.queued, x.granted
        );
    }

    assert_eq!(counted, GRANTS, "every counted grant was recorded");
    assert_eq!(
        shares.len(),
        PROCESSES,
        "every process was granted: {shares:?}"
    );
    assert!(
        i64::try_from(covered).unwrap_or(i64::MAX) >= GRANTS,
        "the order check covered too few pairs to mean anything: {covered}"
    );
    assert!(
        broken.is_empty(),
        "{} grants overtook a request of another process that had queued before they asked",
        broken.len()
    );
    assert!(
        max * 2 <= min * 3,
        "the shares of the processes differ by more than 1.5: {shares:?}"
    );
    let keys = RedisLock::from_url(&server.url())
        .expect("url")
        .lock_keys(NAME)
        .of_kind(Kind::Fair { queued: true });
    let left: i64 = redis::cmd("EXISTS")
        .arg(&keys[2..4])
        .query_async(&mut conn)
        .await
        .expect("EXISTS");
    assert_eq!(left, 0, "the queue is gone once nobody waits");
}

tokio::task_local! {
    /// The `queued` number of the request this task is making, once it had a busy answer.
    static QUEUED: Cell<Option<i64>>;
}

/// A `RedisLock` that, on a request's first busy answer, takes a number from the sequence
/// (into the task's [`QUEUED`]): the request's entry is in the queue by then.
struct Recording {
    inner: RedisLock,
    conn: MultiplexedConnection,
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
        let answer = self.inner.try_acquire_kind(name, kind, token, ttl).await;
        let first_busy = matches!(answer, Ok(Attempt::Busy { .. }))
            && QUEUED.try_with(|q| q.get().is_none()).unwrap_or(false);
        if first_busy {
            let seq = incr(&mut self.conn.clone(), SEQ).await;
            let _ = QUEUED.try_with(|q| q.set(Some(seq)));
        }
        answer
    }
    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        self.inner.permits_in_use(name).await
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.inner.extend(lease, ttl).await
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
        self.inner.extend_many(leases).await
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
}

/// The body of one worker process; does nothing unless started by the test above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by processes_are_granted_in_the_order_they_queued_and_get_even_shares"]
async fn worker_process() {
    let (Ok(url), Ok(kind)) = (std::env::var(URL_VAR), std::env::var(KIND_VAR)) else {
        return;
    };
    let mut conn = redis::Client::open(url.as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let locker = Locker::new(Recording {
        inner: RedisLock::from_url(&url).expect("url"),
        conn: conn.clone(),
    });
    // Bounded: the other processes start within 20 s.
    incr(&mut conn, READY).await;
    let mut ready = 0;
    for _ in 0..2_000 {
        ready = redis::cmd("GET")
            .arg(READY)
            .query_async::<i64>(&mut conn)
            .await
            .expect("GET");
        if ready >= PROCESSES as i64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(ready, PROCESSES as i64, "the other processes never started");

    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (locker, kind, conn) = (locker.clone(), kind.clone(), conn.clone());
            tokio::spawn(QUEUED.scope(Cell::new(None), async move {
                contend(&locker, &kind, conn, task).await;
            }))
        })
        .collect();
    for task in tasks {
        task.await.expect("no panic");
    }
}

/// One task: requests, works briefly and releases until a grant finds the count reached
/// (bounded by the count itself: every round is one grant of the `GRANTS` + extras).
async fn contend(locker: &Locker, kind: &str, mut conn: MultiplexedConnection, task: usize) {
    let pid = std::process::id();
    for _ in 0..GRANTS {
        QUEUED.with(|q| q.set(None));
        let asked = incr(&mut conn, SEQ).await;
        let request = if kind == "lock" {
            locker.lock(NAME)
        } else {
            locker.fair(NAME)
        };
        let guard = request
            .fixed_ttl(Duration::from_secs(10))
            .wait(Duration::from_secs(30))
            .await
            .expect("granted");
        let granted = incr(&mut conn, SEQ).await;
        let n = incr(&mut conn, COUNT).await;
        let queued = QUEUED
            .with(Cell::get)
            .map_or("-".to_owned(), |q| q.to_string());
        let _: i64 = redis::cmd("RPUSH")
            .arg(RECORDS)
            .arg(format!("{pid} {task} {asked} {queued} {granted} {n}"))
            .query_async(&mut conn)
            .await
            .expect("RPUSH");
        tokio::time::sleep(Duration::from_millis(3)).await;
        guard.release().await.expect("ours");
        if n >= GRANTS {
            return;
        }
    }
}
