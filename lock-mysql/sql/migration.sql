-- distlock's lease table on MySQL (>= 8.0.29) / MariaDB (>= 10.6), schema version 3.
-- Idempotent: every statement can run again on a database that has the schema. Each statement
-- ends with a semicolon at the end of its line (`MysqlLock::migrate` splits the text there),
-- but for the procedure, which runs from its `CREATE PROCEDURE` line to the line `END;` (in
-- the `mysql` client, wrap it in `DELIMITER //` ... `END//`).
--
-- Every time is an integer of microseconds since the Unix epoch on the SERVER's clock
-- (`UNIX_TIMESTAMP(NOW(6)) * 1000000`), never the client's: one clock decides every expiry.
-- Names are compared byte for byte (VARBINARY), tokens are 32 lowercase hex characters.
-- `granted_at` (schema version 3) is when the holder of the row was granted its lease, set by
-- the grant's own statement (what an operator's `distlock ls` shows as "held since").

-- The mutex (and the fair lock's lease): one row per name ever taken. A released row is kept
-- (token NULL) so that the name's next fencing token follows its last one.
CREATE TABLE IF NOT EXISTS distlock_leases (
    name          VARBINARY(1024) NOT NULL PRIMARY KEY,
    token         CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
    fencing_token BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    granted_at    BIGINT NULL
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
    expires_at    BIGINT NOT NULL,
    granted_at    BIGINT NULL
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS distlock_rw_readers (
    name       VARBINARY(1024) NOT NULL,
    token      CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    expires_at BIGINT NOT NULL,
    granted_at BIGINT NULL,
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
    granted_at BIGINT NULL,
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

-- Guarded writes (schema version 2): per fenced resource, the largest fencing token it
-- accepted. `CALL distlock_fence(resource, token)` as the first statement of the transaction
-- of a write: it admits the write iff the token is >= the record (equal is accepted: one holder
-- writes many times under one grant), raises the record to it, and keeps the record's row
-- locked until the transaction ends; a smaller token is refused with SQLSTATE 'DL409', whose
-- message starts `token=<token> current=<record>`, and nothing of the write applies once the
-- caller rolls back. Bad input (an empty or NULL resource, a NULL token) is SQLSTATE '22023'.
CREATE TABLE IF NOT EXISTS distlock_fences (
    resource   VARBINARY(1024) NOT NULL PRIMARY KEY,
    token      BIGINT UNSIGNED NOT NULL,
    updated_at BIGINT NOT NULL
) ENGINE = InnoDB;

CREATE PROCEDURE IF NOT EXISTS distlock_fence(IN p_resource VARBINARY(1024), IN p_token BIGINT UNSIGNED)
MODIFIES SQL DATA
BEGIN
    DECLARE v_current BIGINT UNSIGNED;
    DECLARE v_refusal VARCHAR(128);
    IF p_resource IS NULL OR LENGTH(p_resource) = 0 OR p_token IS NULL THEN
        SIGNAL SQLSTATE '22023'
            SET MESSAGE_TEXT = 'distlock_fence: the resource must be a non-empty name and the token a number';
    END IF;
    INSERT INTO distlock_fences (resource, token, updated_at)
    VALUES (p_resource, p_token, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED))
    ON DUPLICATE KEY UPDATE updated_at = updated_at;
    SELECT token INTO v_current FROM distlock_fences WHERE resource = p_resource FOR UPDATE;
    IF v_current > p_token THEN
        SET v_refusal = LEFT(CONCAT('token=', p_token, ' current=', v_current,
            ' refused by distlock_fence for resource ', CONVERT(p_resource USING utf8mb4)), 128);
        SIGNAL SQLSTATE 'DL409' SET MESSAGE_TEXT = v_refusal;
    END IF;
    UPDATE distlock_fences
    SET token = p_token, updated_at = CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)
    WHERE resource = p_resource;
END;

-- Schema version 3: the holders' `granted_at`, added here to tables an earlier version created
-- (MySQL has no `ADD COLUMN IF NOT EXISTS`). A grant by a client of an earlier version leaves
-- the column as it was: upgrade the clients with the schema.
CREATE PROCEDURE IF NOT EXISTS distlock_upgrade_v3()
MODIFIES SQL DATA
BEGIN
    -- A concurrent migration added the column first (duplicate column): nothing left to do.
    DECLARE CONTINUE HANDLER FOR 1060 BEGIN END;
    IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()
            AND TABLE_NAME = 'distlock_leases' AND COLUMN_NAME = 'granted_at') THEN
        ALTER TABLE distlock_leases ADD COLUMN granted_at BIGINT NULL;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()
            AND TABLE_NAME = 'distlock_rw' AND COLUMN_NAME = 'granted_at') THEN
        ALTER TABLE distlock_rw ADD COLUMN granted_at BIGINT NULL;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()
            AND TABLE_NAME = 'distlock_rw_readers' AND COLUMN_NAME = 'granted_at') THEN
        ALTER TABLE distlock_rw_readers ADD COLUMN granted_at BIGINT NULL;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()
            AND TABLE_NAME = 'distlock_permits' AND COLUMN_NAME = 'granted_at') THEN
        ALTER TABLE distlock_permits ADD COLUMN granted_at BIGINT NULL;
    END IF;
END;

CALL distlock_upgrade_v3();

CREATE TABLE IF NOT EXISTS distlock_schema (
    one     TINYINT NOT NULL PRIMARY KEY,
    version INT NOT NULL
) ENGINE = InnoDB;

INSERT INTO distlock_schema (one, version) VALUES (1, 3)
ON DUPLICATE KEY UPDATE version = GREATEST(version, VALUES(version));
