//! The lock kinds: what a lease holds and what an attempt asks for.

use std::fmt;
use std::time::Duration;

/// The most permits a semaphore may have (a bound on input, not on the backend).
pub const MAX_PERMITS: u32 = 1_000_000;

/// The longest a fair waiter's queue entry lasts after its last attempt: 3 s. A waiter that
/// dies while queued holds the queue back at most this long.
pub const FAIR_ENTRY_TTL: Duration = Duration::from_secs(3);

/// How long a fair waiter's queue entry lasts after its last attempt, for a request with lease
/// `ttl`: [`FAIR_ENTRY_TTL`], or `ttl` if shorter. Backends expire entries after this long; the
/// [`Locker`](crate::Locker) tries again (renewing the entry) at least every half of it.
#[must_use]
pub fn fair_entry_ttl(ttl: Duration) -> Duration {
    ttl.min(FAIR_ENTRY_TTL)
}

/// What a lease holds, and so what an attempt asks a backend for. Every lease carries its kind
/// ([`Lease::kind`](crate::Lease::kind)), so a backend's `extend` and `release` know which of
/// its structures the lease lives in.
///
/// One enum passed to one trait, rather than one trait per kind: the
/// [`Locker`](crate::Locker)'s policy (waiting, renewal, cleanup, metrics) handles every kind
/// through the same few calls, and the renewal watchdog extends leases of every kind in one
/// batch. `#[non_exhaustive]`: a backend matches the kinds it offers and answers
/// [`LockError::Unsupported`](crate::LockError::Unsupported) for the rest, so a kind added
/// later (a fair lock) compiles against every existing backend, which refuses it until it
/// learns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// An exclusive lock: one holder at a time ([`Locker::lock`](crate::Locker::lock)).
    Mutex,
    /// A reader's share of a read-write lock: any number of readers at once, no writer
    /// ([`Locker::read`](crate::Locker::read)). Each reader has its own lease (token, expiry,
    /// renewal). Its fencing token is the last write's.
    Read {
        /// When `true` (the default), a reader does not get in while a writer waits, so a
        /// stream of readers cannot starve writers.
        writer_preference: bool,
    },
    /// The writer of a read-write lock: alone, no readers
    /// ([`Locker::write`](crate::Locker::write)). Issues a fencing token like a mutex.
    Write {
        /// When `true` (the default), a writer that finds the lock busy records that it
        /// waits, and readers arriving after that queue behind it.
        writer_preference: bool,
    },
    /// A fair exclusive lock: one holder at a time, granted in the order the processes asked
    /// ([`Locker::fair`](crate::Locker::fair)). The waiters queue in the backend, each with an
    /// entry that lapses unless its waiter keeps trying, so a waiter that dies or gives up never
    /// blocks the queue for long. It is the mutex of the same name: the two exclude each other,
    /// but only fair requests queue.
    Fair {
        /// Whether a busy attempt takes (or keeps) a place in the queue: `true` for a waiting
        /// request, `false` for a single try, which is granted only when the lock is free and
        /// nobody queues, and leaves nothing behind.
        queued: bool,
    },
    /// `permits` of the `max` permits of a counting semaphore
    /// ([`Locker::semaphore`](crate::Locker::semaphore)), taken at once, held as one lease.
    Semaphore {
        /// How many permits this lease holds (≥ 1).
        permits: u32,
        /// How many permits the semaphore has; every holder of one name must say the same.
        max: u32,
    },
}

impl Kind {
    /// The `kind` label of the metric series: `"mutex"`, `"read"`, `"write"`, `"semaphore"`,
    /// `"fair"`.
    #[must_use]
    pub fn label(self) -> &'static str {
        self.class().label()
    }

    /// Whether a holder of this kind excludes every other holder of the name (mutex, write,
    /// fair).
    #[must_use]
    pub fn is_exclusive(self) -> bool {
        matches!(self, Self::Mutex | Self::Write { .. } | Self::Fair { .. })
    }

    /// Whether a busy attempt of this kind leaves a record of its waiter in the backend (a
    /// writer with writer preference, a fair waiter's queue entry): the
    /// [`Locker`](crate::Locker) then reuses the attempt's token for the next attempt, tries at
    /// least every half TTL so the record does not lapse, and releases the token when the
    /// request ends without the lock, which withdraws the record.
    #[must_use]
    pub fn records_waiter(self) -> bool {
        matches!(
            self,
            Self::Write {
                writer_preference: true
            } | Self::Fair { queued: true }
        )
    }

    /// The permits a lease of this kind holds: `permits` for a semaphore, 0 otherwise.
    #[must_use]
    pub fn permits(self) -> u32 {
        match self {
            Self::Semaphore { permits, .. } => permits,
            _ => 0,
        }
    }

    pub(crate) fn class(self) -> Class {
        match self {
            Self::Mutex => Class::Mutex,
            Self::Read { .. } => Class::Read,
            Self::Write { .. } => Class::Write,
            Self::Semaphore { .. } => Class::Semaphore,
            Self::Fair { .. } => Class::Fair,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Semaphore { permits, max } => write!(f, "semaphore ({permits} of {max})"),
            other => f.write_str(other.label()),
        }
    }
}

/// A kind without its parameters: the waiting lines and metric label sets are per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Class {
    Mutex = 0,
    Read = 1,
    Write = 2,
    Semaphore = 3,
    Fair = 4,
}

impl Class {
    pub(crate) const ALL: [Class; 5] = [
        Class::Mutex,
        Class::Read,
        Class::Write,
        Class::Semaphore,
        Class::Fair,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Mutex => "mutex",
            Self::Read => "read",
            Self::Write => "write",
            Self::Semaphore => "semaphore",
            Self::Fair => "fair",
        }
    }
}
