//! The hand-written baseline on MySQL / MariaDB: the minimal lease-table lock people write by
//! hand with sqlx, on the same server and client (sqlx's MySQL pool) as `MysqlLock`.
//!
//! One row per name in `hand_locks`; acquire is an `INSERT … ON DUPLICATE KEY UPDATE` that
//! takes the row when its lease expired (the token first, then the expiry, each from the old
//! row), then a `SELECT` of the row's token to learn whether it is ours; release is a
//! `DELETE … WHERE token = ?`. No fencing, no renewal, no kinds.

use std::time::Duration;

use lock_mysql::sqlx::{self, MySqlPool, mysql::MySqlPoolOptions};

/// The table, created by [`HandMysqlLock::connect`].
pub const HAND_TABLE: &str = "CREATE TABLE IF NOT EXISTS hand_locks (
    name VARCHAR(255) NOT NULL PRIMARY KEY,
    token CHAR(32) NOT NULL,
    expires_at DATETIME(6) NOT NULL
) ENGINE = InnoDB";

const ACQUIRE: &str = "INSERT INTO hand_locks (name, token, expires_at)
VALUES (?, ?, NOW(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
    token = IF(expires_at < NOW(6), VALUES(token), token),
    expires_at = IF(token = VALUES(token), VALUES(expires_at), expires_at)";

const OWNER: &str = "SELECT token FROM hand_locks WHERE name = ?";

const RELEASE: &str = "DELETE FROM hand_locks WHERE name = ? AND token = ?";

/// A minimal hand-written MySQL lock over one sqlx pool.
#[derive(Clone, Debug)]
pub struct HandMysqlLock {
    pool: MySqlPool,
}

impl HandMysqlLock {
    /// Connects a pool of `size` connections to `url` and creates the table.
    ///
    /// # Errors
    /// If connecting or creating the table fails.
    pub async fn connect(url: &str, size: u32) -> Result<Self, sqlx::Error> {
        let pool = MySqlPoolOptions::new()
            .max_connections(size)
            .test_before_acquire(false)
            .connect(url)
            .await?;
        sqlx::query(HAND_TABLE).execute(&pool).await?;
        Ok(Self { pool })
    }

    /// One attempt: `Some(token)` if we got it.
    ///
    /// # Errors
    /// Database errors, and a failing OS random source.
    pub async fn try_acquire(
        &self,
        name: &str,
        ttl: Duration,
    ) -> Result<Option<String>, sqlx::Error> {
        let token = crate::handwritten::token()
            .map_err(|e| sqlx::Error::Io(std::io::Error::other(e.to_string())))?;
        let micros = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
        let mut conn = self.pool.acquire().await?;
        sqlx::query(ACQUIRE)
            .bind(name)
            .bind(&token)
            .bind(micros)
            .execute(&mut *conn)
            .await?;
        let owner: Option<String> = sqlx::query_scalar(OWNER)
            .bind(name)
            .fetch_optional(&mut *conn)
            .await?;
        Ok((owner.as_deref() == Some(token.as_str())).then_some(token))
    }

    /// `true` if the row still held `token` and is now deleted.
    ///
    /// # Errors
    /// Database errors.
    pub async fn release(&self, name: &str, token: &str) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(RELEASE)
            .bind(name)
            .bind(token)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
