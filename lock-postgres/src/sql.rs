//! The lease table and the one statement behind each lock operation.
//!
//! Every statement takes the lock name and tokens as bind parameters (never spliced into the
//! text) and reads time only from the server's clock (`clock_timestamp()`).

/// The table every lease lives in.
pub const TABLE: &str = "distlock_leases";

/// The channel every release is announced on (`pg_notify(CHANNEL, name)`).
pub const CHANNEL: &str = "distlock_released";

/// The migration that creates the lease table: run it once per database, before the first lock
/// operation, yourself (with your migration tool) or through
/// [`PostgresLock::migrate`](crate::PostgresLock::migrate). It is idempotent.
///
/// One row per lock name ever taken:
///
/// | column | type | meaning |
/// |---|---|---|
/// | `name` | `text` primary key | the lock name |
/// | `token` | `text`, null when released | the holder's token, 32 hex characters |
/// | `fencing_token` | `bigint` | the last fencing token issued for the name |
/// | `expires_at` | `timestamptz` | when the holder's lease ends, on the server's clock |
///
/// A released row is kept (token null) so the name's next fencing token follows its last one;
/// deleting free rows is safe (see the crate docs on fencing).
pub const MIGRATION: &str = "\
CREATE TABLE IF NOT EXISTS distlock_leases (
    name          text        PRIMARY KEY,
    token         text,
    fencing_token bigint      NOT NULL,
    expires_at    timestamptz NOT NULL
)";

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

/// Extend `$1` held by `$2` to `$3` ms from now, if its lease has not ended.
pub(crate) const EXTEND: &str = "\
UPDATE distlock_leases SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()
RETURNING 1";

/// Extend many leases in one statement: the `i`-th of names `$1`, tokens `$2` to `$3[i]` ms
/// from now, each only if its lease has not ended. Returns the (name, token) of each lease
/// extended. (The watchdog renews every lease due at one moment through it: 10,000 held
/// leases cost a handful of statements per period, not 10,000.)
pub(crate) const EXTEND_MANY: &str = "\
UPDATE distlock_leases AS l
SET expires_at = clock_timestamp() + x.ttl_ms * interval '1 millisecond'
FROM unnest($1::text[], $2::text[], $3::int8[]) AS x(name, token, ttl_ms)
WHERE l.name = x.name AND l.token = x.token AND l.expires_at > clock_timestamp()
RETURNING l.name, l.token";

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

/// `LISTEN` on the release channel.
pub(crate) const LISTEN: &str = "LISTEN distlock_released";

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

/// Advisory mode: the `idle_session_timeout` a fresh session of the pool starts with.
pub(crate) const ADVISORY_IDLE_DEFAULT: &str = "SELECT current_setting('idle_session_timeout')";

/// Advisory mode: the server's version, as a number (140000 for 14.0).
pub(crate) const ADVISORY_VERSION: &str = "SELECT current_setting('server_version_num')::int4";
