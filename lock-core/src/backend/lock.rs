//! The backend trait: the few primitive, non-waiting operations a lock store offers.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::backend::Capabilities;
use crate::backend::Holder;
use crate::backend::Inspect;
use crate::backend::ReleaseWatch;
use crate::backend::{LossWatch, OnLoss};
use crate::{Kind, Lease, LockError, Token};

/// The answer to one acquire attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The lock was free and is now ours.
    Acquired(Lease),
    /// Another holder has it.
    Busy {
        /// The holder's remaining TTL as the backend saw it; `None` when the key never expires
        /// (a foreign key) or the backend cannot tell.
        holder_ttl: Option<Duration>,
        /// Whether the holder will announce its release on [`Lock::watch`]: `true` for a
        /// holder written by distlock with announcements on, `false` for one written by
        /// another client on the same name (redis-py, node-redlock, redsync never announce).
        /// The [`Locker`](crate::Locker) sleeps until the announcement (or the holder's TTL)
        /// only when it is `true`, and polls with its backoff otherwise, so a foreign holder's
        /// release is noticed within the backoff's ceiling, not at its TTL.
        announces: bool,
    },
}

/// The answer to one attempt at several locks at once ([`Lock::try_acquire_all`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiAttempt {
    /// Every name was free and is now ours: one lease per name, in the order asked.
    Acquired(Vec<Lease>),
    /// The name at `index` (of the names asked) is held by another holder; none of the names
    /// was taken (or all that were have been given back).
    Busy {
        /// Which of the names asked is held.
        index: usize,
        /// That holder's remaining TTL, as [`Attempt::Busy`] says.
        holder_ttl: Option<Duration>,
        /// Whether that holder announces its release, as [`Attempt::Busy`] says.
        announces: bool,
    },
}

/// Acquires `names` one after the other with `token`, all or nothing: at the first busy name,
/// every lease taken so far is released, and the answer says which name was busy. The
/// default of [`Lock::try_acquire_all`], for backends that cannot take several keys in one
/// atomic step (and for a Redis Cluster whose names span slots).
///
/// Called with the names in one global order (the [`Locker`](crate::Locker) sorts them), two
/// requests over overlapping sets never hold each other's names while waiting: a busy name
/// sends each back to nothing, so there is no deadlock.
///
/// # Errors
/// The first error of an attempt or of giving back a lease; then some leases may still be
/// held, and the caller releases every name's `token` (the `Locker` does, in the background).
///
/// # Cancel safety
/// Not cancel safe, like [`Lock::try_acquire`]: the caller releases `token` on every name.
pub async fn acquire_in_order<L: Lock + ?Sized>(
    lock: &L,
    names: &[Arc<str>],
    token: Token,
    ttl: Duration,
) -> Result<MultiAttempt, LockError> {
    let mut taken = Vec::with_capacity(names.len());
    for (index, name) in names.iter().enumerate() {
        let answer = lock.try_acquire(name, token, ttl).await;
        if let Ok(Attempt::Acquired(lease)) = answer {
            taken.push(lease);
            continue;
        }
        for lease in &taken {
            lock.release(lease).await?;
        }
        return match answer? {
            Attempt::Busy {
                holder_ttl,
                announces,
            } => Ok(MultiAttempt::Busy {
                index,
                holder_ttl,
                announces,
            }),
            Attempt::Acquired(_) => unreachable!("handled above"),
        };
    }
    Ok(MultiAttempt::Acquired(taken))
}

/// The answer to [`Lock::hand_over`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Handover {
    /// The lease was still ours: the lock now belongs to the new token, with a fresh TTL and
    /// a fresh fencing token, as if it had been released and acquired in one atomic step.
    Handed(Lease),
    /// The lease was no longer ours (it expired, maybe re-taken): nothing was changed.
    NotOwned,
    /// This backend cannot pass a lock on in one step: release, then acquire.
    Unsupported,
}

/// A lock backend: try once to acquire, extend, release. No waiting and no policy: the
/// [`Locker`](crate::Locker) adds bounded waiting, cleanup on cancellation and validation on
/// top of any `Lock`, so a new backend implements only these.
///
/// Every implementation keeps the safety rules of the design guide: acquire is one atomic step
/// that sets the lock only if absent, always with an expiry, and returns the fencing token in
/// the same step; extend and release act only if the stored token is the lease's.
///
/// Object safe (through `async_trait`); implemented for `Arc<T>`, `Box<T>` and `&T`.
#[async_trait]
pub trait Lock: Send + Sync {
    /// A short, constant label for logs and metrics: `"redis"`, `"memory"`, `"redlock"`.
    fn backend(&self) -> &'static str;

    /// Tries once to acquire `name` for `ttl`, storing `token` as proof of ownership.
    ///
    /// The caller has validated `name` and `ttl` (see [`check_name`](crate::check_name) and
    /// [`check_ttl`](crate::check_ttl)). On success the lease's `valid_until` is measured from
    /// the moment before the request was sent.
    ///
    /// # Errors
    /// [`LockError::WrongType`] when the key holds something that is not a lock,
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the backend is down, slow or failing.
    /// After a timeout the request may still have been applied: the caller releases `token`.
    ///
    /// # Cancel safety
    /// Not cancel safe on its own: dropped after the request was sent, the lock may have been
    /// taken with `token`. The `Locker` handles that by releasing `token` in the background.
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError>;

    /// Tries once to acquire `name` as `kind` for `ttl`: the one entry point of every lock
    /// kind, written once here. It checks the name and the TTL ([`check_name`](crate::check_name),
    /// [`check_ttl`](crate::check_ttl)) and calls the kind's method: [`Lock::try_acquire`] for
    /// [`Kind::Mutex`], [`Lock::try_acquire_read`], [`Lock::try_acquire_write`],
    /// [`Lock::try_acquire_semaphore`], [`Lock::try_acquire_fair`]. A backend implements the
    /// kinds it offers and inherits [`LockError::Unsupported`] (before any I/O) for the others;
    /// it does not override this method (a wrapper that forwards every call may). The lease
    /// granted carries `kind` ([`Lease::with_kind`]), so [`Lock::extend`] and
    /// [`Lock::release`] know what it holds.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for an empty or over-long name or a TTL out of range (nothing
    /// sent); as the kind's method.
    ///
    /// # Cancel safety
    /// As [`Lock::try_acquire`]: the caller releases `token` (as a lease of `kind`) when the
    /// answer is lost.
    async fn try_acquire_kind(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        crate::check_name(name)?;
        crate::check_ttl(ttl)?;
        match kind {
            Kind::Mutex => self.try_acquire(name, token, ttl).await,
            Kind::Read { writer_preference } => {
                self.try_acquire_read(name, writer_preference, token, ttl)
                    .await
            }
            Kind::Write { writer_preference } => {
                self.try_acquire_write(name, writer_preference, token, ttl)
                    .await
            }
            Kind::Semaphore { permits, max } => {
                self.try_acquire_semaphore(name, permits, max, token, ttl)
                    .await
            }
            Kind::Fair { queued } => self.try_acquire_fair(name, queued, token, ttl).await,
        }
    }

    /// Tries once to take a read share of `name` for `ttl` ([`Kind::Read`]): granted while no
    /// writer holds the name (and, with `writer_preference`, no writer waits); each reader has
    /// its own token and expiry; the lease's fencing token is the last write's. Called by
    /// [`Lock::try_acquire_kind`], which has checked the name and the TTL. The default answers
    /// [`LockError::Unsupported`] before any I/O.
    ///
    /// # Errors
    /// As [`Lock::try_acquire`]; [`LockError::Unsupported`] from a backend without it.
    ///
    /// # Cancel safety
    /// As [`Lock::try_acquire`].
    async fn try_acquire_read(
        &self,
        name: &str,
        writer_preference: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let _ = (name, writer_preference, token, ttl);
        unsupported(self.backend(), "read")
    }

    /// Tries once to take the write lock of `name` for `ttl` ([`Kind::Write`]): granted while
    /// no writer and no reader holds the name; a fencing token like a mutex. Busy with
    /// `writer_preference`: record that `token` waits (until `ttl` from now, or until `token`
    /// is released), so later readers are refused. Called by [`Lock::try_acquire_kind`]; the
    /// default answers [`LockError::Unsupported`] before any I/O.
    ///
    /// # Errors
    /// As [`Lock::try_acquire`]; [`LockError::Unsupported`] from a backend without it.
    ///
    /// # Cancel safety
    /// As [`Lock::try_acquire`]; a waiting record left by a dropped attempt goes with the
    /// release of `token`.
    async fn try_acquire_write(
        &self,
        name: &str,
        writer_preference: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let _ = (name, writer_preference, token, ttl);
        unsupported(self.backend(), "write")
    }

    /// Tries once to take `permits` of the semaphore `name` of `max` for `ttl`
    /// ([`Kind::Semaphore`]): granted when `permits` are free, all at once or none. Called by
    /// [`Lock::try_acquire_kind`]; the default answers [`LockError::Unsupported`] before any
    /// I/O.
    ///
    /// # Errors
    /// As [`Lock::try_acquire`]; [`LockError::PermitsMismatch`] when holders of the name use
    /// another `max`; [`LockError::Unsupported`] from a backend without it.
    ///
    /// # Cancel safety
    /// As [`Lock::try_acquire`].
    async fn try_acquire_semaphore(
        &self,
        name: &str,
        permits: u32,
        max: u32,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let _ = (name, permits, max, token, ttl);
        unsupported(self.backend(), "semaphore")
    }

    /// Tries once to take the fair lock `name` for `ttl` ([`Kind::Fair`]): the mutex of `name`,
    /// granted only to the head of the name's queue of fair waiters (or, with `queued:
    /// false`, only when the queue is empty). Busy with `queued`: put `token` in the queue
    /// (keeping its place if it is there already), its entry lasting
    /// [`fair_entry_ttl`](crate::fair_entry_ttl)`(ttl)` from now; releasing `token` removes it.
    /// Entries that lapsed are dropped before the head is chosen. Called by
    /// [`Lock::try_acquire_kind`]; the default answers [`LockError::Unsupported`] before any
    /// I/O.
    ///
    /// # Errors
    /// As [`Lock::try_acquire`]; [`LockError::Unsupported`] from a backend without it.
    ///
    /// # Cancel safety
    /// As [`Lock::try_acquire`]; a queue entry left by a dropped attempt goes with the release
    /// of `token`.
    async fn try_acquire_fair(
        &self,
        name: &str,
        queued: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let _ = (name, queued, token, ttl);
        unsupported(self.backend(), "fair")
    }

    /// How many permits of the semaphore `name` are held now (expired holders not counted).
    ///
    /// # Errors
    /// [`LockError::Unsupported`] from a backend without semaphores (the default);
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the backend fails.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing (a backend may prune expired permits).
    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        let _ = name;
        unsupported(self.backend(), "semaphore")
    }

    /// As [`Lock::try_acquire`], for a grant the [`Locker`](crate::Locker) will renew until its
    /// guard ends (a request without a fixed TTL). A backend whose leases cost a request each
    /// may put such grants on one lease it shares and keeps alive for all of them (etcd); a
    /// grant of a fixed TTL must expire on its own, so it comes through
    /// [`Lock::try_acquire`]. The default is [`Lock::try_acquire`].
    ///
    /// # Errors
    /// As [`Lock::try_acquire`].
    ///
    /// # Cancel safety
    /// As [`Lock::try_acquire`].
    async fn try_acquire_renewed(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.try_acquire(name, token, ttl).await
    }

    /// Tries once to acquire every one of `names` (distinct mutexes, in the order given) for
    /// `ttl` with the same `token`, all or nothing. The default takes them one after the other
    /// and gives back what it took at the first busy name ([`acquire_in_order`]); a backend
    /// that can set several keys in one atomic step (Redis, when the keys share a server or a
    /// cluster slot) overrides it. Each lease carries its own fencing token.
    ///
    /// # Errors
    /// As [`Lock::try_acquire`]; after an error some names may be held: the caller releases
    /// `token` on every name.
    ///
    /// # Cancel safety
    /// Not cancel safe, like [`Lock::try_acquire`]: the `Locker` releases `token` on every name
    /// in the background when the attempt is dropped.
    async fn try_acquire_all(
        &self,
        names: &[Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<MultiAttempt, LockError> {
        acquire_in_order(self, names, token, ttl).await
    }

    /// Extends `lease` so it expires `ttl` from now, if it is still ours.
    ///
    /// Returns the new local validity (`Some(valid_until)`), or `None` when the stored token is
    /// no longer the lease's (it expired, maybe re-taken): then nothing was changed.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the backend is down, slow or failing.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it leaves the lease as it was or extended.
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError>;

    /// Releases `lease` if it is still ours. Returns `true` if it was ours and is now released,
    /// `false` if it was no longer ours (the key is left to its current holder).
    ///
    /// For a [`Kind::Write`] lease that was never granted (its attempt was busy), it also
    /// withdraws the waiting writer's record: the [`Locker`](crate::Locker) releases the token
    /// of a write request that gives up, so readers are not held back by a writer gone.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the backend is down, slow or failing;
    /// the lock then expires at the end of its TTL.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it leaves the lease held or released.
    async fn release(&self, lease: &Lease) -> Result<bool, LockError>;

    /// Passes the lock of `lease` on to `to` for `ttl`, if `lease` is still ours: in one atomic
    /// step the stored token becomes `to`, the expiry `ttl` from now, and a new fencing token
    /// is issued (greater than the lease's), so no other contender can slip in between. The
    /// [`Locker`](crate::Locker) uses it when a guard is released while another task of the same
    /// process waits for the name: one round trip instead of a release, an announcement and an
    /// acquire.
    ///
    /// The new lease's `valid_until` is measured from the moment before the request was sent.
    /// The default answers [`Handover::Unsupported`] and changes nothing. The `Locker` calls it
    /// for [`Kind::Mutex`] leases only.
    ///
    /// # Errors
    /// As [`Lock::try_acquire`]. After a timeout the request may still have been applied: the
    /// caller releases `to` (and `lease`).
    ///
    /// # Cancel safety
    /// Not cancel safe on its own, like [`Lock::try_acquire`]: dropped after the request was
    /// sent, the lock may belong to `to`. The `Locker` releases `to` in the background then.
    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        let _ = (lease, to, ttl);
        Ok(Handover::Unsupported)
    }

    /// Extends several leases, answering for each as [`Lock::extend`] does, in the same order.
    /// The [`Locker`](crate::Locker)'s renewal sends all leases due at one moment through this.
    ///
    /// The default sends the extends concurrently; a backend that multiplexes requests over one
    /// connection (as `RedisLock` does) thereby writes them back to back in one round trip. A
    /// backend may override it with a real batch (one pipeline).
    ///
    /// # Cancel safety
    /// Cancel safe: each lease is left unchanged or extended.
    async fn extend_many(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Vec<Result<Option<Instant>, LockError>> {
        futures::future::join_all(leases.iter().map(|(lease, ttl)| self.extend(lease, *ttl))).await
    }

    /// Subscribes to the releases of `name` by any holder in any process, if the backend can
    /// announce them (Redis pub/sub); `Ok(None)` if it cannot, and then waiters poll with
    /// backoff. When this returns `Some`, the subscription is in force: every release after
    /// this point bumps the watch's signal (a lost message only costs latency: waiters also
    /// retry when the holder's TTL runs out).
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when subscribing fails; the
    /// [`Locker`](crate::Locker) then falls back to polling.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, no subscription is left behind for long (it is ended when its last
    /// watch is dropped, or was never made).
    async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        let _ = name;
        Ok(None)
    }

    /// Watches the key of the held `lease` and calls `on_loss` as soon as the backend sees it
    /// deleted or holding another token (an operator's forced release, an eviction, a restart
    /// that lost it), not only at the next renewal. The backend must not call it for the
    /// lease's own renewals. `None` (the default) when the backend cannot watch keys, or not
    /// this lease's: the loss is then seen at the next renewal, as before. The
    /// [`Locker`](crate::Locker) calls it once per hold that is still running when its
    /// watchdog takes the lease in — at once for the first hold of an idle `Locker`, within
    /// about a second of the grant otherwise — and keeps the watch until the guard ends. So
    /// the bulk of short holds never cost a watch (issue 51: ~1,000 client instructions a
    /// cycle; `scripts/client-cost.sh`).
    ///
    /// It must be cheap and must not wait on I/O: it runs on the watchdog's task, beside every
    /// renewal. A backend registers the lease and does any I/O in the background (and may start
    /// watching only once the lease has been held a while longer).
    fn watch_loss(&self, lease: &Lease, on_loss: OnLoss) -> Option<LossWatch> {
        let _ = (lease, on_loss);
        None
    }

    /// Subscribes to the turn of the fair waiter `token` in the queue of `name`: the backend
    /// bumps the watch's signal when the lock may be free for that waiter (it is at the head
    /// of the queue and the holder released), and need not tell the other waiters (no herd).
    /// The default subscribes to every release of `name` ([`Lock::watch`]), which is correct
    /// and only wakes more waiters than needed.
    ///
    /// # Errors
    /// As [`Lock::watch`].
    ///
    /// # Cancel safety
    /// As [`Lock::watch`].
    async fn watch_turn(
        &self,
        name: &str,
        token: &Token,
    ) -> Result<Option<ReleaseWatch>, LockError> {
        let _ = token;
        self.watch(name).await
    }

    /// Who holds the mutex `name` now, as the store says in one atomic read: the fencing token
    /// of the holder's grant, its remaining TTL, and the note written beside it
    /// ([`Lock::annotate`]); `None` when nobody holds it. What leader election's observers
    /// read (`Election::leader`, `Election::observe`): a backend that offers it declares
    /// [`Capabilities::holders`]. The default answers [`LockError::Unsupported`] (kind
    /// `"holder"`) before any I/O.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] from a backend that cannot tell;
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the backend fails.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    async fn describe_holder(&self, name: &str) -> Result<Option<Holder>, LockError> {
        let _ = name;
        unsupported(self.backend(), "holder")
    }

    /// Writes `note` beside the mutex `lease`, if it is still ours, replacing any note of this
    /// grant: [`Lock::describe_holder`] returns it until the grant ends (release, expiry,
    /// hand-over), and never with a later grant. The lock's own key layout does not change
    /// (the note sits beside it). `Ok(false)` when the lease is no longer ours (nothing
    /// written). Leader election writes the leader's value here. The default answers
    /// [`LockError::Unsupported`] (kind `"holder"`) before any I/O.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] from a backend without holder notes;
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the backend fails.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the note is written or not.
    async fn annotate(&self, lease: &Lease, note: &[u8]) -> Result<bool, LockError> {
        let _ = (lease, note);
        unsupported(self.backend(), "holder")
    }

    /// Checks that the backend answers: connects if it must and makes one round trip
    /// (Redis: `PING`). For start-up checks ([`Locker::ping`](crate::Locker::ping)); lock
    /// operations never need it. The default answers `Ok(())` at once (an in-process backend
    /// is always there).
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the backend is unreachable, slow,
    /// or refuses the client (wrong password).
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    async fn ping(&self) -> Result<(), LockError> {
        Ok(())
    }

    /// The store's operator reads ([`Inspect`]: list, inspect, release by token), `None` from
    /// a backend without them. Tools reach every store's through this one method.
    fn inspector(&self) -> Option<&dyn Inspect> {
        None
    }

    /// What this backend offers: its capability table (kinds, multi-lock, fencing,
    /// announcements), declared in one place next to the methods that keep it. The default is
    /// [`Capabilities::MUTEX`], what the provided methods give; a backend that overrides them
    /// declares more, and one that keeps less than the full contract (fencing) says so here,
    /// with the reason in its docs. The [`Locker`](crate::Locker) does not consult it.
    fn capabilities(&self) -> Capabilities {
        Capabilities::MUTEX
    }
}

/// The answer of a backend to a kind (or an operation of one) it does not offer: refused
/// before any I/O, naming the backend and the kind.
fn unsupported<T>(backend: &'static str, kind: &'static str) -> Result<T, LockError> {
    Err(LockError::Unsupported { backend, kind })
}
