//! The capability table: what one backend declares it offers, in one place.
//!
//! The [`Locker`](crate::Locker) reads it for one thing only, a request's lock-delay
//! (written once in the Locker, over any backend that keeps its leases for their TTL); for the
//! kinds, a backend answers [`LockError::Unsupported`](crate::LockError::Unsupported) before
//! any I/O for a kind it lacks, whatever it declares. The table is for the ones who must know beforehand: the
//! conformance suite (lock-testkit) generates its checks from it, a Redlock derives its own
//! table from its nodes', and a user can ask a backend what its fencing tokens are worth.

use crate::kind::Kind;

/// What one backend offers, as [`Lock::capabilities`](crate::backend::Lock::capabilities)
/// declares it: the lock kinds, how the multi-lock takes its names, what the fencing tokens
/// promise, and whether releases are announced.
///
/// [`Kind::Mutex`] and the multi-lock are always offered (every [`Lock`](crate::backend::Lock)
/// implements them, the multi-lock at least one name after the other). `#[non_exhaustive]`:
/// build one from [`Capabilities::MUTEX`] (what a backend that overrides nothing offers) with
/// the `with_*` methods, so a capability added later starts at its default.
///
/// ```
/// use lock_core::backend::{Capabilities, Fencing, TokenScale};
/// use lock_core::Kind;
///
/// const MINE: Capabilities = Capabilities::MUTEX
///     .with_fair()
///     .with_fencing(Fencing::Strict(TokenScale::Clock))
///     .with_announcements(true);
/// assert!(MINE.offers(Kind::Fair { queued: true }));
/// assert!(!MINE.offers(Kind::Semaphore { permits: 1, max: 2 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// The read-write lock: [`Kind::Read`] and [`Kind::Write`].
    pub read_write: bool,
    /// The counting semaphore: [`Kind::Semaphore`] and
    /// [`Lock::permits_in_use`](crate::backend::Lock::permits_in_use).
    pub semaphore: bool,
    /// The fair lock: [`Kind::Fair`].
    pub fair: bool,
    /// How [`Lock::try_acquire_all`](crate::backend::Lock::try_acquire_all) takes its names.
    pub multi: MultiLock,
    /// What the fencing tokens of successive grants of one name promise.
    pub fencing: Fencing,
    /// Whether [`Lock::watch`](crate::backend::Lock::watch) answers `Some`: a release in one
    /// process wakes the waiters of another at once, instead of at their next poll.
    pub announces_releases: bool,
    /// Whether [`Lock::describe_holder`](crate::backend::Lock::describe_holder) and
    /// [`Lock::annotate`](crate::backend::Lock::annotate) work: observers of a leader
    /// election read the leader's term and value from the store.
    pub holders: bool,
    /// Whether the backend's crate ships a fence for the store it locks on: a guarded write
    /// taking a [`Fence`](crate::Fence) that applies iff its token is ≥ the largest the
    /// resource accepted, raising that record in the same atomic step, and answers
    /// [`LockError::Fenced`](crate::LockError::Fenced) otherwise (PostgreSQL's and MySQL's
    /// `distlock_fence`, Redis's `distlock_fenced_set`, etcd's `guarded_commit`, an object
    /// store's `fenced_put`). `false` where the backend issues no tokens to fence with
    /// (advisory locks) or has no one store to fence in (a Redlock's quorum, `MemoryLock`).
    pub guarded_writes: bool,
    /// Whether a lease stays in the store for the whole TTL it was granted or extended for,
    /// ended before only by its release (or a hand-over): what a request's
    /// [`lock_delay`](crate::LockRequest::lock_delay) rests on. `false` where a lock ends
    /// with its holder's connection (PostgreSQL's and MySQL's advisory locks); the
    /// [`Locker`](crate::Locker) then refuses a lock-delay with
    /// [`LockError::Unsupported`](crate::LockError::Unsupported) before any I/O.
    pub lock_delay: bool,
    /// Whether [`Lock::describe_holder`](crate::backend::Lock::describe_holder) tells the
    /// holder's fencing token by itself, without a note written beside the grant (a Redlock
    /// knows it only from the note: its nodes issue tokens of their own). With `holders` and
    /// ordered fencing, what [`Locker::revoke`](crate::Locker::revoke) needs to name the grant
    /// it asks: [`Capabilities::offers_revocation`].
    pub holder_tokens: bool,
}

/// How a backend's multi-lock takes its names: all in one atomic step, or one after the other.
///
/// Both are all or nothing for the caller, and neither deadlocks (the
/// [`Locker`](crate::Locker) sorts the names); they differ in what another client may see
/// meanwhile: with [`MultiLock::InOrder`] a request may hold some of its names for one round
/// trip before it gives them back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MultiLock {
    /// Every name in one atomic server step (a Redis script over keys on one server).
    Atomic,
    /// One name after the other, giving back what was taken at the first busy name
    /// ([`acquire_in_order`](crate::backend::acquire_in_order), the trait's default).
    InOrder,
}

/// What a backend's fencing tokens promise about successive grants of one name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fencing {
    /// Every grant of a name carries a larger token than every earlier grant of it, through
    /// release, expiry and hand-over: one store numbers the grants. The full contract (the
    /// design guide's first safety rule).
    Strict(TokenScale),
    /// A grant's token is larger than an earlier grant's whenever no store's tokens run
    /// ahead of another store's clock by more than the earlier holder held the lock: a
    /// Redlock over stores whose tokens share the wall clock's scale ([`TokenScale::Clock`]).
    /// Its token is the largest the nodes granted, and two quorums share a node
    /// (lock-redlock's README, "Fencing tokens").
    AfterHolding,
    /// Every grant carries a token (non-zero), in no order a store could check: a Redlock
    /// over stores whose tokens are plain counters, one of which may run ahead of the others
    /// (lock-redlock's README, "Fencing tokens").
    Unordered,
    /// No fencing tokens: every grant carries 0 (a store that keeps no counter beside the
    /// lock, or fencing turned off by the user).
    None,
}

/// What a strictly increasing fencing token counts, which decides whether tokens of several
/// stores can be compared (a Redlock takes the largest of its nodes').
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenScale {
    /// Microseconds of the store's wall clock, or the last token plus one when that is larger
    /// (`RedisLock`, `PostgresLock`): stores whose clocks agree issue comparable tokens.
    Clock,
    /// A counter of the store's own, starting at 1 (`MemoryLock`): tokens of two stores are
    /// not comparable.
    Counter,
}

impl Capabilities {
    /// What a backend that overrides none of the trait's provided methods offers: the mutex,
    /// the multi-lock one name after the other, strictly increasing fencing tokens (the
    /// trait's contract) on a scale of its own, no announcements.
    pub const MUTEX: Self = Self {
        read_write: false,
        semaphore: false,
        fair: false,
        multi: MultiLock::InOrder,
        fencing: Fencing::Strict(TokenScale::Counter),
        announces_releases: false,
        holders: false,
        guarded_writes: false,
        lock_delay: true,
        holder_tokens: true,
    };

    /// These capabilities with the read-write lock.
    #[must_use]
    pub const fn with_read_write(self) -> Self {
        Self {
            read_write: true,
            ..self
        }
    }

    /// These capabilities with the counting semaphore.
    #[must_use]
    pub const fn with_semaphore(self) -> Self {
        Self {
            semaphore: true,
            ..self
        }
    }

    /// These capabilities with the fair lock.
    #[must_use]
    pub const fn with_fair(self) -> Self {
        Self { fair: true, ..self }
    }

    /// These capabilities with the multi-lock taken as `multi` says.
    #[must_use]
    pub const fn with_multi(self, multi: MultiLock) -> Self {
        Self { multi, ..self }
    }

    /// These capabilities with fencing tokens that promise what `fencing` says.
    #[must_use]
    pub const fn with_fencing(self, fencing: Fencing) -> Self {
        Self { fencing, ..self }
    }

    /// These capabilities with releases announced (`true`) or not.
    #[must_use]
    pub const fn with_announcements(self, announces_releases: bool) -> Self {
        Self {
            announces_releases,
            ..self
        }
    }

    /// These capabilities with holder descriptions and notes (`true`) or not.
    #[must_use]
    pub const fn with_holders(self, holders: bool) -> Self {
        Self { holders, ..self }
    }

    /// These capabilities with a fence for guarded writes (`true`) or not.
    #[must_use]
    pub const fn with_guarded_writes(self, guarded_writes: bool) -> Self {
        Self {
            guarded_writes,
            ..self
        }
    }

    /// These capabilities with leases kept for their whole TTL (`true`, a lock-delay holds)
    /// or ended with the holder's connection (`false`).
    #[must_use]
    pub const fn with_lock_delay(self, lock_delay: bool) -> Self {
        Self { lock_delay, ..self }
    }

    /// These capabilities with the holder's fencing token told by `describe_holder` without a
    /// note (`true`) or only through one.
    #[must_use]
    pub const fn with_holder_tokens(self, holder_tokens: bool) -> Self {
        Self {
            holder_tokens,
            ..self
        }
    }

    /// Whether [`Locker::revoke`](crate::Locker::revoke) and revocable requests work: the
    /// backend describes its holders, with their fencing token, and its tokens are ordered
    /// (strict, or after holding), so that a request names one grant.
    #[must_use]
    pub const fn offers_revocation(&self) -> bool {
        self.holders
            && self.holder_tokens
            && matches!(self.fencing, Fencing::Strict(_) | Fencing::AfterHolding)
    }

    /// Whether the backend grants leases of `kind` (of any parameters).
    #[must_use]
    pub const fn offers(&self, kind: Kind) -> bool {
        match kind {
            Kind::Mutex => true,
            Kind::Read { .. } | Kind::Write { .. } => self.read_write,
            Kind::Semaphore { .. } => self.semaphore,
            Kind::Fair { .. } => self.fair,
        }
    }
}

impl Default for Capabilities {
    /// [`Capabilities::MUTEX`].
    fn default() -> Self {
        Self::MUTEX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_mutex_alone() {
        let caps = Capabilities::default();
        assert!(caps.offers(Kind::Mutex));
        for kind in [
            Kind::Read {
                writer_preference: true,
            },
            Kind::Write {
                writer_preference: false,
            },
            Kind::Semaphore { permits: 1, max: 1 },
            Kind::Fair { queued: true },
        ] {
            assert!(!caps.offers(kind), "{kind}");
        }
        assert_eq!(caps.multi, MultiLock::InOrder);
        assert!(!caps.announces_releases);
        assert!(!caps.guarded_writes);
    }

    #[test]
    fn each_with_adds_one_thing() {
        let caps = Capabilities::MUTEX.with_read_write().with_semaphore();
        assert!(caps.read_write && caps.semaphore && !caps.fair);
        let caps = caps
            .with_fair()
            .with_multi(MultiLock::Atomic)
            .with_fencing(Fencing::None)
            .with_announcements(true)
            .with_guarded_writes(true);
        assert!(caps.offers(Kind::Fair { queued: false }));
        assert!(caps.guarded_writes);
        assert_eq!(caps.multi, MultiLock::Atomic);
        assert_eq!(caps.fencing, Fencing::None);
        assert!(caps.announces_releases);
    }
}
