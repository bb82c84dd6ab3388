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
//! the lock, so they are in the order of the grants. The loop, the marking of queued requests
//! and the judge of the records are `lock_testkit::fair_order`'s, shared with lock-postgres;
//! where the numbers and records are kept is this file's.
//!
//! `FAIRNESS_CHECK_KIND=lock` runs the same with the plain `lock` (expected to fail: that is
//! how the check was shown able to fail).

use std::time::Duration;

use tokio::time::Instant;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Handover, Lock, ReleaseWatch};
use lock_core::{Kind, Lease, LockError, Locker, Token};
use lock_redis::RedisLock;
use lock_testkit::fair_order::{self, Grant, Witness};
use lock_testkit::history::record::HistoryDir;
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

/// A grant's record as kept in [`RECORDS`].
fn parse(line: &str) -> Grant {
    let fields: Vec<&str> = line.split(' ').collect();
    let number = |i: usize| -> i64 { fields[i].parse().expect("a number") };
    Grant {
        pid: fields[0].parse().expect("a pid"),
        task: fields[1].parse().expect("a task"),
        asked: number(2),
        queued: (fields[3] != "-").then(|| number(3)),
        granted: number(4),
        n: number(5),
    }
}

/// The sequence, the count and the records of the order check, on the test's server.
struct RedisWitness {
    conn: MultiplexedConnection,
}

#[async_trait]
impl Witness for RedisWitness {
    async fn next_number(&self) -> i64 {
        incr(&mut self.conn.clone(), SEQ).await
    }
    async fn count_grant(&self) -> i64 {
        incr(&mut self.conn.clone(), COUNT).await
    }
    async fn record(&self, grant: Grant) {
        let Grant {
            pid,
            task,
            asked,
            queued,
            granted,
            n,
        } = grant;
        let queued = queued.map_or("-".to_owned(), |q| q.to_string());
        let _: i64 = redis::cmd("RPUSH")
            .arg(RECORDS)
            .arg(format!("{pid} {task} {asked} {queued} {granted} {n}"))
            .query_async(&mut self.conn.clone())
            .await
            .expect("RPUSH");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_are_granted_in_the_order_they_queued_and_get_even_shares() {
    let kind = std::env::var("FAIRNESS_CHECK_KIND").unwrap_or_else(|_| "fair".to_owned());
    let server = server();
    let histories = HistoryDir::new().expect("the history directory");
    lock_testkit::run_test_in_processes(
        &lock_testkit::child_test!(worker_process),
        &[
            (URL_VAR, server.url()),
            (KIND_VAR, kind.clone()),
            histories.env(),
        ],
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
    let records: Vec<Grant> = lines.iter().map(|l| parse(l)).collect();
    let verdict = fair_order::judge(&records, GRANTS);
    verdict.report(&kind);
    verdict.assert_fair(PROCESSES);
    // Every grant's valid lease, judged by the history checker: no two holders at once.
    histories.assert_correct(verdict.recorded);
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

/// A `RedisLock` that, on a request's first busy answer, takes a number from the sequence
/// ([`fair_order::mark_queued`]): the request's entry is in the queue by then.
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
        fair_order::mark_queued(&answer, || {
            let mut conn = self.conn.clone();
            async move { incr(&mut conn, SEQ).await }
        })
        .await;
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
            let (locker, plain) = (locker.clone(), kind == "lock");
            let witness = RedisWitness { conn: conn.clone() };
            let task = i64::try_from(task).expect("small");
            tokio::spawn(async move {
                fair_order::contend(&locker, plain, NAME, GRANTS, task, &witness).await;
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("no panic");
    }
}
