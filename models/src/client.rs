//! The client of the read-write, fair and grace models: idle, waiting, holding, or gone.

/// Where one client of a model is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Client {
    /// Not asking; `left` more rounds to go (0: finished).
    Idle {
        /// Rounds still to ask for.
        left: u8,
    },
    /// Waiting; its next attempt is at `wake_at` (a release it hears of sets it to now).
    Waiting {
        /// The tick of its next attempt.
        wake_at: u8,
        /// Rounds to ask for after this one.
        left: u8,
    },
    /// Holds a lease valid until `until` (by its own clock: the model's tick).
    Holding {
        /// The lease's `valid_until`.
        until: u8,
        /// Rounds to ask for after this one.
        left: u8,
    },
    /// Gave up waiting (cancelled, timed out) or died.
    Gone,
}

impl Client {
    /// Holds a lease that is still valid at `now`.
    pub fn holds_valid(&self, now: u8) -> bool {
        matches!(self, Self::Holding { until, .. } if *until > now)
    }

    /// Finished: every round served, or gone.
    pub fn finished(&self) -> bool {
        matches!(self, Self::Idle { left: 0 } | Self::Gone)
    }

    /// A deadline of this client still ahead of `now` (`u8::MAX` is no deadline: never).
    pub fn deadline_after(&self, now: u8) -> bool {
        match self {
            Self::Waiting { wake_at, .. } => *wake_at > now && *wake_at != u8::MAX,
            Self::Holding { until, .. } => *until > now,
            _ => false,
        }
    }
}
