-- distlock's schema on PostgreSQL, version 5: the lease table (version 1), the tables and
-- functions of the read-write lock, the semaphore and the fair lock (version 2), the notes
-- beside a grant (version 3), the fence of guarded writes, `distlock_fence` (version 4), and
-- when each holder was granted its lock, `granted_at` (version 5).
--
-- Idempotent: run it on an empty database, or over version 1, 2, 3 or 4 (an existing
-- `distlock_leases` and every lease in it are kept), or again. `PostgresLock::migrate()` runs it; so can your
-- migration tool (it is `lock_postgres::MIGRATION`).
--
-- Every function below is one statement for the client, so each lock operation stays one round
-- trip. Each first locks the name's anchor row (`FOR UPDATE`): the operations on one name take
-- turns, and because a VOLATILE function takes a fresh snapshot for each statement (READ
-- COMMITTED, the default), every check after that lock sees what the previous turn committed.
-- (A single plain statement could not: its snapshot is taken before it waits for the row.)
-- Time is read from the server's clock only (`clock_timestamp()`), expired rows of the name are
-- pruned by the statements themselves, and tokens are bind parameters, never spliced into SQL.

-- Concurrent migrations of one database take turns (`CREATE ... IF NOT EXISTS` may otherwise
-- collide in the catalog). Held until the end of the migration's transaction.
SELECT pg_advisory_xact_lock(2036427890);

-- Version 1: the mutex (and the fair lock's holder): one row per lock name ever taken.
CREATE TABLE IF NOT EXISTS distlock_leases (
    name          text        PRIMARY KEY,
    token         text,
    fencing_token bigint      NOT NULL,
    expires_at    timestamptz NOT NULL
);

-- Which version of this schema the database has.
CREATE TABLE IF NOT EXISTS distlock_schema (
    one     boolean PRIMARY KEY DEFAULT true CHECK (one),
    version int4    NOT NULL
);

-- The read-write lock `name`: its writer (one row per name, also the anchor the operations of
-- the name lock) and the last write's fencing token, which readers carry.
CREATE TABLE IF NOT EXISTS distlock_rw (
    name          text        PRIMARY KEY,
    writer        text,
    expires_at    timestamptz NOT NULL,
    fencing_token bigint      NOT NULL
);

-- Its readers: a row per reader, each with its own token and expiry.
CREATE TABLE IF NOT EXISTS distlock_rw_readers (
    name       text        NOT NULL,
    token      text        NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (name, token)
);

-- Its waiting writers (writer preference): a record per writer, lapsing unless renewed.
CREATE TABLE IF NOT EXISTS distlock_rw_waiting (
    name      text        NOT NULL,
    token     text        NOT NULL,
    lapses_at timestamptz NOT NULL,
    PRIMARY KEY (name, token)
);

-- The semaphore `name`: its permit count (the anchor row).
CREATE TABLE IF NOT EXISTS distlock_semaphores (
    name text PRIMARY KEY,
    max  int4 NOT NULL
);

-- Its holders: a row per holder, with the permits it holds and its own expiry.
CREATE TABLE IF NOT EXISTS distlock_permits (
    name       text        NOT NULL,
    token      text        NOT NULL,
    permits    int4        NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (name, token)
);

-- The fair lock `name` is the mutex `name` (its row in distlock_leases, the anchor) with a
-- queue of waiters in arrival order, each entry lapsing unless its waiter tries again.
CREATE TABLE IF NOT EXISTS distlock_fair_queue (
    name      text        NOT NULL,
    token     text        NOT NULL,
    arrival   bigint      GENERATED ALWAYS AS IDENTITY,
    lapses_at timestamptz NOT NULL,
    PRIMARY KEY (name, token)
);
CREATE INDEX IF NOT EXISTS distlock_fair_queue_order ON distlock_fair_queue (name, arrival);

-- Version 5: when each holder was granted its lock (server clock), set by the grant itself,
-- for operators (`distlock ls`: "held since"). Null for a grant made before the upgrade. The
-- columns are added without a default, so no table is rewritten and no held lease gets a false
-- date; the defaults below apply to rows inserted from now on.
ALTER TABLE distlock_leases ADD COLUMN IF NOT EXISTS granted_at timestamptz;
ALTER TABLE distlock_rw ADD COLUMN IF NOT EXISTS granted_at timestamptz;
ALTER TABLE distlock_rw_readers ADD COLUMN IF NOT EXISTS granted_at timestamptz;
ALTER TABLE distlock_permits ADD COLUMN IF NOT EXISTS granted_at timestamptz;
ALTER TABLE distlock_leases ALTER COLUMN granted_at SET DEFAULT clock_timestamp();
ALTER TABLE distlock_rw_readers ALTER COLUMN granted_at SET DEFAULT clock_timestamp();
ALTER TABLE distlock_permits ALTER COLUMN granted_at SET DEFAULT clock_timestamp();

-- The mutex's statements are the client's (`lock_postgres`'s `ACQUIRE`, `HAND_OVER`), and a
-- client of an earlier version sends them without the column: a grant of the lease row is
-- dated here instead, in the statement that makes it. Every grant of the row issues a new
-- fencing token (acquire, hand-over, the fair lock, the multi-lock), and nothing else changes
-- it (an extend or a release keeps it), so the new token is what marks a grant; the WHEN clause
-- is evaluated without calling the function.
CREATE OR REPLACE FUNCTION distlock_lease_granted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.granted_at := clock_timestamp();
    RETURN NEW;
END
$$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
        WHERE tgname = 'distlock_leases_granted' AND tgrelid = 'distlock_leases'::regclass) THEN
        CREATE TRIGGER distlock_leases_granted BEFORE UPDATE ON distlock_leases
        FOR EACH ROW WHEN (NEW.fencing_token IS DISTINCT FROM OLD.fencing_token)
        EXECUTE FUNCTION distlock_lease_granted();
    END IF;
END
$$;

-- Milliseconds from now until `t`, at least 0, rounded up.
CREATE OR REPLACE FUNCTION distlock_ms_until(t timestamptz, now_t timestamptz) RETURNS int8
LANGUAGE sql IMMUTABLE AS $$
    SELECT greatest(0, ceil(extract(epoch FROM t - now_t) * 1000))::int8
$$;

-- The fencing token issued at `now_t` after `last`: greater than `last`, and the clock in µs when
-- that is greater (so tokens keep growing even if rows are deleted).
CREATE OR REPLACE FUNCTION distlock_next_fence(last int8, now_t timestamptz) RETURNS int8
LANGUAGE sql IMMUTABLE AS $$
    SELECT greatest(last + 1, (extract(epoch FROM now_t) * 1000000)::int8)
$$;

-- Locks the anchor row of the read-write lock `p_name`, creating it if needed; returns it.
CREATE OR REPLACE FUNCTION distlock_rw_anchor(p_name text) RETURNS distlock_rw
LANGUAGE plpgsql AS $$
DECLARE
    rw distlock_rw;
BEGIN
    SELECT * INTO rw FROM distlock_rw WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        -- Never written: the readers' fencing token is the clock in µs, below every later
        -- write's (distlock_next_fence).
        INSERT INTO distlock_rw (name, writer, expires_at, fencing_token)
        VALUES (p_name, NULL, clock_timestamp(), (extract(epoch FROM clock_timestamp()) * 1000000)::int8)
        ON CONFLICT (name) DO NOTHING;
        SELECT * INTO rw FROM distlock_rw WHERE name = p_name FOR UPDATE;
    END IF;
    DELETE FROM distlock_rw_readers WHERE name = p_name AND expires_at <= clock_timestamp();
    DELETE FROM distlock_rw_waiting WHERE name = p_name AND lapses_at <= clock_timestamp();
    RETURN rw;
END
$$;

-- A reader's share of `p_name` for `p_ttl_ms`: granted while no writer holds it and, with
-- `p_writer_preference`, no writer waits. Returns (granted, the last write's fencing token, ms
-- until the blocker may be gone).
CREATE OR REPLACE FUNCTION distlock_read_acquire(
    p_name text, p_token text, p_ttl_ms int8, p_writer_preference boolean,
    OUT granted boolean, OUT fencing_token int8, OUT wait_ms int8)
LANGUAGE plpgsql AS $$
DECLARE
    rw distlock_rw := distlock_rw_anchor(p_name);
    now_t timestamptz := clock_timestamp();
    waiting timestamptz;
BEGIN
    fencing_token := rw.fencing_token;
    IF rw.writer IS NOT NULL AND rw.expires_at > now_t THEN
        granted := false;
        wait_ms := distlock_ms_until(rw.expires_at, now_t);
        RETURN;
    END IF;
    IF p_writer_preference THEN
        SELECT max(w.lapses_at) INTO waiting FROM distlock_rw_waiting w WHERE w.name = p_name;
        IF waiting IS NOT NULL THEN
            granted := false;
            wait_ms := distlock_ms_until(waiting, now_t);
            RETURN;
        END IF;
    END IF;
    -- A reader that holds its share already keeps its grant's date.
    INSERT INTO distlock_rw_readers AS r (name, token, expires_at, granted_at)
    VALUES (p_name, p_token, now_t + p_ttl_ms * interval '1 millisecond', now_t)
    ON CONFLICT (name, token) DO UPDATE SET expires_at = excluded.expires_at;
    granted := true;
    wait_ms := 0;
END
$$;

-- The writer of `p_name` for `p_ttl_ms`: granted while no writer and no reader holds it, with a
-- fresh fencing token. Busy with `p_writer_preference`: the writer's waiting record is added or
-- renewed for `p_ttl_ms`. Returns (granted, fencing token, ms until the holders may be gone).
CREATE OR REPLACE FUNCTION distlock_write_acquire(
    p_name text, p_token text, p_ttl_ms int8, p_writer_preference boolean,
    OUT granted boolean, OUT fencing_token int8, OUT wait_ms int8)
LANGUAGE plpgsql AS $$
DECLARE
    rw distlock_rw := distlock_rw_anchor(p_name);
    now_t timestamptz := clock_timestamp();
    busy timestamptz;
BEGIN
    IF rw.writer IS NOT NULL AND rw.expires_at > now_t THEN
        busy := rw.expires_at;
    ELSE
        SELECT max(r.expires_at) INTO busy FROM distlock_rw_readers r WHERE r.name = p_name;
    END IF;
    IF busy IS NOT NULL THEN
        IF p_writer_preference THEN
            INSERT INTO distlock_rw_waiting AS w (name, token, lapses_at)
            VALUES (p_name, p_token, now_t + p_ttl_ms * interval '1 millisecond')
            ON CONFLICT (name, token) DO UPDATE SET lapses_at = excluded.lapses_at;
        END IF;
        granted := false;
        wait_ms := distlock_ms_until(busy, now_t);
        RETURN;
    END IF;
    DELETE FROM distlock_rw_waiting w WHERE w.name = p_name AND w.token = p_token;
    UPDATE distlock_rw r
    SET writer = p_token,
        expires_at = now_t + p_ttl_ms * interval '1 millisecond',
        fencing_token = distlock_next_fence(r.fencing_token, now_t),
        granted_at = now_t
    WHERE r.name = p_name
    RETURNING r.fencing_token INTO fencing_token;
    granted := true;
    wait_ms := 0;
END
$$;

-- Ends a reader's share (`p_writer` false) or the writer's lock, or withdraws a waiting
-- writer's record (`p_writer` true), announcing on `p_channel` what may let waiters in: the
-- last reader leaving, the writer leaving, the last waiting writer withdrawing. Returns whether
-- the lease was ours (nothing of another holder is touched).
CREATE OR REPLACE FUNCTION distlock_rw_release(
    p_name text, p_token text, p_writer boolean, p_channel text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    rw distlock_rw := distlock_rw_anchor(p_name);
    now_t timestamptz := clock_timestamp();
    ours boolean := false;
    announce boolean := false;
BEGIN
    IF NOT p_writer THEN
        DELETE FROM distlock_rw_readers r WHERE r.name = p_name AND r.token = p_token;
        ours := FOUND;
        announce := ours AND NOT EXISTS (SELECT 1 FROM distlock_rw_readers r WHERE r.name = p_name);
    ELSE
        DELETE FROM distlock_rw_waiting w WHERE w.name = p_name AND w.token = p_token;
        announce := FOUND AND NOT EXISTS (SELECT 1 FROM distlock_rw_waiting w WHERE w.name = p_name);
        IF rw.writer = p_token AND rw.expires_at > now_t THEN
            UPDATE distlock_rw r SET writer = NULL, expires_at = now_t WHERE r.name = p_name;
            ours := true;
            announce := true;
        END IF;
    END IF;
    IF announce THEN
        PERFORM pg_notify(p_channel, p_name);
    END IF;
    RETURN ours;
END
$$;

-- `p_permits` of the `p_max` permits of the semaphore `p_name` for `p_ttl_ms`, all or none.
-- A semaphore nobody holds takes this request's max. Returns (status, wait_ms, max): status 1
-- granted; 0 busy, with ms until the soonest holder's expiry; -1 when holders use another max
-- (returned), nothing changed.
CREATE OR REPLACE FUNCTION distlock_semaphore_acquire(
    p_name text, p_token text, p_permits int4, p_max int4, p_ttl_ms int8,
    OUT status int4, OUT wait_ms int8, OUT held_max int4)
LANGUAGE plpgsql AS $$
DECLARE
    now_t timestamptz;
    used int8;
    holders int8;
    soonest timestamptz;
BEGIN
    SELECT s.max INTO held_max FROM distlock_semaphores s WHERE s.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO distlock_semaphores (name, max) VALUES (p_name, p_max)
        ON CONFLICT (name) DO NOTHING;
        SELECT s.max INTO held_max FROM distlock_semaphores s WHERE s.name = p_name FOR UPDATE;
    END IF;
    now_t := clock_timestamp();
    DELETE FROM distlock_permits p WHERE p.name = p_name AND p.expires_at <= now_t;
    SELECT coalesce(sum(p.permits), 0), count(*), min(p.expires_at) INTO used, holders, soonest
    FROM distlock_permits p WHERE p.name = p_name AND p.token <> p_token;
    IF holders = 0 THEN
        IF held_max <> p_max THEN
            UPDATE distlock_semaphores s SET max = p_max WHERE s.name = p_name;
            held_max := p_max;
        END IF;
    ELSIF held_max <> p_max THEN
        status := -1;
        wait_ms := 0;
        RETURN;
    END IF;
    IF used + p_permits > held_max THEN
        status := 0;
        wait_ms := distlock_ms_until(soonest, now_t);
        RETURN;
    END IF;
    -- A holder that holds permits already keeps its grant's date.
    INSERT INTO distlock_permits AS p (name, token, permits, expires_at, granted_at)
    VALUES (p_name, p_token, p_permits, now_t + p_ttl_ms * interval '1 millisecond', now_t)
    ON CONFLICT (name, token) DO UPDATE SET permits = excluded.permits, expires_at = excluded.expires_at;
    status := 1;
    wait_ms := 0;
END
$$;

-- Locks the mutex row of `p_name` (the fair lock's anchor), creating a free one if needed, and
-- drops the queue entries that lapsed; returns the row.
CREATE OR REPLACE FUNCTION distlock_fair_anchor(p_name text) RETURNS distlock_leases
LANGUAGE plpgsql AS $$
DECLARE
    l distlock_leases;
BEGIN
    SELECT * INTO l FROM distlock_leases WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO distlock_leases (name, token, fencing_token, expires_at)
        VALUES (p_name, NULL, 0, clock_timestamp())
        ON CONFLICT (name) DO NOTHING;
        SELECT * INTO l FROM distlock_leases WHERE name = p_name FOR UPDATE;
    END IF;
    DELETE FROM distlock_fair_queue q WHERE q.name = p_name AND q.lapses_at <= clock_timestamp();
    RETURN l;
END
$$;

-- The fair lock `p_name` for `p_ttl_ms`: the mutex, granted only to the head of the queue (or
-- to anyone when nobody queues). Busy with `p_entry_ms` > 0, the waiter takes or keeps its
-- place, its entry lasting `p_entry_ms`; 0 is a single try that leaves nothing behind. Returns
-- (granted, fencing token, ms until the holder's lease ends or the head's entry lapses).
CREATE OR REPLACE FUNCTION distlock_fair_acquire(
    p_name text, p_token text, p_ttl_ms int8, p_entry_ms int8,
    OUT granted boolean, OUT fencing_token int8, OUT wait_ms int8)
LANGUAGE plpgsql AS $$
DECLARE
    l distlock_leases := distlock_fair_anchor(p_name);
    now_t timestamptz := clock_timestamp();
    head text;
    head_lapses timestamptz;
BEGIN
    SELECT q.token, q.lapses_at INTO head, head_lapses FROM distlock_fair_queue q
    WHERE q.name = p_name ORDER BY q.arrival LIMIT 1;
    IF head IS NULL OR head = p_token THEN
        IF l.token IS NULL OR l.expires_at <= now_t THEN
            UPDATE distlock_leases m
            SET token = p_token,
                expires_at = now_t + p_ttl_ms * interval '1 millisecond',
                fencing_token = distlock_next_fence(m.fencing_token, now_t)
            WHERE m.name = p_name
            RETURNING m.fencing_token INTO fencing_token;
            DELETE FROM distlock_fair_queue q WHERE q.name = p_name AND q.token = p_token;
            granted := true;
            wait_ms := 0;
            RETURN;
        END IF;
        wait_ms := distlock_ms_until(l.expires_at, now_t);
    ELSE
        wait_ms := distlock_ms_until(head_lapses, now_t);
    END IF;
    IF p_entry_ms > 0 THEN
        INSERT INTO distlock_fair_queue AS q (name, token, lapses_at)
        VALUES (p_name, p_token, now_t + p_entry_ms * interval '1 millisecond')
        ON CONFLICT (name, token) DO UPDATE SET lapses_at = excluded.lapses_at;
    END IF;
    granted := false;
END
$$;

-- Releases the fair lock `p_name` if `p_token` holds it, or withdraws `p_token`'s place in the
-- queue, and tells the queue's new head alone (on `p_turn_channel`, payload its token) that its
-- turn may have come; with nobody queued, a release is announced on `p_channel` as a mutex's.
-- Returns whether the lock was `p_token`'s.
CREATE OR REPLACE FUNCTION distlock_fair_release(
    p_name text, p_token text, p_channel text, p_turn_channel text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    l distlock_leases := distlock_fair_anchor(p_name);
    now_t timestamptz := clock_timestamp();
    head text;
    was_head boolean;
    ours boolean := l.token = p_token AND l.expires_at > now_t;
BEGIN
    SELECT q.token INTO head FROM distlock_fair_queue q
    WHERE q.name = p_name ORDER BY q.arrival LIMIT 1;
    was_head := head = p_token;
    DELETE FROM distlock_fair_queue q WHERE q.name = p_name AND q.token = p_token;
    IF ours THEN
        UPDATE distlock_leases m SET token = NULL, expires_at = now_t WHERE m.name = p_name;
    END IF;
    IF ours OR coalesce(was_head, false) THEN
        SELECT q.token INTO head FROM distlock_fair_queue q
        WHERE q.name = p_name ORDER BY q.arrival LIMIT 1;
        IF head IS NOT NULL THEN
            PERFORM pg_notify(p_turn_channel, head);
        ELSIF ours THEN
            PERFORM pg_notify(p_channel, p_name);
        END IF;
    END IF;
    RETURN coalesce(ours, false);
END
$$;

-- The mutexes `p_names` (distinct) for `p_ttl_ms`, all or none, with one fencing token each.
-- Their rows are created if needed and locked in one global order (sorted), so two multi-locks
-- over overlapping names never wait for each other in a cycle. Returns (granted, the index in
-- `p_names` (from 1) of the first busy name, ms until its holder's lease ends, the fencing
-- tokens in the order of `p_names`).
CREATE OR REPLACE FUNCTION distlock_multi_acquire(
    p_names text[], p_token text, p_ttl_ms int8,
    OUT granted boolean, OUT busy_index int4, OUT wait_ms int8, OUT fencing_tokens int8[])
LANGUAGE plpgsql AS $$
DECLARE
    now_t timestamptz;
    busy record;
BEGIN
    INSERT INTO distlock_leases (name, token, fencing_token, expires_at)
    SELECT n, NULL, 0, clock_timestamp() FROM unnest(p_names) AS n ORDER BY n
    ON CONFLICT (name) DO NOTHING;
    PERFORM 1 FROM distlock_leases m WHERE m.name = ANY (p_names) ORDER BY m.name FOR UPDATE;
    now_t := clock_timestamp();
    SELECT n.i, m.expires_at INTO busy
    FROM unnest(p_names) WITH ORDINALITY AS n(name, i)
    JOIN distlock_leases m ON m.name = n.name
    WHERE m.token IS NOT NULL AND m.expires_at > now_t
    ORDER BY n.i LIMIT 1;
    IF FOUND THEN
        granted := false;
        busy_index := busy.i;
        wait_ms := distlock_ms_until(busy.expires_at, now_t);
        RETURN;
    END IF;
    WITH taken AS (
        UPDATE distlock_leases m
        SET token = p_token,
            expires_at = now_t + p_ttl_ms * interval '1 millisecond',
            fencing_token = distlock_next_fence(m.fencing_token, now_t)
        WHERE m.name = ANY (p_names)
        RETURNING m.name, m.fencing_token
    )
    SELECT array_agg(t.fencing_token ORDER BY n.i) INTO fencing_tokens
    FROM unnest(p_names) WITH ORDINALITY AS n(name, i) JOIN taken t ON t.name = n.name;
    granted := true;
    busy_index := 0;
    wait_ms := 0;
END
$$;

-- Version 3: a note beside a mutex's grant (leader election's value and time), one row per
-- name, for the token that wrote it: shown only while that token holds the name
-- (`distlock_leases`), so a later grant never shows an earlier grant's note; the next note
-- overwrites it. The lease row itself is unchanged.
CREATE TABLE IF NOT EXISTS distlock_notes (
    name  text  PRIMARY KEY,
    token text  NOT NULL,
    note  bytea NOT NULL
);

-- Version 4: the fence of guarded writes. One row per fenced resource: the largest fencing
-- token it has accepted. `distlock_fence(resource, token)`, called inside the transaction of
-- the write it guards, admits the write iff `token >= ` the record (equal is accepted: one
-- holder writes many times), raises the record to `token` and keeps the row locked until that
-- transaction ends; a smaller token raises SQLSTATE DL409 and the caller's transaction aborts,
-- so nothing of the stale write applies. Any client in any language:
--     BEGIN; SELECT distlock_fence('acct', 42); UPDATE ...; COMMIT;
-- Tokens are numeric (integers in 0 ..= 2^64 - 1) so that every backend's tokens fit: u64
-- (Redis, the lease table), etcd revisions.
CREATE TABLE IF NOT EXISTS distlock_fences (
    resource   text        PRIMARY KEY,
    token      numeric     NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE OR REPLACE FUNCTION distlock_fence(resource text, token numeric) RETURNS numeric
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    recorded numeric;
BEGIN
    IF distlock_fence.resource IS NULL OR distlock_fence.resource = '' THEN
        RAISE EXCEPTION 'distlock_fence: the resource name is empty'
            USING ERRCODE = '22023', HINT = 'Fence a resource by its lock name.';
    END IF;
    IF distlock_fence.token IS NULL OR distlock_fence.token < 0
        OR distlock_fence.token <> trunc(distlock_fence.token)
        OR distlock_fence.token > 18446744073709551615 THEN
        RAISE EXCEPTION 'distlock_fence: token % of resource % is not an integer in 0 ..= 18446744073709551615',
            coalesce(distlock_fence.token::text, 'NULL'), quote_literal(distlock_fence.resource)
            USING ERRCODE = '22023', HINT = 'Pass the grant''s fencing token.';
    END IF;
    -- Insert the record, or raise it when the token is not smaller. A row that does not pass
    -- the WHERE is still locked by ON CONFLICT DO UPDATE, and one that does is updated: either
    -- way it stays locked until the caller's transaction ends, so a concurrent fence of the
    -- resource waits for that commit (READ COMMITTED then rechecks the committed record).
    INSERT INTO distlock_fences AS f (resource, token, updated_at)
    VALUES (distlock_fence.resource, trunc(distlock_fence.token), clock_timestamp())
    ON CONFLICT ON CONSTRAINT distlock_fences_pkey DO UPDATE
        SET token = excluded.token, updated_at = excluded.updated_at
        WHERE f.token <= excluded.token
    RETURNING f.token INTO recorded;
    IF FOUND THEN
        RETURN recorded;  -- the token, scale 0 (`1.0` is recorded and returned as `1`)
    END IF;
    -- Refused: this statement's fresh snapshot sees the record that refused it (committed, or
    -- our own transaction's).
    SELECT f.token INTO recorded FROM distlock_fences f WHERE f.resource = distlock_fence.resource;
    RAISE EXCEPTION 'distlock_fence: stale token % for resource %: it has accepted token %',
        distlock_fence.token, quote_literal(distlock_fence.resource), recorded
        USING ERRCODE = 'DL409',
            DETAIL = format('token=%s current=%s resource=%s',
                distlock_fence.token, recorded, distlock_fence.resource),
            HINT = 'A newer holder of the lock has written: this holder''s lease has ended.';
END
$$;

INSERT INTO distlock_schema (version) VALUES (5)
ON CONFLICT (one) DO UPDATE SET version = greatest(distlock_schema.version, excluded.version);
