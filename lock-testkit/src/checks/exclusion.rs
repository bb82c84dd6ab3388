//! The exclusion check every Redis-based backend runs: a read-modify-write counter on a Redis
//! server, updated under the lock by many tasks or OS processes, ends exact.
//!
//! The update is deliberately not atomic (read, pause, write), so only the lock keeps the count
//! exact: a lost update means two holders were inside at once. The backend's tests bring the
//! lockers and the servers; what they share (the contended loop, the bookkeeping, the final
//! count) lives here once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lock_core::Locker;
use redis::aio::{ConnectionLike, MultiplexedConnection};

use crate::history::Share;
use crate::history::record::{self, HistoryDir, Recorder};

/// The key of the shared counter that [`Counter::at`] uses.
pub const COUNTER_KEY: &str = "counter";

/// The TTL of every lease taken by the contended loop: far above one round's work, so a lease
/// never lapses mid-update on a loaded machine.
const HOLD_TTL: Duration = Duration::from_secs(5);

/// What happens between reading and writing the counter while the lock is held: the window in
/// which a second holder would lose an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pause {
    /// `tokio::task::yield_now`: lets the other tasks of this runtime run.
    Yield,
    /// `tokio::time::sleep` for this long: for separate processes, which a yield would not let
    /// interleave.
    Sleep(Duration),
}

/// Where the shared counter lives: a connection to its server (any async Redis connection, a
/// cluster's included) and its key.
#[derive(Debug, Clone)]
pub struct Counter<C> {
    conn: C,
    key: String,
}

impl Counter<MultiplexedConnection> {
    /// The counter [`COUNTER_KEY`] on the server at `url`, over a connection of its own.
    ///
    /// # Panics
    /// When `url` is not a Redis URL or the server cannot be reached.
    ///
    /// # Cancel safety
    /// Cancel safe: it only connects.
    pub async fn at(url: &str) -> Self {
        let conn = redis::Client::open(url)
            .expect("counter URL")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the counter's server");
        Self::new(conn, COUNTER_KEY)
    }
}

impl<C: ConnectionLike + Send> Counter<C> {
    /// The counter `key` over `conn`; on a cluster, give the key a hash tag if it must share a
    /// slot with something.
    pub fn new(conn: C, key: impl Into<String>) -> Self {
        Self {
            conn,
            key: key.into(),
        }
    }

    /// The counter's value (0 when it was never written).
    ///
    /// # Panics
    /// When the command fails or the key holds something other than a count.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn value(&mut self) -> usize {
        let n: Option<usize> = redis::cmd("GET")
            .arg(&self.key)
            .query_async(&mut self.conn)
            .await
            .expect("GET");
        n.unwrap_or(0)
    }

    /// Reads the counter, pauses, and writes it back plus one: lost updates unless the caller
    /// alone does this at a time.
    async fn bump(&mut self, pause: Pause) {
        let n: Option<i64> = redis::cmd("GET")
            .arg(&self.key)
            .query_async(&mut self.conn)
            .await
            .expect("GET");
        match pause {
            Pause::Yield => tokio::task::yield_now().await,
            Pause::Sleep(d) => tokio::time::sleep(d).await,
        }
        redis::cmd("SET")
            .arg(&self.key)
            .arg(n.unwrap_or(0) + 1)
            .query_async::<()>(&mut self.conn)
            .await
            .expect("SET");
    }
}

/// One contended loop: `rounds` times, takes `name` on `locker` (waiting at most `wait`),
/// reads `counter`, pauses, writes it back plus one, and releases.
///
/// `inside`, when given, counts the holders in the critical section, and the loop asserts it
/// was alone there. When [`HISTORY_DIR_VAR`](crate::history::record::HISTORY_DIR_VAR) names a directory (a child process of
/// [`processes_exclude_each_other`]), each grant's valid lease is recorded there for the
/// history checker.
///
/// # Panics
/// When an acquire does not succeed within `wait`, a release fails, a Redis command fails,
/// another holder is inside at the same time, or the history cannot be recorded.
///
/// # Cancel safety
/// Not cancel safe: dropped mid-round, the lease is released only by its guard's drop (in the
/// background) and the counter may miss that round's update.
pub async fn count_under_lock<C: ConnectionLike + Send>(
    locker: &Locker,
    name: &str,
    mut counter: Counter<C>,
    rounds: usize,
    wait: Duration,
    pause: Pause,
    inside: Option<&AtomicUsize>,
) {
    let recorder = Recorder::from_env();
    for _ in 0..rounds {
        let requested_ns = record::monotonic_ns();
        let guard = locker
            .lock(name)
            .fixed_ttl(HOLD_TTL)
            .wait(wait)
            .await
            .expect("acquire within the wait");
        let start_ns = record::monotonic_ns();
        if let Some(inside) = inside {
            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
        }
        counter.bump(pause).await;
        if let Some(inside) = inside {
            inside.fetch_sub(1, Ordering::SeqCst);
        }
        if let Some(recorder) = &recorder {
            recorder.lease(name, &guard, (requested_ns, start_ns), Share::Exclusive);
        }
        guard.release().await.expect("release");
    }
}

/// `tasks` tokio tasks, task `i` on `lockers[i % lockers.len()]` with a clone of `counter`,
/// each running [`count_under_lock`] on `name` for `rounds` rounds with a [`Pause::Yield`]
/// and a shared "alone inside" check; then asserts the counter is `tasks * rounds`.
///
/// Run it on a multi-threaded runtime so the tasks really race. The caller checks afterwards
/// that the lock's keys are gone, which is backend-specific.
///
/// # Panics
/// When `lockers` is empty, a task panics (see [`count_under_lock`]), or an update was lost.
///
/// # Cancel safety
/// Not cancel safe: dropping it leaves the spawned tasks running to their end.
pub async fn tasks_exclude_each_other<C>(
    lockers: &[Locker],
    name: &str,
    mut counter: Counter<C>,
    tasks: usize,
    rounds: usize,
    wait: Duration,
) where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    assert!(!lockers.is_empty(), "at least one locker");
    let inside = Arc::new(AtomicUsize::new(0));
    let handles = (0..tasks).map(|i| {
        let locker = lockers[i % lockers.len()].clone();
        let (inside, name, counter) = (Arc::clone(&inside), name.to_owned(), counter.clone());
        tokio::spawn(async move {
            count_under_lock(
                &locker,
                &name,
                counter,
                rounds,
                wait,
                Pause::Yield,
                Some(&inside),
            )
            .await;
        })
    });
    futures::future::try_join_all(handles)
        .await
        .expect("no task panicked");
    assert_eq!(
        counter.value().await,
        tasks * rounds,
        "lost updates: exclusion broke"
    );
}

/// Runs the `#[ignore]`d test `worker` of the current test binary (a full libtest name, such
/// as `exclusion::worker_process`) in `processes` OS processes with `env` set (see
/// [`crate::run_test_in_processes`]), waits for them at most `limit`, and asserts `counter`
/// is `processes * rounds`, `rounds` being what each worker counts (with
/// [`count_under_lock`]). The workers record every grant's valid lease (a directory of
/// histories named in their environment, [`HISTORY_DIR_VAR`](crate::history::record::HISTORY_DIR_VAR)), and the history checker
/// ([`crate::history`]) must find no overlap and no fencing token that did not grow.
///
/// # Panics
/// When a worker fails, does not run its body, or does not finish within `limit`, when an
/// update was lost, or when the history checker finds a violation.
///
/// # Cancel safety
/// Cancel safe: dropping it kills the workers by their PIDs.
pub async fn processes_exclude_each_other<C: ConnectionLike + Send>(
    worker: &str,
    env: &[(&str, String)],
    processes: usize,
    rounds: usize,
    limit: Duration,
    mut counter: Counter<C>,
) {
    let dir = HistoryDir::new().expect("a directory for the workers' histories");
    let mut env = env.to_vec();
    env.push(dir.env());
    crate::run_test_in_processes(worker, &env, processes, limit)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        counter.value().await,
        processes * rounds,
        "lost updates: exclusion between processes broke"
    );
    dir.assert_correct(processes * rounds);
}
