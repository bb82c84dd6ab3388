//! Taking back a lease kept across a restart: [`Locker::adopt`].

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use metrics::SharedString;
use tokio::time::Instant;

use super::handle::Locker;
use super::options::Options;
use crate::backend::Handover;
use crate::metric::Via;
use crate::runtime::cleanup::ReleaseOnDrop;
use crate::{Guard, Kind, Lease, LockError, Token, check_name};

/// A request to turn a kept [`Lease`] back into a renewed [`Guard`], made by
/// [`Locker::adopt`]: choose the lease length, stop margin and label like a
/// [`LockRequest`](crate::LockRequest)'s, then `.await` it.
#[must_use = "an adopt request does nothing until it is awaited"]
pub struct AdoptRequest {
    locker: Locker,
    lease: Lease,
    options: Options,
}

impl Locker {
    /// Takes back a lease this or another process kept ([`Guard::leak`], its text form read
    /// with `Lease::from_str`) after a restart: a renewed [`Guard`] if the store still holds
    /// the name with the lease's token, [`LockError::NotOwned`] otherwise. etcd's
    /// `ResumeMutex`/`ResumeElection`.
    ///
    /// **What is guaranteed.** On a backend that passes a lock on in one step
    /// ([`Lock::hand_over`](crate::backend::Lock::hand_over): `MemoryLock`, `RedisLock`,
    /// `PostgresLock`) and for a mutex lease, adopting *rotates* the lease in one atomic step:
    /// the guard holds a fresh token and a fresh, larger fencing token, and the kept lease's
    /// token is void. So a lease is adopted **at most once**: a second adopt of the same text,
    /// and any late release or extend by the process that leaked it, answer not-owned, and a
    /// write of the old holder still in flight carries the old, smaller fencing token, which
    /// the resource rejects. On a backend without hand-over (Redlock, PostgreSQL's advisory
    /// mode) and for the other kinds, adopting extends the lease in place (same token, same
    /// fencing token): nothing tells two adopters apart there, so keep the text in one place.
    /// (An advisory lock dies with its session, so adopting one after a restart answers
    /// not-owned.)
    ///
    /// The request uses the locker's defaults (lease length, stop margin); set others on the
    /// returned [`AdoptRequest`].
    pub fn adopt(&self, lease: Lease) -> AdoptRequest {
        AdoptRequest {
            locker: self.clone(),
            lease,
            options: self.defaults(),
        }
    }
}

impl AdoptRequest {
    /// The length the adopted lease is extended to, and renewed to while the guard lives
    /// (default: the locker's); see [`LockRequest::lease`](crate::LockRequest::lease).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.options.set_lease(lease);
        self
    }

    /// How long before `valid_until` the adopted guard's work is told to stop; see
    /// [`LockRequest::stop_margin`](crate::LockRequest::stop_margin).
    pub fn stop_margin(mut self, margin: Duration) -> Self {
        self.options.set_stop_margin(margin);
        self
    }

    /// Keep the name for `delay` after the adopted lease ends by expiry; see
    /// [`LockRequest::lock_delay`](crate::LockRequest::lock_delay).
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.options.set_lock_delay(delay);
        self
    }

    /// The `lock` label of the guard's metrics; see
    /// [`LockRequest::label`](crate::LockRequest::label).
    pub fn label(mut self, label: impl Into<SharedString>) -> Self {
        self.options.set_label(label.into());
        self
    }

    /// Adopts the lease: one hand-over to a fresh token (or one extend; see [`Locker::adopt`]),
    /// then a guard renewed like any other, counted in `distlock_acquired_total{via="adopt"}`.
    ///
    /// # Errors
    /// [`LockError::NotOwned`] when the store no longer holds the name with the lease's token
    /// (it expired, was released, taken, or adopted already); [`LockError::InvalidInput`] for
    /// a bad name, lease length or stop margin (nothing sent); the backend's errors
    /// ([`LockError::Timeout`], [`LockError::Backend`]), after which the lease is as it was or
    /// moved to a token that is released in the background.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped after a hand-over was sent, the fresh token is released in the
    /// background (the kept lease may then be void: it was rotated).
    pub async fn adopt(self) -> Result<Guard, LockError> {
        let started = Instant::now();
        let name: Arc<str> = Arc::from(self.lease.name());
        check_name(&name)?;
        let ttl = self.options.check(&name)?;
        let locker = &self.locker;
        let lock = Arc::clone(locker.backend_lock());
        self.options.check_lock_delay(lock.as_ref())?;
        let labels = locker.labels(self.lease.kind(), self.options.label());
        let not_owned = || LockError::NotOwned {
            name: name.to_string(),
        };
        if self.lease.kind() == Kind::Mutex {
            let to = Token::generate()?;
            let pending = ReleaseOnDrop::new(
                Arc::clone(&lock),
                Lease::new(Arc::clone(&name), to, 0, Instant::now()),
            );
            let answer = lock.as_ref().hand_over(&self.lease, to, ttl).await;
            if !matches!(&answer, Err(error) if error.may_have_applied()) {
                pending.disarm();
            }
            match answer? {
                Handover::Handed(lease) => {
                    let via = Via::Adopt;
                    return Ok(locker.grant(&name, lease, &labels, started, via, &self.options));
                }
                Handover::NotOwned => return Err(not_owned()),
                _ => {}
            }
        }
        match lock.as_ref().extend(&self.lease, ttl).await? {
            Some(valid_until) => {
                let lease = Lease::new(
                    Arc::clone(&name),
                    *self.lease.token(),
                    self.lease.fencing_token(),
                    valid_until,
                )
                .with_kind(self.lease.kind());
                Ok(locker.grant(&name, lease, &labels, started, Via::Adopt, &self.options))
            }
            None => Err(not_owned()),
        }
    }
}

impl IntoFuture for AdoptRequest {
    type Output = Result<Guard, LockError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    /// `request.await` is `request.adopt().await`.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.adopt())
    }
}

impl fmt::Debug for AdoptRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("AdoptRequest");
        out.field("locker", &self.locker)
            .field("name", &self.lease.name())
            .field("kind", &self.lease.kind())
            .field("fencing_token", &self.lease.fencing_token());
        self.options.debug_fields(&mut out);
        out.finish()
    }
}
