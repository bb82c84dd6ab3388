//! Leader election on any backend with the mutex: one leader at a time, whose *term* is the
//! fencing token of its grant.
//!
//! The rooms: here the [`Election`] builder and its campaign; `leadership`: what a leader
//! holds; `leader`: what observers read back from the store, and the record the leader
//! writes there; `observe`: the stream of leader changes; `run`: the campaign loop.

mod leader;
mod leadership;
mod observe;
mod run;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use metrics::SharedString;

pub use leader::Leader;
pub use leadership::Leadership;
pub use run::{ElectionRun, TermEnd, TermEvent};

use crate::backend::Fencing;
use crate::{Guard, Lease, LockError, LockRequest, Locker, check_name};

/// How often [`Election::observe`] reads the leader from the store when nothing wakes it
/// sooner: 250 ms. A release announced by the backend ([`Lock::watch`](crate::backend::Lock::watch))
/// and the end of the leader's TTL wake it at once; a new grant is announced by no backend,
/// so a new leader after an empty spell is seen within this interval.
pub const DEFAULT_OBSERVE_POLL: Duration = Duration::from_millis(250);

/// One leader election: candidates [`campaign`](Election::campaign) for the mutex `name`, the
/// winner leads while its lease lives, and observers read the leader
/// ([`leader`](Election::leader), [`observe`](Election::observe)). Made by [`Locker::elect`];
/// cheap to clone.
///
/// **The term** is the fencing token of the leader's grant: it grows with every new leader,
/// also across restarts and failovers of the store, as far as the backend's fencing tokens do
/// (its [`Capabilities::fencing`](crate::backend::Capabilities::fencing)). Hand it to every
/// write the leader makes; a resource that rejects a smaller term than it has seen keeps a
/// deposed leader (paused, partitioned) from writing after its successor. The election by
/// itself does **not** stop a paused leader from acting: its [`Leadership::lost`] fires a stop
/// margin before its lease ends when it can tell, but a process paused past its lease learns
/// only when it runs again, and only the term protects the resource then.
///
/// Backends whose fencing tokens are not ordered (`Fencing::None`: PostgreSQL's advisory mode,
/// a `RedisLock` with fencing off; `Fencing::Unordered`: a Redlock over counters) cannot give
/// a term: campaigning there answers [`LockError::Unsupported`] (kind `"election"`).
/// Observers need the backend to describe the holder
/// ([`Capabilities::holders`](crate::backend::Capabilities::holders)); elsewhere
/// [`leader`](Election::leader) and [`observe`](Election::observe) answer
/// [`LockError::Unsupported`] (kind `"holder"`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lock_core::LockError> {
/// use std::time::Duration;
/// use lock_core::{Locker, MemoryLock};
///
/// let locker = Locker::new(MemoryLock::new());
/// let election = locker.elect("scheduler").value("pod-a:8080").lease(Duration::from_secs(10));
/// let leadership = election.campaign().await?;
/// let leader = election.leader().await?.expect("someone leads");
/// assert_eq!(leader.term(), leadership.term());
/// assert_eq!(leader.value(), b"pod-a:8080");
/// leadership.resign().await?;
/// assert!(election.leader().await?.is_none());
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use]
pub struct Election {
    locker: Locker,
    name: Arc<str>,
    value: Arc<[u8]>,
    lease: Option<Duration>,
    stop_margin: Option<Duration>,
    lock_delay: Duration,
    poll: Duration,
    label: SharedString,
}

impl Locker {
    /// Starts configuring the leader election `name` on this locker's backend: the mutex
    /// `name`, taken by the candidates that [`campaign`](Election::campaign). See
    /// [`Election`].
    pub fn elect(&self, name: impl Into<Arc<str>>) -> Election {
        Election {
            locker: self.clone(),
            name: name.into(),
            value: Arc::from(&b""[..]),
            lease: None,
            stop_margin: None,
            lock_delay: Duration::ZERO,
            poll: DEFAULT_OBSERVE_POLL,
            label: SharedString::const_str("election"),
        }
    }
}

impl Election {
    /// What observers see of this candidate when it leads ([`Leader::value`]): a pod name, an
    /// address. Bytes or a string; default empty. Written beside the lock, never in it, so the
    /// lock key keeps its plain-token layout.
    pub fn value(mut self, value: impl AsRef<[u8]>) -> Self {
        self.value = Arc::from(value.as_ref());
        self
    }

    /// The leader's lease, renewed every third of it while it leads (default: the locker's,
    /// [`LockerBuilder::lease`](crate::LockerBuilder::lease)). A crashed leader is replaced at
    /// most this long after the crash (plus a candidate's wake-up).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// How long before the lease's end [`Leadership::lost`] fires when renewals fail (default:
    /// the locker's, a fifth of the lease); see
    /// [`LockRequest::stop_margin`](crate::LockRequest::stop_margin).
    pub fn stop_margin(mut self, margin: Duration) -> Self {
        self.stop_margin = Some(margin);
        self
    }

    /// Lock-delay for the leader's term: a leader that fails (its lease runs out: crashed,
    /// hung, cut off) leaves the election without a leader for `delay` more, so its writes
    /// still on their way to a store that checks no terms land before the next leader starts;
    /// a leader that resigns or stops hands over at once. See
    /// [`LockRequest::lock_delay`](crate::LockRequest::lock_delay). Default zero.
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.lock_delay = delay;
        self
    }

    /// How often [`observe`](Election::observe) reads the store when nothing wakes it (default
    /// [`DEFAULT_OBSERVE_POLL`]). At least 1 ms.
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll = every.max(Duration::from_millis(1));
        self
    }

    /// The `lock` label of the leader's metrics (default `"election"`).
    pub fn label(mut self, label: impl Into<SharedString>) -> Self {
        self.label = label.into();
        self
    }

    /// The election's name (the mutex the candidates take).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lock request each campaign makes: the mutex `name`, waited for without a deadline.
    fn request(&self) -> LockRequest {
        let mut request = self
            .locker
            .lock(Arc::clone(&self.name))
            .wait_forever()
            .label(self.label.clone());
        if let Some(lease) = self.lease {
            request = request.lease(lease);
        }
        if let Some(margin) = self.stop_margin {
            request = request.stop_margin(margin);
        }
        if !self.lock_delay.is_zero() {
            request = request.lock_delay(self.lock_delay);
        }
        request
    }

    /// Refuses a backend whose fencing tokens cannot be terms, before any I/O.
    fn check(&self) -> Result<(), LockError> {
        check_name(&self.name)?;
        let lock = self.locker.backend_lock();
        match lock.capabilities().fencing {
            Fencing::Strict(_) | Fencing::AfterHolding => Ok(()),
            _ => Err(LockError::Unsupported {
                backend: lock.backend(),
                kind: "election",
            }),
        }
    }

    /// Waits until this candidate is elected and returns its [`Leadership`]. Candidates of one
    /// process queue first-in first-out; across processes the backend decides. Once granted,
    /// the leader's record (this candidate's [`value`](Election::value) and the time) is
    /// written beside the lock for observers, before this returns.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] (kind `"election"`) on a backend whose fencing tokens
    /// cannot be terms; [`LockError::InvalidInput`] for a bad name, lease or stop margin; a
    /// backend error that lasted longer than the locker's
    /// [`retry_errors_for`](crate::LockerBuilder::retry_errors_for), or that failed the
    /// record's write (the leadership is then given back).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped at any point, a leadership it got is given back in the background.
    pub async fn campaign(&self) -> Result<Leadership, LockError> {
        self.check()?;
        loop {
            let guard = self.request().acquire().await?;
            if let Some(leadership) = self.lead(guard).await? {
                return Ok(leadership);
            }
        }
    }

    /// Tries once to be elected: `Ok(None)` when another candidate leads.
    ///
    /// # Errors
    /// As [`campaign`](Election::campaign).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`campaign`](Election::campaign).
    pub async fn try_campaign(&self) -> Result<Option<Leadership>, LockError> {
        self.check()?;
        match self.request().try_acquire().await? {
            Some(guard) => self.lead(guard).await,
            None => Ok(None),
        }
    }

    /// Takes back a leadership kept across a restart ([`Leadership::leak`], the lease's text
    /// form), through [`Locker::adopt`]: where the backend hands over in one step, the term
    /// **changes** (a fresh fencing token), so the old process's writes still in flight are
    /// fenced off, and the same lease cannot be resumed twice. The record is written again.
    ///
    /// # Errors
    /// [`LockError::NotOwned`] when the store no longer holds the lease (another candidate may
    /// lead); otherwise as [`campaign`](Election::campaign).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Locker::adopt`].
    pub async fn resume(&self, lease: Lease) -> Result<Leadership, LockError> {
        self.check()?;
        if lease.name() != &*self.name {
            return Err(LockError::invalid(format!(
                "the lease is of {:?}, not of the election {:?}",
                lease.name(),
                self.name
            )));
        }
        let mut adopt = self.locker.adopt(lease).label(self.label.clone());
        if let Some(lease) = self.lease {
            adopt = adopt.lease(lease);
        }
        if let Some(margin) = self.stop_margin {
            adopt = adopt.stop_margin(margin);
        }
        if !self.lock_delay.is_zero() {
            adopt = adopt.lock_delay(self.lock_delay);
        }
        let guard = adopt.await?;
        let name = guard.name().to_owned();
        self.lead(guard).await?.ok_or(LockError::NotOwned { name })
    }

    /// Writes the leader's record beside a granted lock: the leadership, or `None` when the
    /// lease was lost already (the guard is dropped).
    async fn lead(&self, guard: Guard) -> Result<Option<Leadership>, LockError> {
        let since = SystemTime::now();
        let record = leader::record(since, &self.value);
        let lock = self.locker.backend_lock();
        match lock.as_ref().annotate(&guard.lease(), &record).await {
            Ok(true) | Err(LockError::Unsupported { .. }) => {
                Ok(Some(Leadership::new(guard, Arc::clone(&self.value), since)))
            }
            Ok(false) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The current leader as the store says: its term, value and since when it leads; `None`
    /// when nobody leads. One read (plus, for a leader granted so recently that its record is
    /// not written yet, up to a few short re-reads).
    ///
    /// # Errors
    /// [`LockError::Unsupported`] (kind `"holder"`) on a backend that cannot describe the
    /// holder; the backend's errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    pub async fn leader(&self) -> Result<Option<Leader>, LockError> {
        check_name(&self.name)?;
        leader::read(self.locker.backend_lock().as_ref(), &self.name).await
    }
}

impl fmt::Debug for Election {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Election")
            .field("backend", &self.locker.backend())
            .field("name", &self.name)
            .field("value", &String::from_utf8_lossy(&self.value))
            .field("lease", &self.lease)
            .field("stop_margin", &self.stop_margin)
            .field("lock_delay", &self.lock_delay)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}
