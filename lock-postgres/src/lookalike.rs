//! Servers that speak PostgreSQL's protocol but are other databases, told apart by
//! `version()`, and what distlock does on them.

use std::fmt;

/// A database that answers PostgreSQL's protocol but lacks what a lock mode needs, as
/// `SELECT version()` names it.
///
/// - **CockroachDB**: its session advisory lock functions were stubs that always returned
///   `true` (every caller "held" every lock), and it has no `LISTEN`/`NOTIFY`.
/// - **YugabyteDB** (YSQL): no `LISTEN`/`NOTIFY`, and session advisory locks only in recent
///   versions, behind a flag.
///
/// [`PostgresAdvisoryLock`](crate::PostgresAdvisoryLock) refuses both by name, before its
/// first grant, with [`UnsupportedServer`]. [`PostgresLock`](crate::PostgresLock) (the lease
/// table, whose exclusion rests on rows and row locks) runs on them without release
/// announcements: its listener sees the server's name and stops, so waiters poll with the
/// locker's backoff instead of waiting for a `NOTIFY` that never comes. Neither database is in
/// the test matrix (no server for them here): only the detection is tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lookalike {
    /// CockroachDB (`CockroachDB CCL v23.1.11 (...)`).
    CockroachDb,
    /// YugabyteDB's YSQL (`PostgreSQL 11.2-YB-2.18.0.0-b0 on x86_64-pc-linux-gnu, ...`).
    YugabyteDb,
}

impl Lookalike {
    /// The look-alike `version` (the text of `SELECT version()`) names, if any; `None` for
    /// PostgreSQL itself.
    #[must_use]
    pub fn detect(version: &str) -> Option<Lookalike> {
        if version.contains("CockroachDB") {
            Some(Lookalike::CockroachDb)
        } else if version.contains("-YB-") || version.contains("YugabyteDB") {
            Some(Lookalike::YugabyteDb)
        } else {
            None
        }
    }

    /// The database's name, for messages.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Lookalike::CockroachDb => "CockroachDB",
            Lookalike::YugabyteDb => "YugabyteDB",
        }
    }
}

impl fmt::Display for Lookalike {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The server is a [`Lookalike`] the lock mode cannot run on: the source of the
/// non-retryable [`LockError::Backend`](lock_core::LockError::Backend) that
/// [`PostgresAdvisoryLock`](crate::PostgresAdvisoryLock) answers before its first grant there.
#[derive(Debug, Clone)]
pub struct UnsupportedServer {
    /// Which database it is.
    pub server: Lookalike,
    /// What `version()` said.
    pub version: String,
}

impl fmt::Display for UnsupportedServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the advisory mode needs PostgreSQL's session advisory locks, and the server is {} \
             ({}), whose advisory locks do not exclude (CockroachDB's always grant): use \
             `PostgresLock`, the lease table",
            self.server, self.version
        )
    }
}

impl std::error::Error for UnsupportedServer {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_the_look_alikes_from_postgres() {
        let postgres = [
            "PostgreSQL 15.19 (Debian 15.19-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit",
            "PostgreSQL 12.0 on x86_64-apple-darwin, compiled by clang, 64-bit",
            "PostgreSQL 16.2 on aarch64-unknown-linux-gnu, compiled by aarch64-unknown-linux-gnu-gcc (GCC) 9.5.0, 64-bit",
        ];
        for version in postgres {
            assert_eq!(Lookalike::detect(version), None, "{version}");
        }
        let cockroach = [
            "CockroachDB CCL v23.1.11 (x86_64-pc-linux-gnu, built 2023/09/27 01:53:43, go1.19.10)",
            "CockroachDB OSS v21.2.0 (x86_64-unknown-linux-gnu, built 2021/11/15 14:00:58, go1.16.6)",
        ];
        for version in cockroach {
            assert_eq!(Lookalike::detect(version), Some(Lookalike::CockroachDb));
        }
        let yugabyte = [
            "PostgreSQL 11.2-YB-2.18.0.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 15.0.3, 64-bit",
            "PostgreSQL 15.2-YB-2.25.0.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 17.0.6, 64-bit",
        ];
        for version in yugabyte {
            assert_eq!(Lookalike::detect(version), Some(Lookalike::YugabyteDb));
        }
    }

    #[test]
    fn the_refusal_names_the_server_and_the_way_out() {
        let err = UnsupportedServer {
            server: Lookalike::CockroachDb,
            version: "CockroachDB CCL v23.1.11".to_owned(),
        };
        let text = err.to_string();
        assert!(text.contains("CockroachDB CCL v23.1.11"), "{text}");
        assert!(text.contains("PostgresLock"), "{text}");
    }
}
