-- distlock's lease table on MySQL (>= 8.0) / MariaDB (>= 10.6), schema version 1.
-- Idempotent: every statement can run again on a database that has the schema. Each statement
-- ends with a semicolon at the end of its line (`MysqlLock::migrate` splits the text there).
--
-- Every time is an integer of microseconds since the Unix epoch on the SERVER's clock
-- (`UNIX_TIMESTAMP(NOW(6)) * 1000000`), never the client's: one clock decides every expiry.
-- Names are compared byte for byte (VARBINARY), tokens are 32 lowercase hex characters.

-- The mutex (and the fair lock's lease): one row per name ever taken. A released row is kept
-- (token NULL) so that the name's next fencing token follows its last one.
CREATE TABLE IF NOT EXISTS distlock_leases (
    name          VARBINARY(1024) NOT NULL PRIMARY KEY,
    token         CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
    fencing_token BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL
) ENGINE = InnoDB;

-- A note beside a mutex's grant (leader election's value), shown only while `token` holds it.
CREATE TABLE IF NOT EXISTS distlock_notes (
    name  VARBINARY(1024) NOT NULL PRIMARY KEY,
    token CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    note  MEDIUMBLOB NOT NULL
) ENGINE = InnoDB;

-- The read-write lock: the writer and the last write's fencing token (the anchor row, locked
-- by every decision on the name), a row per reader, a record per waiting writer.
CREATE TABLE IF NOT EXISTS distlock_rw (
    name          VARBINARY(1024) NOT NULL PRIMARY KEY,
    writer        CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
    fencing_token BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS distlock_rw_readers (
    name       VARBINARY(1024) NOT NULL,
    token      CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (name, token)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS distlock_rw_waiting (
    name      VARBINARY(1024) NOT NULL,
    token     CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    lapses_at BIGINT NOT NULL,
    PRIMARY KEY (name, token)
) ENGINE = InnoDB;

-- The semaphore: its permit count (the anchor row) and a row per holder.
CREATE TABLE IF NOT EXISTS distlock_semaphores (
    name VARBINARY(1024) NOT NULL PRIMARY KEY,
    max  INT NOT NULL
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS distlock_permits (
    name       VARBINARY(1024) NOT NULL,
    token      CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    permits    INT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (name, token)
) ENGINE = InnoDB;

-- The fair lock's queue (its lease is the mutex row of the same name): arrival order is the
-- auto-increment id, a waiter keeps its place (and its id) while it renews its entry.
CREATE TABLE IF NOT EXISTS distlock_fair_queue (
    arrival   BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name      VARBINARY(1024) NOT NULL,
    token     CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    lapses_at BIGINT NOT NULL,
    UNIQUE KEY distlock_fair_queue_waiter (name, token)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS distlock_schema (
    one     TINYINT NOT NULL PRIMARY KEY,
    version INT NOT NULL
) ENGINE = InnoDB;

INSERT INTO distlock_schema (one, version) VALUES (1, 1)
ON DUPLICATE KEY UPDATE version = GREATEST(version, VALUES(version));
