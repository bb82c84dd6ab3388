//! The lock kinds: what a lease holds and what an attempt asks for.

use std::fmt;

/// The most permits a semaphore may have (a bound on input, not on the backend).
pub const MAX_PERMITS: u32 = 1_000_000;

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
    /// The `kind` label of the metric series: `"mutex"`, `"read"`, `"write"`, `"semaphore"`.
    #[must_use]
    pub fn label(self) -> &'static str {
        self.class().label()
    }

    /// Whether a holder of this kind excludes every other holder of the name (mutex, write).
    #[must_use]
    pub fn is_exclusive(self) -> bool {
        matches!(self, Self::Mutex | Self::Write { .. })
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
}

impl Class {
    pub(crate) const ALL: [Class; 4] = [Class::Mutex, Class::Read, Class::Write, Class::Semaphore];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Mutex => "mutex",
            Self::Read => "read",
            Self::Write => "write",
            Self::Semaphore => "semaphore",
        }
    }
}
