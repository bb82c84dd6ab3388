//! The server session that holds a `GET_LOCK` lock: its pooled connection, closed (never given
//! back to the pool) unless it is known to hold nothing.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sqlx::mysql::MySql;
use sqlx::pool::PoolConnection;

/// A connection whose session may hold a session lock. Dropped without being marked clean, it
/// is closed, not given back to the pool, so the server releases whatever its session holds:
/// the guard behind the cancel safety of every operation.
pub(super) struct HeldSession {
    pub(super) conn: tokio::sync::Mutex<Option<PoolConnection<MySql>>>,
    /// The `GET_LOCK` name.
    pub(super) key: String,
    clean: AtomicBool,
    /// The session's `wait_timeout`, in seconds, as the lock last set it.
    idle_s: AtomicU64,
}

impl HeldSession {
    pub(super) fn new(conn: PoolConnection<MySql>, key: String) -> Self {
        Self {
            conn: tokio::sync::Mutex::new(Some(conn)),
            key,
            clean: AtomicBool::new(false),
            idle_s: AtomicU64::new(0),
        }
    }

    /// The session's idle limit as last set, in seconds (0 before the first).
    pub(super) fn idle(&self) -> u64 {
        self.idle_s.load(Ordering::Acquire)
    }

    /// Records the idle limit just set on the session.
    pub(super) fn set_idle(&self, seconds: u64) {
        self.idle_s.store(seconds, Ordering::Release);
    }

    /// Gives the connection back to the pool when dropped: its session holds no lock.
    pub(super) fn mark_clean(&self) {
        self.clean.store(true, Ordering::Release);
    }
}

impl Drop for HeldSession {
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.get_mut().take()
            && !*self.clean.get_mut()
        {
            conn.close_on_drop();
        }
    }
}
