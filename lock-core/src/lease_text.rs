//! A lease as one line of text, so a process can keep it across a restart
//! ([`Guard::leak`](crate::Guard::leak), then [`Locker::adopt`](crate::Locker::adopt)).
//!
//! `distlock-lease/1 <kind> <fencing token> <token, 32 hex digits> <name>`: the name last, so
//! it may hold any character (spaces too); the version first, so a later form can be told
//! apart. Plain text rather than serde: it needs no dependency, reads in a log line, and a
//! shell script can keep it in a file.

use std::fmt;
use std::str::FromStr;

use tokio::time::Instant;

use crate::{Kind, Lease, Token, check_name};

/// The first word of a lease's text form.
const MAGIC: &str = "distlock-lease/1";

/// A text that is not a lease's ([`Lease::from_str`](std::str::FromStr)): which part is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not a distlock lease ({reason}); expected `{MAGIC} <kind> <fencing token> <token> <name>`"
)]
pub struct ParseLeaseError {
    reason: &'static str,
}

impl ParseLeaseError {
    fn new(reason: &'static str) -> Self {
        Self { reason }
    }
}

fn kind_text(kind: Kind) -> String {
    match kind {
        Kind::Read { writer_preference } => {
            format!("read{}", if writer_preference { "" } else { "-nowp" })
        }
        Kind::Write { writer_preference } => {
            format!("write{}", if writer_preference { "" } else { "-nowp" })
        }
        Kind::Fair { queued } => format!("fair{}", if queued { "" } else { "-once" }),
        Kind::Semaphore { permits, max } => format!("semaphore-{permits}-{max}"),
        _ => "mutex".to_owned(),
    }
}

fn parse_kind(text: &str) -> Option<Kind> {
    Some(match text {
        "mutex" => Kind::Mutex,
        "read" | "read-nowp" => Kind::Read {
            writer_preference: text == "read",
        },
        "write" | "write-nowp" => Kind::Write {
            writer_preference: text == "write",
        },
        "fair" | "fair-once" => Kind::Fair {
            queued: text == "fair",
        },
        _ => {
            let (permits, max) = text.strip_prefix("semaphore-")?.split_once('-')?;
            Kind::Semaphore {
                permits: permits.parse().ok()?,
                max: max.parse().ok()?,
            }
        }
    })
}

impl fmt::Display for Lease {
    /// The lease's text form, `distlock-lease/1 <kind> <fencing token> <token> <name>`, which
    /// [`Lease::from_str`](std::str::FromStr) reads back. It leaves out `valid_until` (a local
    /// monotonic instant means nothing to another process): [`Locker::adopt`](crate::Locker::adopt)
    /// learns the lease's validity from the store. **It holds the token, which proves
    /// ownership**: keep it where only the owner reads it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{MAGIC} {} {} {} {}",
            kind_text(self.kind()),
            self.fencing_token(),
            self.token().to_hex().as_str(),
            self.name()
        )
    }
}

impl FromStr for Lease {
    type Err = ParseLeaseError;

    /// Reads a lease's text form (its [`Display`](fmt::Display)). The lease read has
    /// `valid_until` = now: this process knows nothing of its validity until the store says
    /// ([`Locker::adopt`](crate::Locker::adopt) asks it).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut parts = text.splitn(5, ' ');
        let mut next = |what| parts.next().ok_or(ParseLeaseError::new(what));
        if next("empty")? != MAGIC {
            return Err(ParseLeaseError::new(
                "it does not start with distlock-lease/1",
            ));
        }
        let kind = parse_kind(next("no kind")?).ok_or(ParseLeaseError::new("unknown kind"))?;
        let fencing = next("no fencing token")?
            .parse::<u64>()
            .map_err(|_| ParseLeaseError::new("the fencing token is not a u64"))?;
        let token = next("no token")?
            .parse::<Token>()
            .map_err(|_| ParseLeaseError::new("the token is not 32 hex digits"))?;
        let name = next("no name")?;
        check_name(name).map_err(|_| ParseLeaseError::new("the name is empty or too long"))?;
        Ok(Lease::new(name, token, fencing, Instant::now()).with_kind(kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_and_names_keep_spaces() {
        let token = Token::generate().expect("rng");
        for kind in [
            Kind::Mutex,
            Kind::Read {
                writer_preference: true,
            },
            Kind::Read {
                writer_preference: false,
            },
            Kind::Write {
                writer_preference: true,
            },
            Kind::Write {
                writer_preference: false,
            },
            Kind::Fair { queued: true },
            Kind::Fair { queued: false },
            Kind::Semaphore { permits: 2, max: 8 },
        ] {
            let lease =
                Lease::new("job: nightly report", token, 42, Instant::now()).with_kind(kind);
            let back: Lease = lease.to_string().parse().expect("parses");
            assert_eq!(back.name(), "job: nightly report");
            assert_eq!(back.token(), &token);
            assert_eq!(back.fencing_token(), 42);
            assert_eq!(back.kind(), kind);
        }
    }

    #[test]
    fn bad_text_says_what_is_wrong() {
        let hex = "ab".repeat(16);
        for (text, reason) in [
            ("", "it does not start"),
            ("distlock-lease/2 mutex 1 x n", "it does not start"),
            ("distlock-lease/1 lock 1 x n", "unknown kind"),
            ("distlock-lease/1 mutex -1 x n", "not a u64"),
            ("distlock-lease/1 mutex 1 xyz n", "32 hex"),
            (&*format!("distlock-lease/1 mutex 1 {hex}"), "no name"),
            (
                &*format!("distlock-lease/1 mutex 1 {hex} "),
                "empty or too long",
            ),
            ("distlock-lease/1 semaphore-2 1 x n", "unknown kind"),
        ] {
            let error = text.parse::<Lease>().expect_err(text).to_string();
            assert!(error.contains(reason), "{text:?}: {error}");
        }
    }
}
