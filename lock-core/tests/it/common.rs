//! A controllable backend for the Locker's tests: MemoryLock underneath, with counters, and
//! switches that make renewals find the lease stolen, fail, or take time.

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{
    Attempt, Capabilities, Handover, Holder, Lock, MultiAttempt, ReleaseSignal, ReleaseWatch,
};
use lock_core::{Kind, Lease, LockError, Locker, MemoryLock, Op, TimeoutPhase, Token};
use tokio::time::{Instant, sleep};

#[derive(Default)]
pub struct Probe {
    pub inner: MemoryLock,
    pub extends: AtomicU32,
    pub extend_batches: AtomicU32,
    pub releases: AtomicU32,
    /// Extends answer "not ours".
    pub stolen: AtomicBool,
    /// Extends fail with a retryable error.
    pub failing: AtomicBool,
    /// Each extend takes this long (after being applied).
    pub extend_delay: Mutex<Duration>,
    /// Extends answer less validity than asked for: 30 % of it (a Redlock's drift, an etcd
    /// lease kept alive a moment ago).
    pub short_answers: AtomicBool,
    /// Set when a release starts; an extend that starts or ends after it is a violation.
    pub released_at: Mutex<Option<Instant>>,
    pub extends_after_release: AtomicU32,
    /// Releases answer "not ours" (another token is there), as after a theft.
    pub disowned: AtomicBool,
    pub attempts: AtomicU32,
    /// Announce releases to watchers (like Redis pub/sub), as a backend shared by two
    /// "processes" (two Lockers) would.
    pub announces: AtomicBool,
    pub signal: ReleaseSignal,
    /// Every subscription asked for, announced or not.
    pub watch_calls: AtomicU32,
    /// Tell a fair waiter its turn (`watch_turn`, as Redis does) on every release, even
    /// without announcing releases to other watchers.
    pub turns: AtomicBool,
    pub turn_calls: AtomicU32,
    /// Busy answers of the kinds do not say how long the holder holds (a backend that cannot
    /// tell).
    pub hides_holder_ttl: AtomicBool,
    pub watches_alive: Arc<AtomicI32>,
    /// Pass locks on in one step (MemoryLock's `hand_over`); off, the default answer
    /// `Unsupported` makes the Locker release and re-acquire.
    pub hands_over: AtomicBool,
    pub handovers: AtomicU32,
    /// Each handover takes this long (after being applied).
    pub handover_delay: Mutex<Duration>,
    /// Handovers fail: `Some(true)` after the store applied them (a lost answer), `Some(false)`
    /// before (a refusal known to change nothing).
    pub handover_fails: Mutex<Option<bool>>,
}

/// Dropped with a watch: counts live subscriptions.
struct Subscription(Arc<AtomicI32>);

impl Drop for Subscription {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Probe {
    pub fn count(&self, c: &AtomicU32) -> u32 {
        c.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Lock for Probe {
    fn backend(&self) -> &'static str {
        "probe"
    }
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        self.inner.try_acquire(name, token, ttl).await
    }
    async fn try_acquire_kind(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        let attempt = self.inner.try_acquire_kind(name, kind, token, ttl).await;
        match attempt {
            Ok(Attempt::Busy { announces, .. }) if self.hides_holder_ttl.load(Ordering::SeqCst) => {
                Ok(Attempt::Busy {
                    holder_ttl: None,
                    announces,
                })
            }
            attempt => attempt,
        }
    }
    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        self.inner.permits_in_use(name).await
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.extends.fetch_add(1, Ordering::SeqCst);
        if self.released_at.lock().expect("lock").is_some() {
            self.extends_after_release.fetch_add(1, Ordering::SeqCst);
        }
        if self.failing.load(Ordering::SeqCst) {
            return Err(LockError::Backend {
                backend: "probe",
                op: Op::Extend,
                retryable: true,
                source: "connection reset".into(),
            });
        }
        if self.stolen.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let mut answer = self.inner.extend(lease, ttl).await;
        if self.short_answers.load(Ordering::SeqCst)
            && let Ok(Some(until)) = answer
        {
            let now = Instant::now();
            answer = Ok(Some(now + until.saturating_duration_since(now) * 3 / 10));
        }
        let delay = *self.extend_delay.lock().expect("lock");
        if !delay.is_zero() {
            sleep(delay).await;
            if self.released_at.lock().expect("lock").is_some() {
                self.extends_after_release.fetch_add(1, Ordering::SeqCst);
            }
        }
        answer
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        *self.released_at.lock().expect("lock") = Some(Instant::now());
        if self.disowned.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let released = self.inner.release(lease).await;
        if self.announces.load(Ordering::SeqCst) || self.turns.load(Ordering::SeqCst) {
            self.signal.notify();
        }
        released
    }
    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        if !self.hands_over.load(Ordering::SeqCst) {
            return Ok(Handover::Unsupported);
        }
        self.handovers.fetch_add(1, Ordering::SeqCst);
        let fails = *self.handover_fails.lock().expect("lock");
        if fails == Some(false) {
            return Err(LockError::invalid("refused before any change"));
        }
        let answer = self.inner.hand_over(lease, to, ttl).await;
        if fails == Some(true) {
            return Err(LockError::Timeout {
                phase: lock_core::TimeoutPhase::Command,
                elapsed: Duration::from_millis(500),
            });
        }
        let delay = *self.handover_delay.lock().expect("lock");
        if !delay.is_zero() {
            sleep(delay).await;
        }
        answer
    }
    async fn watch(&self, _name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        // A Locker that subscribes again at every answer would spin on the paused clock: past
        // this many subscriptions the probe refuses, and the test's count shows it.
        if self.watch_calls.fetch_add(1, Ordering::SeqCst) >= 10_000 {
            return Err(LockError::invalid("10,000 subscriptions"));
        }
        if !self.announces.load(Ordering::SeqCst) {
            return Ok(None);
        }
        self.watches_alive.fetch_add(1, Ordering::SeqCst);
        Ok(Some(ReleaseWatch::new(
            self.signal.clone(),
            Subscription(Arc::clone(&self.watches_alive)),
        )))
    }
    async fn watch_turn(
        &self,
        name: &str,
        _token: &Token,
    ) -> Result<Option<ReleaseWatch>, LockError> {
        if !self.turns.load(Ordering::SeqCst) {
            return self.watch(name).await;
        }
        self.turn_calls.fetch_add(1, Ordering::SeqCst);
        Ok(Some(ReleaseWatch::new(self.signal.clone(), ())))
    }
    /// As a store that is down while `failing` is on.
    async fn ping(&self) -> Result<(), LockError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(LockError::Backend {
                backend: "probe",
                op: Op::Connect,
                retryable: true,
                source: "connection refused".into(),
            });
        }
        Ok(())
    }
    async fn extend_many(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Vec<Result<Option<Instant>, LockError>> {
        self.extend_batches.fetch_add(1, Ordering::SeqCst);
        futures::future::join_all(leases.iter().map(|(l, t)| self.extend(l, *t))).await
    }
}

/// A locker whose waiters would sleep 10 s between polls: any faster grant came from a wake-up.
pub fn slow_polling_locker(probe: &Arc<Probe>) -> Locker {
    Locker::builder(Arc::clone(probe))
        .backoff(lock_core::Backoff::new(
            Duration::from_secs(10),
            Duration::from_secs(10),
        ))
        .build()
}

/// Whether `name` is free for `locker` right now: a single try that takes it and gives it back
/// (in the background, as a dropped guard does).
pub async fn is_free(locker: &Locker, name: &str) -> bool {
    locker
        .lock(name)
        .try_acquire()
        .await
        .expect("answers")
        .is_some()
}

pub fn probe_locker(lease: Duration) -> (Arc<Probe>, Locker) {
    let probe = Arc::new(Probe::default());
    let locker = Locker::builder(Arc::clone(&probe)).lease(lease).build();
    (probe, locker)
}

/// A `MemoryLock` that declares `capabilities` of its own under the name `backend` (a backend
/// that lacks a capability the Locker checks), and counts the attempts that reach it.
pub struct Declaring {
    pub backend: &'static str,
    pub capabilities: lock_core::backend::Capabilities,
    pub inner: MemoryLock,
    pub attempts: AtomicU32,
}

impl Declaring {
    pub fn new(backend: &'static str, capabilities: lock_core::backend::Capabilities) -> Self {
        Self {
            backend,
            capabilities,
            inner: MemoryLock::new(),
            attempts: AtomicU32::new(0),
        }
    }
}

#[async_trait]
impl Lock for Declaring {
    fn backend(&self) -> &'static str {
        self.backend
    }
    fn capabilities(&self) -> lock_core::backend::Capabilities {
        self.capabilities
    }
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        self.inner.try_acquire(name, token, ttl).await
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.inner.extend(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.inner.release(lease).await
    }
}

/// What a recorder of its own saw while `scenario` ran on a current-thread runtime with a
/// paused clock (taking the snapshot drains the histograms).
pub fn recorded_while<F: Future<Output = ()>>(
    scenario: F,
) -> Vec<(
    metrics_util::CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    metrics_util::debugging::DebugValue,
)> {
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        runtime.block_on(scenario);
    });
    snapshotter.snapshot().into_vec()
}

/// How the next acquires fail.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    None,
    /// The store took the grant, then the answer was lost (a command timeout).
    AppliedThenTimedOut,
    /// Known to have applied nothing: a quorum not reached (worth trying again).
    NothingApplied,
    /// A wrong password: trying again will not help.
    Refused,
    /// The backend itself says busy, as an error (a store whose lock wait timed out).
    BusyError,
}

/// MemoryLock (in `tests/it/attempts.rs` and the metrics' tests), counting the acquire calls by kind and the releases, failing acquires as told.
pub struct Failing {
    pub inner: MemoryLock,
    failure: Mutex<Failure>,
    pub plain: AtomicU32,
    pub renewed: AtomicU32,
    pub releases: AtomicU32,
    /// Releases fail (the store went away after the grant).
    pub failing_releases: AtomicBool,
}

impl Failing {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: MemoryLock::new(),
            failure: Mutex::new(Failure::None),
            plain: AtomicU32::new(0),
            renewed: AtomicU32::new(0),
            releases: AtomicU32::new(0),
            failing_releases: AtomicBool::new(false),
        })
    }

    pub fn fail(&self, failure: Failure) {
        *self.failure.lock().expect("lock") = failure;
    }

    fn failure(&self) -> Failure {
        *self.failure.lock().expect("lock")
    }

    /// The error of a failed acquire; `None` when acquires succeed.
    fn error(&self) -> Option<LockError> {
        match self.failure() {
            Failure::None => None,
            Failure::AppliedThenTimedOut => Some(LockError::Timeout {
                phase: TimeoutPhase::Command,
                elapsed: Duration::from_millis(500),
            }),
            Failure::NothingApplied => Some(LockError::QuorumNotReached {
                backend: "failing",
                op: Op::Acquire,
                granted: 1,
                required: 2,
                retryable: true,
                source: "1 of 3 nodes".into(),
            }),
            Failure::BusyError => Some(LockError::Busy {
                name: "busy".into(),
                holder_ttl: None,
            }),
            Failure::Refused => Some(LockError::Backend {
                backend: "failing",
                op: Op::Acquire,
                retryable: false,
                source: "WRONGPASS".into(),
            }),
        }
    }

    pub fn count(&self, counter: &AtomicU32) -> u32 {
        counter.load(Ordering::SeqCst)
    }

    /// One grant, failing as told (applied first when the answer is to be lost).
    async fn acquire(&self, name: &str, token: Token, ttl: Duration) -> Result<Attempt, LockError> {
        if self.failure() == Failure::AppliedThenTimedOut {
            self.inner.try_acquire(name, token, ttl).await?;
        }
        match self.error() {
            Some(error) => Err(error),
            None => self.inner.try_acquire(name, token, ttl).await,
        }
    }
}

#[async_trait]
impl Lock for Failing {
    fn backend(&self) -> &'static str {
        "failing"
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.plain.fetch_add(1, Ordering::SeqCst);
        self.acquire(name, token, ttl).await
    }
    async fn try_acquire_renewed(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.renewed.fetch_add(1, Ordering::SeqCst);
        self.acquire(name, token, ttl).await
    }
    async fn try_acquire_all(
        &self,
        names: &[Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<MultiAttempt, LockError> {
        if self.failure() == Failure::AppliedThenTimedOut {
            self.inner.try_acquire_all(names, token, ttl).await?;
        }
        match self.error() {
            Some(error) => Err(error),
            None => self.inner.try_acquire_all(names, token, ttl).await,
        }
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.inner.extend(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        if self.failing_releases.load(Ordering::SeqCst) {
            return Err(LockError::Backend {
                backend: "failing",
                op: Op::Release,
                retryable: true,
                source: "connection reset".into(),
            });
        }
        self.inner.release(lease).await
    }
}

/// MemoryLock as a remote store looks to an observer (elections, revocation): each holder read
/// takes `round_trip` and is counted (past [`MAX_READS`] it fails, so a spinning observer ends
/// its test instead of hanging it on the paused clock), a leader's record (its annotate) lands
/// `note_after` the grant, as on a loaded server, and releases are announced to watchers (as
/// Redis's pub/sub does).
pub struct Remote {
    inner: Arc<MemoryLock>,
    round_trip: Duration,
    note_after: Duration,
    pub reads: AtomicU32,
    released: ReleaseSignal,
    /// Whether its capabilities say so (the Locker then listens for revocation bells).
    announces: bool,
    /// Live subscriptions (`watch`), counted down when a watch is dropped.
    pub watches_alive: Arc<AtomicI32>,
}

pub const ROUND_TRIP: Duration = Duration::from_millis(1);
pub const MAX_READS: u32 = 1_000;
pub const SLOW_NOTE: Duration = Duration::from_millis(30);

impl Remote {
    pub fn new(inner: &Arc<MemoryLock>, note_after: Duration) -> Arc<Self> {
        Self::answering_in(inner, ROUND_TRIP, note_after)
    }

    pub fn answering_in(
        inner: &Arc<MemoryLock>,
        round_trip: Duration,
        note_after: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            inner: Arc::clone(inner),
            round_trip,
            note_after,
            reads: AtomicU32::new(0),
            released: ReleaseSignal::default(),
            announces: false,
            watches_alive: Arc::new(AtomicI32::new(0)),
        })
    }

    /// One that says in its capabilities that it announces releases.
    pub fn announcing(inner: &Arc<MemoryLock>) -> Arc<Self> {
        let mut remote = Self::answering_in(inner, ROUND_TRIP, Duration::ZERO);
        Arc::get_mut(&mut remote).expect("new").announces = true;
        remote
    }
}

#[async_trait]
impl Lock for Remote {
    fn backend(&self) -> &'static str {
        "remote"
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities().with_announcements(self.announces)
    }
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.inner.try_acquire(name, token, ttl).await
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.inner.extend(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let released = self.inner.release(lease).await;
        self.released.notify();
        released
    }
    async fn watch(&self, _name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        self.watches_alive.fetch_add(1, Ordering::SeqCst);
        Ok(Some(ReleaseWatch::new(
            self.released.clone(),
            Subscription(Arc::clone(&self.watches_alive)),
        )))
    }
    async fn describe_holder(&self, name: &str) -> Result<Option<Holder>, LockError> {
        if self.reads.fetch_add(1, Ordering::SeqCst) >= MAX_READS {
            return Err(LockError::invalid(
                "the observer read the holder 1,000 times",
            ));
        }
        sleep(self.round_trip).await;
        self.inner.describe_holder(name).await
    }
    async fn annotate(&self, lease: &Lease, note: &[u8]) -> Result<bool, LockError> {
        sleep(self.note_after).await;
        self.inner.annotate(lease, note).await
    }
}
