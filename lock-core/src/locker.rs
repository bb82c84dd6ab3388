//! The policy every backend shares: validation, bounded waiting, cleanup on cancellation.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::cleanup::ReleaseOnDrop;
use crate::{
    Attempt, Backoff, Guard, Lease, Lock, LockError, TimeoutPhase, Token, check_name, check_ttl,
};

/// The TTL of a lease when the request names none: 30 s.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// How long [`LockRequest::acquire`] waits for a held lock when the request names no wait: 10 s.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// Takes locks on one backend: validates input, waits a bounded time for held locks, and makes
/// sure no acquire leaves a lock behind when it is cancelled or fails half-way.
///
/// Cheap to clone (one `Arc`); share one per backend across the process.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lock_core::LockError> {
/// use std::time::Duration;
/// use lock_core::{Locker, MemoryLock};
///
/// let locker = Locker::new(MemoryLock::new());
/// let guard = locker
///     .lock("order:42")
///     .ttl(Duration::from_secs(10))
///     .wait(Duration::from_secs(2))
///     .acquire()
///     .await?;
/// // ... work, passing guard.fencing_token() to the resource ...
/// assert!(guard.release().await?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Locker {
    inner: Arc<Inner>,
}

struct Inner {
    lock: Arc<dyn Lock>,
    ttl: Duration,
    wait: Duration,
    backoff: Backoff,
}

impl Locker {
    /// A locker over `lock` with the defaults: [`DEFAULT_TTL`], [`DEFAULT_WAIT`],
    /// [`Backoff::default`].
    pub fn new<L: Lock + 'static>(lock: L) -> Self {
        Self::builder(lock).build()
    }

    /// A locker over a shared backend.
    pub fn from_arc(lock: Arc<dyn Lock>) -> Self {
        LockerBuilder::from_arc(lock).build()
    }

    /// Starts configuring a locker over `lock`.
    pub fn builder<L: Lock + 'static>(lock: L) -> LockerBuilder {
        LockerBuilder::from_arc(Arc::new(lock))
    }

    /// Starts a request for the lock `name`; nothing is sent until it is awaited.
    ///
    /// `locker.lock(name).await` is `locker.lock(name).acquire().await`.
    pub fn lock(&self, name: impl Into<Arc<str>>) -> LockRequest {
        LockRequest {
            locker: self.clone(),
            name: name.into(),
            ttl: self.inner.ttl,
            wait: self.inner.wait,
        }
    }

    /// The backend's label (`"redis"`, `"memory"`, ...).
    #[must_use]
    pub fn backend(&self) -> &'static str {
        self.inner.lock.backend()
    }

    /// The backend this locker drives.
    #[must_use]
    pub fn backend_lock(&self) -> &Arc<dyn Lock> {
        &self.inner.lock
    }

    /// Releases a lease obtained from [`Guard::leak`], if it is still ours.
    ///
    /// # Errors
    /// As [`Lock::release`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the lease is held or released.
    pub async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.inner.lock.release(lease).await
    }
}

impl fmt::Debug for Locker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locker")
            .field("backend", &self.backend())
            .field("ttl", &self.inner.ttl)
            .field("wait", &self.inner.wait)
            .field("backoff", &self.inner.backoff)
            .finish()
    }
}

/// Configures a [`Locker`]: the default TTL and wait of its requests, and the waiting backoff.
#[derive(Clone)]
#[must_use]
pub struct LockerBuilder {
    lock: Arc<dyn Lock>,
    ttl: Duration,
    wait: Duration,
    backoff: Backoff,
}

impl LockerBuilder {
    /// Starts configuring a locker over a shared backend.
    pub fn from_arc(lock: Arc<dyn Lock>) -> Self {
        Self {
            lock,
            ttl: DEFAULT_TTL,
            wait: DEFAULT_WAIT,
            backoff: Backoff::default(),
        }
    }

    /// The lease TTL of requests that name none (default [`DEFAULT_TTL`]). Checked when a
    /// request is made, like a per-request TTL.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long requests that name no wait wait for a held lock (default [`DEFAULT_WAIT`]).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The sleep between attempts while waiting (default [`Backoff::default`]).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The locker.
    pub fn build(self) -> Locker {
        Locker {
            inner: Arc::new(Inner {
                lock: self.lock,
                ttl: self.ttl,
                wait: self.wait,
                backoff: self.backoff,
            }),
        }
    }
}

impl fmt::Debug for LockerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockerBuilder")
            .field("backend", &self.lock.backend())
            .field("ttl", &self.ttl)
            .field("wait", &self.wait)
            .field("backoff", &self.backoff)
            .finish()
    }
}

/// A request for one lock, made by [`Locker::lock`]: set the TTL and the wait, then
/// [`acquire`](LockRequest::acquire) (or `.await` it) or [`try_acquire`](LockRequest::try_acquire).
#[must_use = "a lock request does nothing until it is awaited"]
#[derive(Debug)]
pub struct LockRequest {
    locker: Locker,
    name: Arc<str>,
    ttl: Duration,
    wait: Duration,
}

impl LockRequest {
    /// How long the lease lasts unless extended. Between [`MIN_TTL`](crate::MIN_TTL) (1 ms) and
    /// [`MAX_TTL`](crate::MAX_TTL); sub-millisecond parts are dropped.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long [`acquire`](LockRequest::acquire) waits for a held lock before giving up with
    /// [`LockError::Timeout`]. `Duration::ZERO` makes one attempt.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Tries once. `Ok(None)` when another holder has the lock.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for a bad name or TTL (nothing sent); the backend's errors
    /// ([`LockError::WrongType`], [`LockError::Timeout`], [`LockError::Backend`]).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped after the request was sent, whatever it may have acquired is released
    /// in the background.
    pub async fn try_acquire(self) -> Result<Option<Guard>, LockError> {
        self.check()?;
        Ok(match self.attempt().await? {
            Attempt::Acquired(lease) => {
                Some(Guard::new(Arc::clone(&self.locker.inner.lock), lease))
            }
            Attempt::Busy { .. } => None,
        })
    }

    /// Acquires the lock, waiting for it while another holder has it, until the wait runs out.
    ///
    /// Between attempts it sleeps per the locker's [`Backoff`] (exponential, full jitter), never
    /// longer than the holder's remaining TTL nor past the deadline, and tries once more at the
    /// deadline.
    ///
    /// # Errors
    /// [`LockError::Timeout`] with [`TimeoutPhase::Wait`] when the lock was still held at the
    /// deadline; [`LockError::InvalidInput`] for a bad name, TTL or wait (nothing sent).
    /// Backend errors that [`LockError::is_retryable`] (Redis restarting, a dropped connection)
    /// are retried until the deadline and the last one is returned if they outlast it; others
    /// ([`LockError::WrongType`], a wrong password) are returned at once.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped at any await point, whatever it may have acquired is released in the
    /// background.
    pub async fn acquire(self) -> Result<Guard, LockError> {
        self.check()?;
        let started = Instant::now();
        let deadline = started.checked_add(self.wait).ok_or_else(|| {
            LockError::invalid(format!("the wait {:?} overflows the clock", self.wait))
        })?;
        let mut attempts: u32 = 0;
        loop {
            attempts = attempts.saturating_add(1);
            // A transient backend failure (connection dropped, server restarting) is retried
            // like a busy lock, within the same wait; the caller sees it if it outlasts the wait.
            let (holder_ttl, failure) = match self.attempt().await {
                Ok(Attempt::Acquired(lease)) => {
                    return Ok(Guard::new(Arc::clone(&self.locker.inner.lock), lease));
                }
                Ok(Attempt::Busy { holder_ttl }) => (holder_ttl, None),
                Err(error) if error.is_retryable() => (None, Some(error)),
                Err(error) => return Err(error),
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(failure.unwrap_or(LockError::Timeout {
                    phase: TimeoutPhase::Wait,
                    elapsed: now - started,
                }));
            }
            let delay = self
                .locker
                .inner
                .backoff
                .delay(attempts, holder_ttl, deadline - now);
            tokio::time::sleep(delay).await;
        }
    }

    fn check(&self) -> Result<(), LockError> {
        check_name(&self.name)?;
        check_ttl(self.ttl)?;
        Ok(())
    }

    /// One attempt with a fresh token. Until the backend has answered, a release of that token
    /// is armed: if the attempt is cancelled or fails in a way that may have reached the
    /// backend, the token is released in the background, so nothing is left behind.
    async fn attempt(&self) -> Result<Attempt, LockError> {
        let lock = &self.locker.inner.lock;
        let token = Token::generate()?;
        let pending = ReleaseOnDrop::new(
            Arc::clone(lock),
            Lease::new(Arc::clone(&self.name), token, 0, Instant::now()),
        );
        let result = lock.try_acquire(&self.name, token, self.ttl).await;
        match &result {
            Err(error) if error.may_have_applied() => drop(pending),
            _ => pending.disarm(),
        }
        result
    }
}

impl IntoFuture for LockRequest {
    type Output = Result<Guard, LockError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    /// `request.await` is `request.acquire().await`.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.acquire())
    }
}
