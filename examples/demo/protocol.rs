//! The line protocol from a worker to the parent: one event per line on the worker's stdout.
//!
//! ```text
//! acquired wait_us=412
//! stall outcome=rejected
//! violation inside=2
//! wait-timeout
//! error connection refused (os error 111)
//! summary acquisitions=312 wait_p50_us=380 ... errors=0
//! ```
//!
//! A line is a kind, then `name=value` pairs separated by single spaces (values are decimal
//! integers or single words); `error` carries free text to the end of the line. `summary` is
//! the last line of a worker that ran to its end.

use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in milliseconds since the Unix epoch: how the parent tells every worker the same
/// deadline (`--deadline-unix-ms`).
pub(crate) fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What happened to the write of a worker that woke up from a simulated stall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StallOutcome {
    /// The resource rejected the stale write: fencing worked.
    Rejected,
    /// The resource accepted a write older than one it had already accepted: fencing failed.
    Accepted,
    /// No newer write reached the resource in time, so the stale write was not attempted (there
    /// was nothing for it to lose against).
    Unchecked,
}

impl StallOutcome {
    fn as_str(self) -> &'static str {
        match self {
            Self::Rejected => "rejected",
            Self::Accepted => "accepted",
            Self::Unchecked => "unchecked",
        }
    }

    fn parse(word: &str) -> Option<Self> {
        [Self::Rejected, Self::Accepted, Self::Unchecked]
            .into_iter()
            .find(|o| o.as_str() == word)
    }
}

/// Defines [`Summary`] with one `u64` per field, and its encoding, from a single list.
macro_rules! summary {
    ($($(#[doc = $doc:literal])+ $field:ident,)+) => {
        /// A worker's totals: its last line.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub(crate) struct Summary {
            $($(#[doc = $doc])+ pub(crate) $field: u64,)+
        }

        impl Summary {
            /// The fields as `(name, value)`, in protocol order.
            fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($field), self.$field)),+]
            }

            /// Adds `other`'s fields to these (the percentiles too, which then mean nothing).
            pub(crate) fn add(&mut self, other: &Self) {
                $(self.$field += other.$field;)+
            }

            /// Sets the field called `name`; `false` when there is none.
            fn set(&mut self, name: &str, value: u64) -> bool {
                match name {
                    $(stringify!($field) => self.$field = value,)+
                    _ => return false,
                }
                true
            }
        }
    };
}

summary! {
    /// Locks granted.
    acquisitions,
    /// Median wait for the lock, in microseconds.
    wait_p50_us,
    /// 99th-percentile wait for the lock, in microseconds.
    wait_p99_us,
    /// Simulated stalls.
    stalls,
    /// Stale writes the resource rejected.
    stale_rejected,
    /// Stale writes the resource accepted (must be 0).
    stale_accepted,
    /// Stalls after which no newer write had reached the resource, so none was attempted.
    stale_unchecked,
    /// Releases after a stall that still found the lock ours (should be 0: the lease expired).
    stale_still_ours,
    /// Writes with a current fencing token the resource accepted.
    fenced_accepted,
    /// Writes with a current fencing token the resource rejected (the lease ran out mid-work).
    fenced_rejected,
    /// Normal rounds whose release found the lease already gone (the work outlived the TTL).
    overruns,
    /// Entries into the critical section that found another holder inside (must be 0).
    violations,
    /// Increments of the shared counter.
    increments,
    /// Acquisitions that gave up waiting before the deadline.
    wait_timeouts,
    /// Failed operations.
    errors,
}

/// One line of a worker's stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// The lock was granted after waiting `wait_us` microseconds.
    Acquired {
        /// From the call to the grant.
        wait_us: u64,
    },
    /// A simulated stall ended.
    Stall(StallOutcome),
    /// Entering the critical section found `inside` holders there, itself included.
    Violation {
        /// The reply of `INCR demo:inside`.
        inside: i64,
    },
    /// An acquisition gave up waiting for the lock.
    WaitTimeout,
    /// Something failed; the text is the error (one line).
    Error(String),
    /// The worker's totals; its last line.
    Summary(Summary),
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Acquired { wait_us } => write!(f, "acquired wait_us={wait_us}"),
            Self::Stall(outcome) => write!(f, "stall outcome={}", outcome.as_str()),
            Self::Violation { inside } => write!(f, "violation inside={inside}"),
            Self::WaitTimeout => f.write_str("wait-timeout"),
            Self::Error(text) => write!(f, "error {}", text.replace(['\n', '\r'], " ")),
            Self::Summary(summary) => {
                f.write_str("summary")?;
                for (name, value) in summary.fields() {
                    write!(f, " {name}={value}")?;
                }
                Ok(())
            }
        }
    }
}

/// A line that is not an [`Event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError(String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

impl FromStr for Event {
    type Err = ParseError;

    fn from_str(line: &str) -> Result<Self, Self::Err> {
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        let fail = |why: &str| ParseError(format!("{why}: {line:?}"));
        let one = |name: &str| -> Result<&str, ParseError> {
            match pairs(rest).as_slice() {
                [Ok((n, v))] if *n == name => Ok(v),
                _ => Err(fail(&format!("expected exactly `{name}=...`"))),
            }
        };
        let number = |name: &str| -> Result<u64, ParseError> {
            one(name)?.parse().map_err(|_| fail("not a number"))
        };
        match kind {
            "acquired" => Ok(Self::Acquired {
                wait_us: number("wait_us")?,
            }),
            "stall" => StallOutcome::parse(one("outcome")?)
                .map(Self::Stall)
                .ok_or_else(|| fail("unknown stall outcome")),
            "violation" => Ok(Self::Violation {
                inside: one("inside")?.parse().map_err(|_| fail("not a number"))?,
            }),
            "wait-timeout" if rest.is_empty() => Ok(Self::WaitTimeout),
            "error" => Ok(Self::Error(rest.to_owned())),
            "summary" => {
                let mut summary = Summary::default();
                let mut seen = Vec::new();
                for pair in pairs(rest) {
                    let (name, value) = pair.map_err(|_| fail("expected name=value"))?;
                    let value = value.parse().map_err(|_| fail("not a number"))?;
                    if seen.contains(&name) || !summary.set(name, value) {
                        return Err(fail(&format!("unknown or repeated field {name:?}")));
                    }
                    seen.push(name);
                }
                if seen.len() == summary.fields().len() {
                    Ok(Self::Summary(summary))
                } else {
                    Err(fail("fields are missing"))
                }
            }
            _ => Err(fail("unknown event")),
        }
    }
}

/// The `name=value` words of `rest`; `Err(word)` for a word without `=`.
fn pairs(rest: &str) -> Vec<Result<(&str, &str), &str>> {
    rest.split(' ')
        .filter(|w| !w.is_empty())
        .map(|w| w.split_once('=').ok_or(w))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip() {
        let summary = Summary {
            acquisitions: 312,
            wait_p99_us: 700_123,
            stale_rejected: 12,
            errors: 1,
            ..Summary::default()
        };
        for event in [
            Event::Acquired { wait_us: 412 },
            Event::Stall(StallOutcome::Rejected),
            Event::Stall(StallOutcome::Accepted),
            Event::Stall(StallOutcome::Unchecked),
            Event::Violation { inside: 2 },
            Event::WaitTimeout,
            Event::Error("connection refused (os error 111)".to_owned()),
            Event::Summary(summary),
        ] {
            let line = event.to_string();
            assert!(!line.contains('\n'));
            assert_eq!(line.parse::<Event>(), Ok(event), "{line}");
        }
    }

    #[test]
    fn error_text_stays_on_one_line() {
        let line = Event::Error("two\nlines".to_owned()).to_string();
        assert_eq!(line, "error two lines");
    }

    #[test]
    fn rejects_malformed_lines() {
        for line in [
            "",
            "hello",
            "acquired",
            "acquired wait_us=x",
            "acquired wait_us=1 extra=2",
            "stall outcome=maybe",
            "wait-timeout now",
            "summary acquisitions=1",
            "summary acquisitions=1 acquisitions=1",
        ] {
            assert!(line.parse::<Event>().is_err(), "{line:?} parsed");
        }
    }
}
