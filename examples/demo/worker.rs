//! One worker process: takes the lock again and again until the deadline, works under it, and
//! reports every event on stdout (see `protocol.rs`).

use std::io::{self, Write as _};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use distlock::redis::redis::{self, aio::MultiplexedConnection};
use distlock::{Guard, LockError, Locker, TimeoutPhase, redis::RedisLock};

use crate::Error;
use crate::backends::{etcd_locker, mysql_locker, postgres_locker, s3_locker};
use crate::cli::{Backend, WorkerArgs};
use crate::protocol::{Event, StallOutcome, Summary, unix_ms_now};
use crate::resource::{COUNTER_KEY, FencedResource, INSIDE_KEY, LOCK_NAME};
use crate::stats::percentile;

/// How much longer than the lease TTL a simulated stall lasts (see [`stall_overshoot`]).
const STALL_OVERSHOOT: Duration = Duration::from_millis(200);

/// On etcd, how much longer than the lease TTL a simulated stall lasts: etcd's leader looks
/// for expired leases every 500 ms and deletes their keys through a Raft commit, so a key can
/// outlive its lease by that much; a stall shorter than this could come back to its own key.
const ETCD_STALL_OVERSHOOT: Duration = Duration::from_millis(1_000);

/// How much longer than the lease TTL a simulated stall lasts on `backend`.
pub(crate) fn stall_overshoot(backend: Backend) -> Duration {
    match backend {
        Backend::Redis | Backend::Postgres | Backend::Mysql => STALL_OVERSHOOT,
        Backend::Etcd => ETCD_STALL_OVERSHOOT,
        Backend::S3 => STALL_OVERSHOOT,
    }
}

/// How often a worker back from a stall looks for a newer write on the resource.
const POLL: Duration = Duration::from_millis(5);

/// How long past the deadline (and the TTL) a worker back from a stall waits for a newer write.
const NEWER_WRITE_GRACE: Duration = Duration::from_millis(500);

/// Failures in a row after which a worker gives up.
const MAX_CONSECUTIVE_ERRORS: u32 = 20;

/// The pause after a failure before the next round.
const ERROR_PAUSE: Duration = Duration::from_millis(50);

/// Runs a worker to its deadline; the process's exit code.
pub(crate) fn main(args: &WorkerArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            // If even this line cannot be written, the exit code says it all.
            let _ = emit(&Event::Error(format!("cannot start a tokio runtime: {e}")));
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = emit(&Event::Error(format!("fatal: {e}")));
            ExitCode::FAILURE
        }
    }
}

/// Connects, contends until the deadline, and ends with the summary line (also after a fatal
/// error, so the parent sees how far the worker got).
async fn run(args: &WorkerArgs) -> Result<(), Error> {
    let mut worker = Worker::connect(args).await?;
    let outcome = worker.contend().await;
    emit(&Event::Summary(worker.summary()))?;
    outcome
}

/// Writes one protocol line to stdout, flushed at once.
fn emit(event: &Event) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{event}")?;
    out.flush()
}

/// A worker's connections, parameters and tallies.
struct Worker {
    /// Takes the lock.
    locker: Locker,
    /// For the counter, the inside marker and the resource (separate from the lock's pool).
    conn: MultiplexedConnection,
    /// The fenced resource.
    resource: FencedResource,
    /// This worker's name on the resource.
    writer: String,
    /// The lease TTL.
    ttl: Duration,
    /// The sleep inside the counter's read-modify-write.
    hold: Duration,
    /// The longest wait of one acquisition.
    wait: Duration,
    /// Every Nth acquisition stalls (0: never).
    pause_every: u64,
    /// How much longer than the lease a stall lasts.
    overshoot: Duration,
    /// This worker's number: shifts its stalls against the other workers'.
    index: u64,
    /// Whether to take the fair lock (`locker.fair`) rather than the plain one.
    fair: bool,
    /// When to stop taking the lock.
    deadline: Instant,
    /// What happened so far.
    tally: Summary,
    /// Every wait for the lock, in microseconds.
    waits_us: Vec<u64>,
}

impl Worker {
    /// Makes the lock and a connection for the rest; fails if Redis cannot be reached.
    async fn connect(args: &WorkerArgs) -> Result<Self, Error> {
        // The same `Locker` API on either backend; only its construction differs.
        let locker = match (args.backend, &args.postgres_url) {
            // Each grant describes its holder (host, pid, this note; one SET inside the acquire
            // script, no extra round trip), so `distlock serve` and `distlock ls` over the
            // demo's Redis show which worker holds the lock.
            (Backend::Redis, _) => Locker::new(
                RedisLock::builder()
                    .url(&args.redis_url)
                    .holder_note(format!("demo worker-{}", args.index))
                    .build()?,
            ),
            (Backend::Postgres, Some(url)) => postgres_locker(url)?,
            (Backend::Postgres, None) => {
                return Err("--backend postgres needs --postgres-url".into());
            }
            (Backend::Etcd, _) => {
                let urls = args
                    .etcd_url
                    .as_deref()
                    .ok_or("--backend etcd needs --etcd-url")?;
                etcd_locker(urls)?
            }
            (Backend::S3, _) => {
                let endpoint = args
                    .s3_endpoint
                    .as_deref()
                    .ok_or("--backend s3 needs --s3-endpoint")?;
                s3_locker(endpoint)?
            }
            (Backend::Mysql, _) => {
                let url = args
                    .mysql_url
                    .as_deref()
                    .ok_or("--backend mysql needs --mysql-url")?;
                mysql_locker(url)?
            }
        };
        let conn = redis::Client::open(args.redis_url.as_str())?
            .get_multiplexed_async_connection()
            .await?;
        Ok(Self {
            locker,
            conn,
            resource: FencedResource::new(&args.redis_url)?,
            writer: format!("worker-{}", args.index),
            ttl: args.ttl(),
            hold: Duration::from_millis(args.hold_ms),
            wait: Duration::from_millis(args.wait_ms),
            pause_every: args.pause_every,
            overshoot: stall_overshoot(args.backend),
            index: u64::from(args.index),
            fair: args.fair,
            deadline: deadline(args.deadline_unix_ms),
            tally: Summary::default(),
            waits_us: Vec::new(),
        })
    }

    /// Rounds until the deadline. A failed round is reported and counted, and the worker goes
    /// on; after [`MAX_CONSECUTIVE_ERRORS`] failures in a row it gives up.
    async fn contend(&mut self) -> Result<(), Error> {
        let mut failures = 0;
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            match self.round(left).await {
                Ok(()) => failures = 0,
                Err(e) => {
                    self.tally.errors += 1;
                    failures += 1;
                    emit(&Event::Error(e.to_string()))?;
                    if failures >= MAX_CONSECUTIVE_ERRORS {
                        return Err(format!("giving up after {failures} failures in a row").into());
                    }
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            }
        }
    }

    /// One round: take the lock (waiting at most until the deadline), then work under it or,
    /// when one is due, simulate a stall.
    async fn round(&mut self, left: Duration) -> Result<(), Error> {
        let asked = Instant::now();
        // The fair lock is the same lock (the same Redis key), granted in the order the workers
        // asked; the plain one goes to whoever asks first once it is free. (Redis only: the
        // parent refuses --fair with --backend postgres or etcd.)
        let request = if self.fair {
            self.locker.fair(LOCK_NAME)
        } else {
            self.locker.lock(LOCK_NAME)
        };
        let acquired = request
            .fixed_ttl(self.ttl)
            .wait(self.wait.min(left))
            .acquire()
            .await;
        let guard = match acquired {
            Ok(guard) => guard,
            Err(LockError::Timeout {
                phase: TimeoutPhase::Wait,
                ..
            }) => {
                // A wait cut short by the deadline is just the end of the run.
                if Instant::now() < self.deadline {
                    self.tally.wait_timeouts += 1;
                    emit(&Event::WaitTimeout)?;
                }
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let wait_us = u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.waits_us.push(wait_us);
        self.tally.acquisitions += 1;
        emit(&Event::Acquired { wait_us })?;
        if self.stall_due() {
            self.stall(guard).await
        } else {
            self.work(guard).await
        }
    }

    /// Whether this acquisition simulates a stall: every `pause_every`th one, as long as enough
    /// time is left for another worker to take the lock over and write before the deadline
    /// (the TTL for the lease to run out, plus a TTL for a successor that stalls in turn).
    ///
    /// Worker `i` stalls at its acquisitions `N − i`, `2N − i`, ...: shifted, so that workers
    /// that take turns (the fair lock: every worker's `k`th grant comes in the same round) do
    /// not all stall in the same round, each waiting for a newer write that none of them makes.
    fn stall_due(&self) -> bool {
        let left = self.deadline.saturating_duration_since(Instant::now());
        self.pause_every > 0
            && (self.tally.acquisitions + self.index).is_multiple_of(self.pause_every)
            && left >= 2 * self.ttl + self.overshoot
    }

    /// The normal path: mark entry, increment the counter, write to the resource, mark exit,
    /// release.
    async fn work(&mut self, guard: Guard) -> Result<(), Error> {
        let token = guard.fencing_token();
        let worked = match self.enter().await {
            Ok(()) => {
                let updated = self.update(token).await;
                let left = self.leave().await;
                updated.and(left)
            }
            Err(e) => Err(e),
        };
        let released = guard.release().await;
        worked?;
        match released {
            // The lease ran out before the work was done; the next holder may have overlapped.
            Err(LockError::NotOwned { .. }) => self.tally.overruns += 1,
            other => other?,
        }
        Ok(())
    }

    /// `INCR demo:inside`: any reply but 1 means another holder is inside too.
    async fn enter(&mut self) -> Result<(), Error> {
        let inside: i64 = redis::cmd("INCR")
            .arg(INSIDE_KEY)
            .query_async(&mut self.conn)
            .await?;
        if inside != 1 {
            self.tally.violations += 1;
            emit(&Event::Violation { inside })?;
        }
        Ok(())
    }

    /// `DECR demo:inside`.
    async fn leave(&mut self) -> Result<(), Error> {
        let _: i64 = redis::cmd("DECR")
            .arg(INSIDE_KEY)
            .query_async(&mut self.conn)
            .await?;
        Ok(())
    }

    /// Increments the counter with a non-atomic GET, sleep, SET, so that two holders at once
    /// would lose an increment; then writes to the resource with the lease's fencing token.
    async fn update(&mut self, token: u64) -> Result<(), Error> {
        let value: Option<u64> = redis::cmd("GET")
            .arg(COUNTER_KEY)
            .query_async(&mut self.conn)
            .await?;
        tokio::time::sleep(self.hold).await;
        let () = redis::cmd("SET")
            .arg(COUNTER_KEY)
            .arg(value.unwrap_or(0) + 1)
            .query_async(&mut self.conn)
            .await?;
        self.tally.increments += 1;
        if self.resource.write(token, &self.writer).await? {
            self.tally.fenced_accepted += 1;
        } else {
            self.tally.fenced_rejected += 1;
        }
        Ok(())
    }

    /// A simulated stall (a GC pause, a swapped-out process): the worker sits on its guard past
    /// the lease's end, another worker takes the lock and writes, then this one wakes up and
    /// writes with its stale fencing token. The resource must reject that write.
    ///
    /// This path leaves `demo:inside` and the counter alone. The point is fencing: a stalled
    /// process's late writes are exactly these fenced writes, and the resource, not the lock,
    /// is what stops them. (An unfenced write here would be a lost update that no lock can
    /// prevent once its lease has run out; and the stale write may land while the next holder
    /// is inside, which is expected and not an exclusion violation.)
    async fn stall(&mut self, guard: Guard) -> Result<(), Error> {
        self.tally.stalls += 1;
        let token = guard.fencing_token();
        tokio::time::sleep(self.ttl + self.overshoot).await;
        let outcome = if self.newer_write_seen(token).await? {
            if self.resource.write(token, &self.writer).await? {
                StallOutcome::Accepted
            } else {
                StallOutcome::Rejected
            }
        } else {
            StallOutcome::Unchecked
        };
        match outcome {
            StallOutcome::Rejected => self.tally.stale_rejected += 1,
            StallOutcome::Accepted => self.tally.stale_accepted += 1,
            StallOutcome::Unchecked => self.tally.stale_unchecked += 1,
        }
        emit(&Event::Stall(outcome))?;
        // The lease ran out during the stall, so this must find the lock no longer ours.
        match guard.release().await {
            Ok(()) => self.tally.stale_still_ours += 1,
            Err(LockError::NotOwned { .. }) => {}
            Err(error) => return Err(error.into()),
        }
        Ok(())
    }

    /// Waits (bounded) until the resource accepted a write with a fencing token greater than
    /// `token` (an equal one is the stalled holder's own). A stale write is only stale once a newer one has landed: a write that arrives
    /// before its successor's first write is accepted by any fenced resource, correctly, since
    /// it is ordered before it. As in Kleppmann's example, the stalled worker wakes up after
    /// its successor wrote. `false` if no newer write came in time (no other worker got the
    /// lock before the deadline).
    async fn newer_write_seen(&mut self, token: u64) -> Result<bool, Error> {
        let give_up = self.deadline.max(Instant::now()) + self.ttl + NEWER_WRITE_GRACE;
        loop {
            if FencedResource::fence(&mut self.conn)
                .await?
                .is_some_and(|fence| fence > token)
            {
                return Ok(true);
            }
            if Instant::now() >= give_up {
                return Ok(false);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The tallies, with the wait percentiles.
    fn summary(&self) -> Summary {
        Summary {
            wait_p50_us: percentile(&self.waits_us, 50).unwrap_or(0),
            wait_p99_us: percentile(&self.waits_us, 99).unwrap_or(0),
            ..self.tally
        }
    }
}

/// The local instant of a deadline given as milliseconds since the Unix epoch.
fn deadline(unix_ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(unix_ms.saturating_sub(unix_ms_now()))
}
