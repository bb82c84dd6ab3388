//! The server session that holds an advisory lock: its pooled connection, how long it may
//! idle, and how to tell that it is gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::Object;
use lock_core::LockError;

use crate::pool::discard;

/// A connection whose session may hold an advisory lock. Dropped without being marked
/// `clean`, it is closed, not given back to the pool, so the server releases whatever its
/// session holds: the guard behind the cancel safety of every operation.
pub(super) struct HeldSession {
    client: Option<Object>,
    pub(super) key: i64,
    /// `pg_backend_pid()` of the session that took the lock.
    pub(super) pid: i32,
    clean: AtomicBool,
}

impl HeldSession {
    pub(super) fn new(client: Object, key: i64) -> Self {
        Self {
            client: Some(client),
            key,
            pid: 0,
            clean: AtomicBool::new(false),
        }
    }

    pub(super) fn client(&self) -> &Object {
        self.client
            .as_ref()
            .expect("the client is only taken on drop or discard")
    }

    /// Gives the connection back to the pool when dropped: its session holds no lock.
    pub(super) fn mark_clean(&self) {
        self.clean.store(true, Ordering::Release);
    }

    /// Closes the connection after a statement timed out, asking the server to cancel it.
    pub(super) fn discard(mut self, limit: Duration) {
        if let Some(client) = self.client.take() {
            discard(client, limit);
        }
    }
}

impl Drop for HeldSession {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && !*self.clean.get_mut()
        {
            // Detached from the pool and dropped: the connection closes, the session ends.
            drop(Object::take(client));
        }
    }
}

/// Whether a failed statement means the session is gone (closed, terminated, shut down).
pub(super) fn session_gone(err: &tokio_postgres::Error, client: &Object) -> bool {
    err.is_closed()
        || client.is_closed()
        || err
            .code()
            .is_some_and(|code| code.code().starts_with("57P"))
}

/// `idle_session_timeout` for a lease of `ttl_ms`: the TTL plus the statement timeout, in ms.
pub(super) fn idle_timeout(ttl_ms: u64, statement: Duration) -> Result<String, LockError> {
    let ms = u128::from(ttl_ms) + statement.as_millis();
    if ms > i32::MAX as u128 {
        return Err(LockError::invalid(format!(
            "a TTL of {ttl_ms} ms is too long for the advisory mode: its idle_session_timeout \
             (TTL + statement timeout) must stay within {} ms (about 24.8 days)",
            i32::MAX
        )));
    }
    Ok(ms.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_timeout_is_the_ttl_plus_the_statement_timeout() {
        assert_eq!(
            idle_timeout(10_000, Duration::from_millis(500)).expect("fits"),
            "10500"
        );
        assert!(matches!(
            idle_timeout(u64::from(u32::MAX), Duration::from_secs(1)),
            Err(LockError::InvalidInput { .. })
        ));
    }
}
