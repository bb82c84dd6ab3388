//! The schema, and the statements that are not one kind's own: the mutex's on the lease table
//! (acquire, release, hand-over; the load tool reads them from this file), each table's
//! extend, the listener's and the advisory mode's. The other kinds' statements and the notes'
//! are in their files under `kinds/`.
//!
//! Every statement takes the lock name and tokens as bind parameters (never spliced into the
//! text) and reads time only from the server's clock (`clock_timestamp()`).

use lock_core::Kind;

/// The table every lease lives in.
pub const TABLE: &str = "distlock_leases";

/// The channel every release is announced on (`pg_notify(CHANNEL, name)`).
pub const CHANNEL: &str = "distlock_released";

/// The channel a fair lock's release tells the queue's new head on
/// (`pg_notify(TURN_CHANNEL, head's token)`): only that waiter wakes.
pub const TURN_CHANNEL: &str = "distlock_turn";

/// The version of the schema [`MIGRATION`] creates, recorded in the table `distlock_schema`.
/// Version 1 was the lease table alone; version 2 adds the read-write lock, the semaphore and
/// the fair lock; version 3 the notes beside a grant; version 4 the fence of guarded writes
/// ([`FENCE_TABLE`](crate::FENCE_TABLE) and the function `distlock_fence`, see
/// [`fence`](crate::fence)); version 5 the date of each grant (`granted_at`, read by the
/// operator reads: [`Inspect`](lock_core::backend::Inspect)'s "held since").
pub const SCHEMA_VERSION: u32 = 5;

/// The migration that creates (or upgrades) the lock's schema: run it once per database, before
/// the first lock operation, yourself (with your migration tool) or through
/// [`PostgresLock::migrate`](crate::PostgresLock::migrate). It is idempotent, and upgrades a
/// database of an earlier version in place: existing tables and the leases in them are kept.
/// Its text is `lock-postgres/sql/migration.sql`, commented table by table.
///
/// The mutex lives in one row per lock name ever taken, in `distlock_leases`:
///
/// | column | type | meaning |
/// |---|---|---|
/// | `name` | `text` primary key | the lock name |
/// | `token` | `text`, null when released | the holder's token, 32 hex characters |
/// | `fencing_token` | `bigint` | the last fencing token issued for the name |
/// | `expires_at` | `timestamptz` | when the holder's lease ends, on the server's clock |
/// | `granted_at` | `timestamptz`, null before version 5 | when the holder was granted it, on the server's clock (set by a trigger on each new fencing token) |
///
/// A released row is kept (token null) so the name's next fencing token follows its last one;
/// deleting free rows is safe (see the crate docs on fencing). The read-write lock, the
/// semaphore and the fair queue have tables of their own (`distlock_rw`, `distlock_rw_readers`,
/// `distlock_rw_waiting`, `distlock_semaphores`, `distlock_permits`, `distlock_fair_queue`) and
/// one PL/pgSQL function per operation that must decide on several rows at once. The fence of
/// guarded writes is the table `distlock_fences` and the function
/// `distlock_fence(resource text, token numeric) RETURNS numeric` (see [`fence`](crate::fence)).
pub const MIGRATION: &str = include_str!("../sql/migration.sql");

/// Try once to take `$1` with token `$2` for `$3` ms: insert the row, or take over a row that
/// is released or expired; a held row is rewritten unchanged, so exactly one row comes back.
/// "Now" is read once (`now.t`), so every test of the row agrees. Returns whether the row is
/// ours, its fencing token, and the milliseconds left of its lease.
pub(crate) const ACQUIRE: &str = "\
INSERT INTO distlock_leases AS l (name, token, fencing_token, expires_at)
SELECT $1, $2, (extract(epoch FROM now.t) * 1000000)::int8, now.t + $3 * interval '1 millisecond'
FROM (SELECT clock_timestamp() AS t) AS now
ON CONFLICT (name) DO UPDATE SET
    token = CASE WHEN l.token IS NULL OR l.expires_at <= excluded.expires_at - $3 * interval '1 millisecond'
        THEN excluded.token ELSE l.token END,
    fencing_token = CASE WHEN l.token IS NULL OR l.expires_at <= excluded.expires_at - $3 * interval '1 millisecond'
        THEN greatest(l.fencing_token + 1, excluded.fencing_token) ELSE l.fencing_token END,
    expires_at = CASE WHEN l.token IS NULL OR l.expires_at <= excluded.expires_at - $3 * interval '1 millisecond'
        THEN excluded.expires_at ELSE l.expires_at END
RETURNING l.token = $2, l.fencing_token,
    greatest(0, ceil(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000))::int8";

/// Extend the lease `$2` of `$1` in `$table` (its token in column `$token`) to `$3` ms from
/// now, if it has not ended: that lease's own row, no other holder's expiry moves.
macro_rules! extend_one {
    ($table:literal, $token:literal) => {
        concat!(
            "UPDATE ",
            $table,
            " SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'\n",
            "WHERE name = $1 AND ",
            $token,
            " = $2 AND expires_at > clock_timestamp()\n",
            "RETURNING 1"
        )
    };
}

/// Extend many leases of `$table` in one statement: the `i`-th of names `$1`, tokens `$2` to
/// `$3[i]` ms from now, each only if its lease has not ended. Returns the (name, token) of each
/// lease extended. (The watchdog renews every lease due at one moment through it: 10,000 held
/// leases cost a handful of statements per period, not 10,000.)
macro_rules! extend_many {
    ($table:literal, $token:literal) => {
        concat!(
            "UPDATE ",
            $table,
            " AS l\n",
            "SET expires_at = clock_timestamp() + x.ttl_ms * interval '1 millisecond'\n",
            "FROM unnest($1::text[], $2::text[], $3::int8[]) AS x(name, token, ttl_ms)\n",
            "WHERE l.name = x.name AND l.",
            $token,
            " = x.token AND l.expires_at > clock_timestamp()\n",
            "RETURNING l.name, l.",
            $token
        )
    };
}

/// The table a lease of each kind lives in, so extends (one or a batch) go to the right one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// Every table, in the order a batch extends them.
    pub(crate) const ALL: [LeaseTable; 4] = [
        LeaseTable::Leases,
        LeaseTable::Writers,
        LeaseTable::Readers,
        LeaseTable::Permits,
    ];

    /// Where a lease of `kind` lives.
    pub(crate) fn of(kind: Kind) -> Self {
        match kind {
            Kind::Read { .. } => Self::Readers,
            Kind::Write { .. } => Self::Writers,
            Kind::Semaphore { .. } => Self::Permits,
            _ => Self::Leases,
        }
    }

    /// Extend one lease: `$1` name, `$2` token, `$3` TTL in ms; a row when extended.
    pub(crate) fn extend(self) -> &'static str {
        match self {
            Self::Leases => extend_one!("distlock_leases", "token"),
            Self::Writers => extend_one!("distlock_rw", "writer"),
            Self::Readers => extend_one!("distlock_rw_readers", "token"),
            Self::Permits => extend_one!("distlock_permits", "token"),
        }
    }

    /// Extend a batch: `$1` names, `$2` tokens, `$3` TTLs in ms; a (name, token) row for each
    /// lease extended.
    pub(crate) fn extend_many(self) -> &'static str {
        match self {
            Self::Leases => extend_many!("distlock_leases", "token"),
            Self::Writers => extend_many!("distlock_rw", "writer"),
            Self::Readers => extend_many!("distlock_rw_readers", "token"),
            Self::Permits => extend_many!("distlock_permits", "token"),
        }
    }
}

/// Release `$1` held by `$2`, if its lease has not ended, and announce it on `$3` in the same
/// transaction (delivered when it commits). The row stays, token null, for the fencing counter.
pub(crate) const RELEASE: &str = "\
WITH released AS (
    UPDATE distlock_leases SET token = NULL, expires_at = clock_timestamp()
    WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()
    RETURNING name
)
SELECT pg_notify($3, released.name)::text FROM released";

/// Pass `$1` from `$2` to `$3` for `$4` ms with a fresh fencing token, if `$2`'s lease has not
/// ended.
pub(crate) const HAND_OVER: &str = "\
UPDATE distlock_leases SET
    token = $3,
    expires_at = clock_timestamp() + $4 * interval '1 millisecond',
    fencing_token = greatest(fencing_token + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::int8)
WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()
RETURNING fencing_token";

/// The connectivity check.
pub(crate) const PING: &str = "SELECT 1";

/// `LISTEN` on the release and turn channels (one simple query, one round trip).
pub(crate) const LISTEN: &str = "LISTEN distlock_released; LISTEN distlock_turn";

/// Advisory mode: try to take the session lock `$1` and, only if taken, set the session's
/// `idle_session_timeout` to `$2` ms, in one statement. `MATERIALIZED` makes the lock call run
/// exactly once, before the test of its answer. Returns whether it was taken and the session's
/// server process.
pub(crate) const ADVISORY_ACQUIRE: &str = "\
WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock($1) AS got)
SELECT got, pg_backend_pid(),
    CASE WHEN got THEN set_config('idle_session_timeout', $2, false) END
FROM l";

/// Advisory mode: the heartbeat of a held session, which sets its `idle_session_timeout` to
/// `$1` ms. Returns the session's server process.
pub(crate) const ADVISORY_HEARTBEAT: &str =
    "SELECT pg_backend_pid(), set_config('idle_session_timeout', $1, false)";

/// Advisory mode: release the session lock `$1` and set `idle_session_timeout` back to `$2`,
/// the value sessions start with (read once per lock with [`ADVISORY_IDLE_DEFAULT`]), so the
/// connection can go back to the pool. Returns `pg_advisory_unlock`'s answer and the
/// session's server process. (Reading the value from `pg_settings` here instead cost the
/// server ~260 µs per release: the view builds a row for every setting.)
pub(crate) const ADVISORY_RELEASE: &str = "\
WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS released)
SELECT u.released, pg_backend_pid(), set_config('idle_session_timeout', $2, false)
FROM u";

/// Advisory mode: the `idle_session_timeout` a fresh session of the pool starts with (null on a
/// server without it), and `version()`, which names a look-alike database.
pub(crate) const ADVISORY_IDLE_DEFAULT: &str =
    "SELECT current_setting('idle_session_timeout', true), version()";

/// `version()`, which names a look-alike database (the listener asks it before `LISTEN`).
pub(crate) const VERSION: &str = "SELECT version()";

/// Advisory mode: the server's version, as a number (140000 for 14.0), and `version()`, which
/// names a look-alike database.
pub(crate) const ADVISORY_VERSION: &str =
    "SELECT current_setting('server_version_num')::int4, version()";
