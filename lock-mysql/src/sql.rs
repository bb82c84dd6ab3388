//! The schema, and the mutex's statements on the lease table (acquire, release, hand-over,
//! extend; the load tool reads them from this file). The other kinds' statements are in their
//! files under `kinds/`.
//!
//! Every statement takes the lock name and tokens as bind parameters (never spliced into the
//! text) and reads time only from the server's clock: [`NOW_US`], microseconds since the epoch.

/// The table every mutex lease lives in.
pub const TABLE: &str = "distlock_leases";

/// The version of the schema [`MIGRATION`] creates, recorded in the table `distlock_schema`.
pub const SCHEMA_VERSION: u32 = 3;

/// The migration that creates the lock's schema: run it once per database, before the first
/// lock operation, yourself (with your migration tool) or through
/// [`MysqlLock::migrate`](crate::MysqlLock::migrate). It is idempotent. Its text is
/// `lock-mysql/sql/migration.sql`, commented table by table.
///
/// The mutex lives in one row per lock name ever taken, in `distlock_leases`:
///
/// | column | type | meaning |
/// |---|---|---|
/// | `name` | `VARBINARY(1024)` primary key | the lock name, compared byte for byte |
/// | `token` | `CHAR(32)`, null when released | the holder's token, 32 hex characters |
/// | `fencing_token` | `BIGINT` | the last fencing token issued for the name |
/// | `expires_at` | `BIGINT` | when the holder's lease ends: µs since the epoch, server clock |
/// | `granted_at` | `BIGINT`, null before a grant | when the holder was granted the lease (µs, server clock) |
///
/// A released row is kept (token null) so the name's next fencing token follows its last one.
/// The read-write lock, the semaphore and the fair queue have tables of their own
/// (`distlock_rw`, `distlock_rw_readers`, `distlock_rw_waiting`, `distlock_semaphores`,
/// `distlock_permits`, `distlock_fair_queue`), and holder notes live in `distlock_notes`.
/// Version 2 adds guarded writes: the table `distlock_fences` and the procedure
/// `distlock_fence(resource, token)` ([`fence`](crate::fence)). Version 3 adds `granted_at`
/// to every table of holders (`distlock_leases`, `distlock_rw`, `distlock_rw_readers`,
/// `distlock_permits`), set by the grant's own statement: the "held since" of an operator's
/// listing. It adds the column to tables an earlier version created; the statements of this
/// version write it, so they need the migration (a missing column is reported as
/// [`MissingTable`](crate::MissingTable)).
pub const MIGRATION: &str = include_str!("../sql/migration.sql");

/// The server's clock now, in microseconds since the epoch. `NOW(6)` is the statement's start
/// time, so every use in one statement agrees. (The session time zone is UTC, which sqlx sets
/// on every connection, so `UNIX_TIMESTAMP` is exact.)
macro_rules! now_us {
    () => {
        "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)"
    };
}
pub(crate) use now_us;

/// Whether the lease in the row (its `token` and `expires_at`) is free: released or expired.
macro_rules! free {
    () => {
        concat!("(token IS NULL OR expires_at <= ", now_us!(), ")")
    };
}

/// Try once to take `?1` with token `?2` for `?3` ms: insert the row, or take over a row that is
/// released or expired. MySQL and MariaDB apply the `ON DUPLICATE KEY UPDATE` assignments left
/// to right, each later one seeing the earlier ones' new values: so the fencing token and the
/// grant's time are computed first and the token next, all from the old row, and the expiry
/// last, moved only when the token is now ours. (A retry of our own grant keeps its time.)
///
/// One round trip: the statement answers through the OK packet's `last_insert_id`, which
/// `LAST_INSERT_ID(expr)` sets. A grant (a new row, or a row taken over) sets it to the grant's
/// fencing token, never 0; a busy row sets it to 0 (`fencing_token + LAST_INSERT_ID(0)` leaves the
/// counter as it was). The `VALUES` row is evaluated before the duplicate is found, so on a
/// duplicate the assignment's call is the last and wins. Only a busy answer reads the row
/// ([`ACQUIRED`]) for the holder's time left (or finds the lease ours already: a retry of a
/// grant whose answer was lost).
pub(crate) const ACQUIRE: &str = concat!(
    "INSERT INTO distlock_leases (name, token, fencing_token, expires_at, granted_at)\n",
    "VALUES (?, ?, LAST_INSERT_ID(",
    now_us!(),
    "), ",
    now_us!(),
    " + ? * 1000, ",
    now_us!(),
    ")\n",
    "ON DUPLICATE KEY UPDATE\n",
    "    fencing_token = IF(",
    free!(),
    ", LAST_INSERT_ID(GREATEST(fencing_token + 1, ",
    now_us!(),
    ")), fencing_token + LAST_INSERT_ID(0)),\n",
    "    granted_at = IF(",
    free!(),
    ", VALUES(granted_at), granted_at),\n",
    "    token = IF(",
    free!(),
    ", VALUES(token), token),\n",
    "    expires_at = IF(token <=> VALUES(token), VALUES(expires_at), expires_at)"
);

/// The row of `?1` after a busy [`ACQUIRE`]: its token, its fencing token, and the milliseconds
/// left of its lease (0 when it has ended). The lease is ours when the token is ours and time
/// is left: the token cannot change while the lease lasts, so the fencing token read is the
/// one our grant issued.
pub(crate) const ACQUIRED: &str = concat!(
    "SELECT token, fencing_token, CAST(GREATEST(0, CEIL((expires_at - ",
    now_us!(),
    ") / 1000)) AS SIGNED)\n",
    "FROM distlock_leases WHERE name = ?"
);

/// Extend the lease `?3` of `?2` to `?1` ms from now, if it has not ended; `{table}` and
/// `{token}` name where the lease lives. One row affected when extended (sqlx asks for found
/// rows, so an unchanged value still counts).
macro_rules! extend_one {
    ($table:literal, $token:literal) => {
        concat!(
            "UPDATE ",
            $table,
            " SET expires_at = ",
            now_us!(),
            " + ? * 1000\n",
            "WHERE name = ? AND ",
            $token,
            " = ? AND expires_at > ",
            now_us!()
        )
    };
}

/// The table a lease of each kind lives in, so that an extend goes to the right one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseTable {
    /// `distlock_leases`: the mutex and the fair lock.
    Leases,
    /// `distlock_rw`: the writer of a read-write lock.
    Writers,
    /// `distlock_rw_readers`: its readers.
    Readers,
    /// `distlock_permits`: a semaphore's holders.
    Permits,
}

impl LeaseTable {
    /// Where a lease of `kind` lives.
    pub(crate) fn of(kind: lock_core::Kind) -> Self {
        use lock_core::Kind;
        match kind {
            Kind::Read { .. } => Self::Readers,
            Kind::Write { .. } => Self::Writers,
            Kind::Semaphore { .. } => Self::Permits,
            _ => Self::Leases,
        }
    }

    /// Extend one lease: TTL in ms, name, token; one row affected when extended.
    pub(crate) fn extend(self) -> &'static str {
        match self {
            Self::Leases => extend_one!("distlock_leases", "token"),
            Self::Writers => extend_one!("distlock_rw", "writer"),
            Self::Readers => extend_one!("distlock_rw_readers", "token"),
            Self::Permits => extend_one!("distlock_permits", "token"),
        }
    }
}

/// Release `?1` held by `?2`, if its lease has not ended. The row stays, token null, for the
/// fencing counter. One row affected when the lease was ours.
pub(crate) const RELEASE: &str = concat!(
    "UPDATE distlock_leases SET token = NULL, expires_at = ",
    now_us!(),
    "\nWHERE name = ? AND token = ? AND expires_at > ",
    now_us!()
);

/// Pass the name `?3` from token `?4` to token `?1` for `?2` ms with a fresh fencing token
/// (computed before the token moves: assignments apply left to right), if `?4`'s lease has not
/// ended. One row affected when handed over, and the new fencing token in the OK packet's
/// `last_insert_id` (`LAST_INSERT_ID(expr)`): one round trip.
pub(crate) const HAND_OVER: &str = concat!(
    "UPDATE distlock_leases SET\n",
    "    fencing_token = LAST_INSERT_ID(GREATEST(fencing_token + 1, ",
    now_us!(),
    ")),\n",
    "    granted_at = ",
    now_us!(),
    ",\n",
    "    token = ?,\n",
    "    expires_at = ",
    now_us!(),
    " + ? * 1000\n",
    "WHERE name = ? AND token = ? AND expires_at > ",
    now_us!()
);

/// The connectivity check.
pub(crate) const PING: &str = "SELECT 1";

/// The statements of [`MIGRATION`], split where a line ends with `;`, comments dropped; a
/// `CREATE PROCEDURE` runs to its line `END;` (its body's statements end with `;` too).
pub(crate) fn migration_statements() -> Vec<String> {
    let mut statements = Vec::new();
    let mut current = String::new();
    for line in MIGRATION.lines() {
        let line = line.trim_end();
        if line.trim_start().starts_with("--") || line.is_empty() {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        let in_procedure = current.starts_with("CREATE PROCEDURE");
        if (in_procedure && line == "END;") || (!in_procedure && line.ends_with(';')) {
            statements.push(current.trim().trim_end_matches(';').to_owned());
            current.clear();
        }
    }
    statements
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_migration_splits_into_its_statements() {
        let statements = super::migration_statements();
        assert_eq!(statements.len(), 14);
        assert!(statements[0].starts_with("CREATE TABLE IF NOT EXISTS distlock_leases"));
        let procedure = statements
            .iter()
            .find(|s| s.starts_with("CREATE PROCEDURE IF NOT EXISTS distlock_fence"))
            .expect("the fence's procedure");
        assert!(procedure.ends_with("END"), "{procedure}");
        assert!(procedure.contains("SIGNAL SQLSTATE 'DL409'"), "{procedure}");
        assert!(statements.iter().all(|s| !s.ends_with(';')));
    }
}
