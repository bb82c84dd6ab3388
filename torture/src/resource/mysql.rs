//! The fenced log of the MySQL / MariaDB scenarios: a table on a MariaDB of its own (no fault
//! touches it), each entry inserted in a transaction whose first statement is the fence
//! `CALL distlock_fence(resource, token)` that `MysqlLock::migrate` installs.
//!
//! The transaction is begun on a pool (of one connection), not on a bare connection: a worker
//! whose lease is lost mid-write drops it, and sqlx then only *queues* the rollback, which a
//! bare connection sends at its next use — until then the fence's record row stays locked
//! and every successor's fenced write waits on it (up to `innodb_lock_wait_timeout`, 50 s).
//! A pool connection sends the rollback as it goes back to its pool, at once.

use std::time::Duration;

use distlock::mysql::sqlx::mysql::MySqlPoolOptions;
use distlock::mysql::sqlx::{self, Connection, MySqlConnection, MySqlPool, Row};
use distlock::mysql::{MysqlLock, fence};
use distlock::{Guard, LockError, Op};

/// The log: every accepted write's `"TOKEN WORKER"`. The fence's record row stays locked
/// until the writing transaction ends, so fenced inserts are serialized and `seq` follows
/// their commit order.
const CREATE: &str = "CREATE TABLE IF NOT EXISTS torture_accepted \
                      (seq BIGINT AUTO_INCREMENT PRIMARY KEY, entry VARCHAR(64) NOT NULL) \
                      ENGINE=InnoDB";
const INSERT: &str = "INSERT INTO torture_accepted (entry) VALUES (?)";
const SELECT: &str = "SELECT entry FROM torture_accepted ORDER BY seq";

/// A worker's fenced log on MariaDB.
pub(super) struct MysqlLog {
    pool: MySqlPool,
}

impl MysqlLog {
    /// Connects to the resource's MariaDB (`url`).
    pub(super) async fn connect(url: &str) -> Result<MysqlLog, String> {
        let pool = MySqlPoolOptions::new()
            .max_connections(1)
            .connect(url)
            .await
            .map_err(|e| format!("the resource's MariaDB: {e}"))?;
        Ok(MysqlLog { pool })
    }

    /// Inserts `entry` in a transaction fenced by `guard` (its lock name and token); a stale
    /// token is `LockError::Fenced` and the transaction rolls back.
    pub(super) async fn append(&mut self, guard: &Guard, entry: &str) -> Result<(), LockError> {
        let mut tx = self.pool.begin().await.map_err(backend)?;
        fence(&mut tx, &guard.fence()).await?;
        sqlx::query(INSERT)
            .bind(entry)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    /// Inserts `entry` with no fence (the broken variant `Misbehave::Unfenced`).
    pub(super) async fn append_unfenced(&mut self, entry: &str) -> Result<(), String> {
        sqlx::query(INSERT)
            .bind(entry)
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// Installs the fence (the lock's migration) and creates the log table.
pub(super) async fn prepare(url: &str) -> Result<(), String> {
    // Setup, not the run: 10 s per statement.
    let lock = MysqlLock::builder()
        .url(url)
        .connect_timeout(Duration::from_secs(10))
        .statement_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    lock.migrate().await.map_err(|e| e.to_string())?;
    let mut conn = connect(url).await?;
    sqlx::query(CREATE)
        .execute(&mut conn)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The log's entries, read at the end of a run.
pub(super) async fn entries(url: &str) -> Result<Vec<String>, String> {
    let mut conn = connect(url).await?;
    let rows = sqlx::query(SELECT)
        .fetch_all(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    rows.iter()
        .map(|row| row.try_get::<String, _>(0).map_err(|e| e.to_string()))
        .collect()
}

/// A connection of its own.
async fn connect(url: &str) -> Result<MySqlConnection, String> {
    MySqlConnection::connect(url)
        .await
        .map_err(|e| format!("the resource's MariaDB: {e}"))
}

fn backend(e: sqlx::Error) -> LockError {
    LockError::Backend {
        backend: "mysql",
        op: Op::Write,
        retryable: true,
        source: Box::new(e),
    }
}
