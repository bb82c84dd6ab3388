//! The fair lock of `PostgresLock` (the lease table) across OS processes on one real
//! PostgreSQL: grants follow the order in which the processes queued, and a SIGKILLed queued
//! waiter holds the queue back only until its entry lapses.
//!
//! As in `kinds_processes` (whose witness and [`Recording`] lock these tests share), the test
//! binary re-runs itself in child processes. In the order test every request records, in the
//! witness table `witness_fair`, three numbers drawn from one sequence (`witness_seq`): just
//! before it asks (`asked`), just after its first busy answer, when its entry is certainly in
//! the server's queue (`queued`; none if it was granted at its first attempt), and inside its
//! critical section, once granted (`granted`). One sequence orders the three kinds of event
//! across the processes; the `granted` numbers are taken under the lock, so they are in the
//! order of the grants. The loop, the marking of queued requests and the judge of the records
//! are `lock_testkit::fair_order`'s, shared with lock-redis; the witness is this crate's.
//!
//! `FAIRNESS_CHECK_KIND=lock` runs the order test with the plain `lock` (expected to fail:
//! that is how the check was shown able to fail).

use std::time::Duration;

use async_trait::async_trait;
use lock_core::{FAIR_ENTRY_TTL, Locker};
use lock_testkit::fair_order::{self, Grant, Witness};
use lock_testkit::history::record::HistoryDir;
use tokio_postgres::Client;

use crate::common;
use crate::kinds_processes::{
    Recording, URL_VAR, get, incr, locker, nextval, prepare, server_us, start_together, url, us,
    wait_for_count,
};

const PROCESSES: usize = 3;
const TASKS: usize = 2;
/// Grants counted; every task stops at the first grant past this number.
const GRANTS: i64 = 90;
const NAME: &str = "fair-processes";
const KIND_VAR: &str = "DISTLOCK_PG_FAIR_KIND";

/// The sequence (`witness_seq`), the count (the counter `fair:count`) and the records (the
/// table `witness_fair`) of the order check.
struct PgWitness {
    client: Client,
}

#[async_trait]
impl Witness for PgWitness {
    async fn next_number(&self) -> i64 {
        nextval(&self.client).await
    }
    async fn count_grant(&self) -> i64 {
        incr(&self.client, "fair:count").await
    }
    async fn record(&self, grant: Grant) {
        self.client
            .execute(
                "INSERT INTO witness_fair (pid, task, asked, queued, granted, n) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &grant.pid,
                    &grant.task,
                    &grant.asked,
                    &grant.queued,
                    &grant.granted,
                    &grant.n,
                ],
            )
            .await
            .expect("a record");
    }
}

/// Three processes × two tasks ask for one fair lock, hold it briefly and ask again until 90
/// grants were counted: no request overtook one of another process that had queued before it
/// asked, the check covered enough pairs to mean something, every process was granted and the
/// shares differ by at most 1.5, and nothing is left in the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_are_granted_in_the_order_they_queued() {
    let kind = std::env::var("FAIRNESS_CHECK_KIND").unwrap_or_else(|_| "fair".to_owned());
    let server = common::server();
    let client = prepare(&server, &[]).await;
    let histories = HistoryDir::new().expect("the history directory");
    lock_testkit::run_test_in_processes(
        &lock_testkit::child_test!(fair_worker),
        &[
            (URL_VAR, server.url()),
            (KIND_VAR, kind.clone()),
            histories.env(),
        ],
        PROCESSES,
        Duration::from_secs(120),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    let records: Vec<Grant> = client
        .query(
            "SELECT pid, task, asked, queued, granted, n FROM witness_fair",
            &[],
        )
        .await
        .expect("the records")
        .iter()
        .map(|row| Grant {
            pid: row.get(0),
            task: row.get(1),
            asked: row.get(2),
            queued: row.get(3),
            granted: row.get(4),
            n: row.get(5),
        })
        .collect();
    let verdict = fair_order::judge(&records, GRANTS);
    verdict.report(&kind);
    verdict.assert_fair(PROCESSES);
    // Every grant's valid lease, judged by the history checker: no two holders at once.
    histories.assert_correct(verdict.recorded);
    locker(&server.url())
        .fair(NAME)
        .try_acquire()
        .await
        .expect("try")
        .expect("a single fair try is granted at once: nobody is left in the queue")
        .release()
        .await
        .expect("ours");
}

/// The body of one process of the test above; does nothing unless started by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by processes_are_granted_in_the_order_they_queued"]
async fn fair_worker() {
    let (Some(url), Ok(kind)) = (url(), std::env::var(KIND_VAR)) else {
        return;
    };
    let locker = Locker::new(Recording::new(&url, None).await);
    start_together(&common::client(&url).await, "fair:ready", PROCESSES).await;
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (locker, plain, url) = (locker.clone(), kind == "lock", url.clone());
            let task = i64::try_from(task).expect("small");
            tokio::spawn(async move {
                let witness = PgWitness {
                    client: common::client(&url).await,
                };
                fair_order::contend(&locker, plain, NAME, GRANTS, task, &witness).await;
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("no panic");
    }
}

// ---------------------------------------------------------------------------------------------
// A queued waiter killed.

const LAPSE: &str = "fair-lapse";
/// The lease the waiters ask for: far longer than an entry lasts, so a test that waits about
/// an entry's life cannot pass by waiting for a lease.
const LONG_LEASE: Duration = Duration::from_secs(60);
/// How long past the dead entry's lapse the next waiter may take: a liveness bound (a waiter
/// retries at least every half entry life), generous for a loaded machine, not a speed claim.
const LIVENESS_SLACK: Duration = Duration::from_secs(3);

/// A holder here; a waiter process queues behind it (its entry is in the queue: it had a busy
/// queued answer), then a waiter of this process behind that one; the waiter process is
/// SIGKILLed and the holder releases. The next waiter is granted only once the dead waiter's
/// entry has lapsed on the server (no earlier than the floor its last attempts set: the order
/// of the queue holds for a dead head too), and within the entry's life and a liveness slack
/// of the kill (not after the dead waiter's 60 s lease); then nobody is left in the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_queued_waiter_holds_the_queue_back_only_until_its_entry_lapses() {
    let server = common::server();
    let client = prepare(&server, &[]).await;
    let url = server.url();
    let holder = locker(&url)
        .fair(LAPSE)
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("free");
    let mut child = lock_testkit::spawn_test_process(
        &lock_testkit::child_test!(queued_waiter),
        &[(URL_VAR, url.clone())],
    )
    .expect("start the waiter process");
    wait_for_count(&client, "dead:queued", 1, Duration::from_secs(30)).await;

    let next_side = Locker::new(Recording::new(&url, Some("next")).await);
    let next = tokio::spawn(async move {
        next_side
            .fair(LAPSE)
            .fixed_ttl(LONG_LEASE)
            .wait(Duration::from_secs(30))
            .await
    });
    wait_for_count(&client, "next:queued", 1, Duration::from_secs(10)).await;

    child.start_kill().expect("SIGKILL the waiter by its PID");
    let status = child.wait().await.expect("reaped");
    assert!(!status.success(), "killed, not finished: {status}");
    let killed = server_us(&client).await;
    holder.release().await.expect("ours");

    let guard = next
        .await
        .expect("no panic")
        .expect("granted once the dead waiter's entry lapsed");
    let granted = server_us(&client).await;
    let floor = get(&client, "dead").await;
    eprintln!(
        "killed at {killed} µs; the dead entry lived until at least {floor} µs (+{} ms); the \
         next waiter was granted by {granted} µs (+{} ms)",
        (floor - killed) / 1_000,
        (granted - killed) / 1_000
    );
    assert!(
        floor > killed,
        "the dead entry lapses no earlier than {floor} µs, not after the kill at {killed} µs: \
         the test could not tell an overtaking"
    );
    assert!(
        granted >= floor,
        "the next waiter was granted by {granted} µs, before the dead waiter's entry ahead of \
         it lapsed (no earlier than {floor} µs)"
    );
    assert!(
        granted <= killed + us(FAIR_ENTRY_TTL + LIVENESS_SLACK),
        "held back {} ms past the kill: longer than the dead waiter's entry \
         ({FAIR_ENTRY_TTL:?}), toward its lease ({LONG_LEASE:?})",
        (granted - killed) / 1_000
    );
    guard.release().await.expect("ours");
    locker(&url)
        .fair(LAPSE)
        .try_acquire()
        .await
        .expect("try")
        .expect("a single fair try is granted at once: the dead entry is gone")
        .release()
        .await
        .expect("ours");
}

/// The waiter process of the test above: queues for the held lock and waits until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by a_sigkilled_queued_waiter_holds_the_queue_back_only_until_its_entry_lapses"]
async fn queued_waiter() {
    let Some(url) = url() else { return };
    let locker = Locker::new(Recording::new(&url, Some("dead")).await);
    // Bounded: killed long before; if not, it gives up after 60 s.
    let answer = locker
        .fair(LAPSE)
        .fixed_ttl(LONG_LEASE)
        .wait(Duration::from_secs(60))
        .await;
    drop(answer);
}
