//! Count-down latches and double barriers whose parties hold leases (Redisson's
//! `RCountDownLatch`; Curator's `DistributedDoubleBarrier`), so a party that crashes is counted
//! out when its lease ends instead of leaving the others waiting for ever.
//!
//! Written once over the contract: every record is a permit of a semaphore under a name
//! derived from the latch's or barrier's (`NAME:distlock-latch-parties`, ...), taken through
//! the [`Locker`] (a party's permit is a renewed lease, like any guard's) and counted with
//! [`Lock::permits_in_use`](crate::backend::Lock::permits_in_use). So every backend that
//! offers semaphores offers them, other clients of the store see them as semaphores, and
//! operator tools fold them back into one row ([`Coordination::of`]).
//!
//! The rooms: here the names and the wait they share; `latch`: [`Latch`]; `barrier`:
//! [`Barrier`].

mod barrier;
mod latch;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

pub use barrier::{Barrier, BarrierMember, BarrierState};
pub use latch::{DEFAULT_LATCH_KEEP, Latch, LatchParty, LatchState};

use crate::{Guard, LockError, Locker, MAX_PERMITS, TimeoutPhase, check_name};

/// The records of latches and barriers, by the suffix of their names.
const SUFFIXES: [(&str, Coordination, CoordinationRecord); 5] = [
    (
        ":distlock-latch-parties",
        Coordination::Latch,
        CoordinationRecord::Parties,
    ),
    (
        ":distlock-latch-joined",
        Coordination::Latch,
        CoordinationRecord::Joined,
    ),
    (
        ":distlock-latch-done",
        Coordination::Latch,
        CoordinationRecord::Done,
    ),
    (
        ":distlock-barrier",
        Coordination::Barrier,
        CoordinationRecord::Parties,
    ),
    (
        ":distlock-barrier-open",
        Coordination::Barrier,
        CoordinationRecord::Open,
    ),
];

/// What a name derived by a latch or a barrier is ([`Coordination::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Coordination {
    /// A record of a [`Latch`].
    Latch,
    /// A record of a [`Barrier`].
    Barrier,
}

/// Which record of a latch or a barrier a derived name holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CoordinationRecord {
    /// The parties present now, one renewed permit each: a latch's parties that have not
    /// counted down yet, a barrier's members.
    Parties,
    /// A latch's parties that ever joined (kept for the latch's `keep`).
    Joined,
    /// A latch's count-downs (kept for the latch's `keep`).
    Done,
    /// A barrier's members that passed it, held until they have left: the barrier is open
    /// while one is held.
    Open,
}

impl Coordination {
    /// The word for it in output: `latch`, `barrier`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Latch => "latch",
            Self::Barrier => "barrier",
        }
    }

    /// What `name` is a record of, and of which latch or barrier (the name it was derived
    /// from); `None` for any other name. For operator tools, which fold a latch's or a
    /// barrier's records into one row.
    #[must_use]
    pub fn of(name: &str) -> Option<(Coordination, CoordinationRecord, &str)> {
        SUFFIXES.iter().find_map(|(suffix, what, record)| {
            name.strip_suffix(suffix).map(|base| (*what, *record, base))
        })
    }

    /// The name of `record` of the latch or barrier `name`.
    #[must_use]
    pub fn record_name(self, record: CoordinationRecord, name: &str) -> String {
        let suffix = SUFFIXES
            .iter()
            .find(|(_, what, r)| *what == self && *r == record)
            .map_or("", |(suffix, _, _)| suffix);
        format!("{name}{suffix}")
    }
}

/// The options a latch and a barrier share, on a type with a `shared: Shared` field: its name,
/// a party's lease, and the bound on each wait. `$party` names a party ("party", "member");
/// `$waits` says which waits the bound is for.
macro_rules! shared_options {
    ($party:literal, $waits:literal) => {
        /// The name of the latch or barrier.
        #[must_use]
        pub fn name(&self) -> &str {
            &self.shared.name
        }

        #[doc = concat!(
            "A ", $party, "'s lease (default: the locker's): renewed while the ", $party,
            " lives, so a crashed ", $party, " is counted out at most this long after its crash."
        )]
        #[must_use]
        pub fn lease(mut self, lease: Duration) -> Self {
            self.shared.lease = Some(lease);
            self
        }

        #[doc = concat!("How long ", $waits, " (default: the locker's wait).")]
        #[must_use]
        pub fn wait_at_most(mut self, bound: Duration) -> Self {
            self.shared.wait = Some(Some(bound));
            self
        }

        /// Waits without a bound.
        #[must_use]
        pub fn wait_forever(mut self) -> Self {
            self.shared.wait = Some(None);
            self
        }
    };
}
use shared_options;

impl Locker {
    /// A count-down latch `name` of `count` (≥ 1) count-downs whose parties hold leases: see
    /// [`Latch`]. Nothing is sent until one of its operations is awaited.
    pub fn latch(&self, name: impl Into<Arc<str>>, count: u32) -> Latch {
        Latch::new(self.clone(), name.into(), count)
    }

    /// A double barrier `name` of `parties` (≥ 1) members, each holding a lease: see
    /// [`Barrier`]. Nothing is sent until one of its operations is awaited.
    pub fn barrier(&self, name: impl Into<Arc<str>>, parties: u32) -> Barrier {
        Barrier::new(self.clone(), name.into(), parties)
    }
}

/// What a latch and a barrier share: the locker, the name, the count, a party's lease and the
/// bound on each wait.
#[derive(Debug, Clone)]
struct Shared {
    locker: Locker,
    name: Arc<str>,
    what: Coordination,
    count: u32,
    lease: Option<Duration>,
    wait: Option<Option<Duration>>,
}

impl Shared {
    fn new(locker: Locker, name: Arc<str>, what: Coordination, count: u32) -> Self {
        Self {
            locker,
            name,
            what,
            count,
            lease: None,
            wait: None,
        }
    }

    /// The name of `record`.
    fn record(&self, record: CoordinationRecord) -> String {
        self.what.record_name(record, &self.name)
    }

    /// Checks what every operation needs before any I/O: a backend with semaphores, a count
    /// in range, names that fit with their suffixes.
    fn check(&self) -> Result<(), LockError> {
        let lock = self.locker.backend_lock();
        if !lock.capabilities().semaphore {
            return Err(LockError::Unsupported {
                backend: lock.backend(),
                kind: self.what.as_str(),
            });
        }
        if self.count == 0 || self.count > MAX_PERMITS {
            return Err(LockError::invalid(format!(
                "a {} counts 1 to {MAX_PERMITS}, not {}",
                self.what.as_str(),
                self.count
            )));
        }
        check_name(&self.name)?;
        // The longest suffix of the kind: every record's name must fit.
        for (_, what, record) in SUFFIXES {
            if what == self.what {
                check_name(&self.record(record))?;
            }
        }
        if let Some(lease) = self.lease {
            crate::check_ttl(lease)?;
        }
        Ok(())
    }

    /// How long a wait may last: the one set, else the locker's default (`None`: no bound).
    fn wait_bound(&self) -> Option<Duration> {
        self.wait.unwrap_or_else(|| self.locker.default_wait())
    }

    /// Takes this party's renewed permit of `record` (of `max`), waiting at most `bound`.
    async fn take(
        &self,
        record: CoordinationRecord,
        max: u32,
        bound: Option<Duration>,
    ) -> Result<Guard, LockError> {
        let mut request = self.locker.semaphore(self.record(record), max);
        if let Some(lease) = self.lease {
            request = request.lease(lease);
        }
        request = match bound {
            Some(bound) => request.wait(bound),
            None => request.wait_forever(),
        };
        request.acquire().await
    }

    /// Writes one record permit of `record` (of `max`) that lives `ttl`, renewed by nobody;
    /// `false` when all `max` are taken.
    async fn write(
        &self,
        record: CoordinationRecord,
        max: u32,
        ttl: Duration,
    ) -> Result<bool, LockError> {
        let taken = self
            .locker
            .semaphore(self.record(record), max)
            .fixed_ttl(ttl)
            .try_acquire()
            .await?;
        Ok(taken.map(Guard::leak).is_some())
    }

    /// The permits of `record` held now (expired ones are free).
    async fn count(&self, record: CoordinationRecord) -> Result<u32, LockError> {
        self.locker
            .backend_lock()
            .permits_in_use(&self.record(record))
            .await
    }
}

/// The pace of a wait for a latch or a barrier: nothing announces a new grant, so the records
/// are read again after [`FIRST_POLL`], doubling to [`LAST_POLL`], until the deadline.
struct Poll {
    started: Instant,
    deadline: Option<Instant>,
    delay: Duration,
}

/// The first pause between two reads of a wait: 20 ms.
const FIRST_POLL: Duration = Duration::from_millis(20);

/// The longest pause between two reads of a wait: 200 ms, so a latch that opens or a
/// barrier that fills is seen within it.
const LAST_POLL: Duration = Duration::from_millis(200);

impl Poll {
    fn new(bound: Option<Duration>) -> Self {
        let started = Instant::now();
        Self {
            started,
            deadline: bound.and_then(|bound| started.checked_add(bound)),
            delay: FIRST_POLL,
        }
    }

    /// Sleeps until the next read; [`LockError::Timeout`] (phase `Wait`) once the deadline
    /// has passed.
    async fn pause(&mut self) -> Result<(), LockError> {
        let now = Instant::now();
        let wake = match self.deadline {
            Some(deadline) if now >= deadline => {
                return Err(LockError::Timeout {
                    phase: TimeoutPhase::Wait,
                    elapsed: now - self.started,
                });
            }
            Some(deadline) => deadline.min(now + self.delay),
            None => now + self.delay,
        };
        tokio::time::sleep_until(wake).await;
        self.delay = (self.delay * 2).min(LAST_POLL);
        Ok(())
    }
}
