//! A granted lock.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::{Kind, Token};

/// A granted lock: the name, the token that proves ownership, the fencing token, and how long
/// it is safe to use.
///
/// `valid_until` is a local monotonic instant ([`tokio::time::Instant`], so it follows tokio's
/// paused clock in tests): the moment the attempt *started* plus the granted TTL, less any
/// clock-drift allowance the backend makes. Work that must not outlive the lease checks
/// [`Lease::remaining`] before each step and passes [`Lease::fencing_token`] to the resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    name: Arc<str>,
    token: Token,
    fencing_token: u64,
    valid_until: Instant,
    kind: Kind,
}

impl Lease {
    /// A lease of a [`Kind::Mutex`] as a backend grants it; see [`Lease::with_kind`] for the
    /// other kinds.
    pub fn new(
        name: impl Into<Arc<str>>,
        token: Token,
        fencing_token: u64,
        valid_until: Instant,
    ) -> Self {
        Self {
            name: name.into(),
            token,
            fencing_token,
            valid_until,
            kind: Kind::Mutex,
        }
    }

    /// The same lease, of `kind` (a backend granting a read share or permits says so here).
    #[must_use]
    pub fn with_kind(mut self, kind: Kind) -> Self {
        self.kind = kind;
        self
    }

    /// What this lease holds: the exclusive lock, a read share, the write lock, or permits.
    #[must_use]
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The lock name, as the caller gave it (without any backend key prefix).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name as the shared string the lease holds (no copy).
    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    /// The ownership token of this acquisition.
    #[must_use]
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// The fencing token: strictly greater than that of every earlier grant of this name (see
    /// the backend's docs for what that survives). For a [`Kind::Read`] lease it is the token
    /// of the last write granted before the read (readers hand it to a store that checks "no
    /// write newer than what I read"), 0 when the name was never written. A semaphore's permits
    /// carry 0: permits are shared, there is no single holder to fence. Hand it to the protected resource, which
    /// refuses a write carrying a token smaller than the largest it accepted and accepts an equal
    /// one ([`Fence`](crate::Fence); Kleppmann, "How to do distributed locking", 2016).
    ///
    /// 0 when the backend was told to issue none (`RedisLockBuilder::fencing(false)` in
    /// lock-redis); every backend that fences issues tokens from 1 up.
    #[must_use]
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// The local monotonic instant after which the lease must be assumed gone.
    #[must_use]
    pub fn valid_until(&self) -> Instant {
        self.valid_until
    }

    /// Time left until [`Lease::valid_until`], zero once it has passed.
    #[must_use]
    pub fn remaining(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }

    /// Whether [`Lease::valid_until`] has passed.
    #[must_use]
    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.valid_until
    }
}

/// `started + ttl`, saturating at a far-future instant instead of overflowing: the validity of a
/// lease whose attempt began at `started`.
#[must_use]
pub fn valid_until(started: Instant, ttl: Duration) -> Instant {
    started
        .checked_add(ttl)
        .unwrap_or_else(|| started + Duration::from_secs(86_400 * 365 * 100))
}
