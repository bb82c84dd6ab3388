//! Turning redis-rs and pool errors into [`LockError`]s.

#[cfg(feature = "tls")]
mod certificate;

use std::time::Duration;

use lock_core::{LockError, Op, TimeoutPhase};
use redis::{ErrorKind, RedisError, RetryMethod, ServerErrorKind};

/// The label of this backend in errors, logs and metrics (the `backend` label; what
/// `Lock::backend` answers).
pub const BACKEND: &str = "redis";

/// Whether `err` is a reply that is not RESP at all (its first bytes are of another
/// protocol), rather than a RESP reply cut short (a connection closed mid-reply, which is
/// retryable).
pub(crate) fn is_not_redis(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Parse && !err.to_string().contains("end of input")
}

/// The server answered, but not in the Redis protocol (RESP): the URL names a server of
/// another kind (an HTTP server, PostgreSQL, a TLS port spoken to in plain text). The
/// `source` (not retryable) of the [`LockError::Backend`] a lock answers then; `source()`
/// gives redis-rs's parse error.
#[derive(Debug)]
pub struct NotRedis {
    source: RedisError,
}

impl NotRedis {
    /// `err` as [`NotRedis`] when it says the server answered in another protocol (not a
    /// reply cut short), else `err` itself.
    ///
    /// # Errors
    /// `err` when it is not a reply of another protocol.
    pub fn from_error(err: RedisError) -> Result<Self, RedisError> {
        if is_not_redis(&err) {
            Ok(Self { source: err })
        } else {
            Err(err)
        }
    }
}

impl From<RedisError> for NotRedis {
    fn from(source: RedisError) -> Self {
        Self { source }
    }
}

impl std::fmt::Display for NotRedis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "the server does not answer in the Redis protocol (RESP): is it a Redis or Valkey \
             server, and is the scheme right (rediss:// for TLS)?",
        )
    }
}

impl std::error::Error for NotRedis {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Whether `err` is a timeout that redis-rs flattened into text: a cluster client that could
/// reach no node keeps only the last node's error as the detail of "Failed to create initial
/// connections" (`Io: timed out`), so the I/O error's kind is gone.
fn flattened_timeout(err: &RedisError) -> bool {
    err.kind() == redis::ErrorKind::Io && err.detail().is_some_and(|d| d.contains("timed out"))
}

/// Maps a failed command. `key` names the key a WRONGTYPE reply is about; `elapsed` is the time
/// spent, reported if the client library timed out.
pub(crate) fn from_redis(err: RedisError, op: Op, key: &str, elapsed: Duration) -> LockError {
    if err.is_timeout() || flattened_timeout(&err) {
        let phase = if op == Op::Connect {
            TimeoutPhase::Connect
        } else {
            TimeoutPhase::Command
        };
        return timeout(phase, elapsed);
    }
    if is_not_redis(&err) {
        return LockError::Backend {
            backend: BACKEND,
            op,
            retryable: false,
            source: Box::new(NotRedis::from(err)),
        };
    }
    if err.code() == Some("WRONGTYPE") {
        return LockError::WrongType {
            key: key.to_owned(),
            detail: err.to_string(),
        };
    }
    LockError::Backend {
        backend: BACKEND,
        op,
        retryable: retryable(&err),
        source: Box::new(err),
    }
}

/// Whether the same call can succeed later: I/O trouble, a server still loading its data, a
/// failover in progress. Wrong credentials, missing ACL rights and other error replies cannot.
fn retryable(err: &RedisError) -> bool {
    // A rejected certificate is an I/O error to redis-rs, but it stays rejected.
    #[cfg(feature = "tls")]
    if certificate::is_certificate_error(err) {
        return false;
    }
    // A full Redis under `noeviction` refuses writes ("OOM command not allowed"): no grant was
    // made, and memory may free up (keys expire, locks are released).
    if err.code() == Some("OOM") {
        return true;
    }
    match err.kind() {
        ErrorKind::AuthenticationFailed | ErrorKind::Server(ServerErrorKind::NoPerm) => false,
        _ => err.is_timeout() || !matches!(err.retry_method(), RetryMethod::NoRetry),
    }
}

/// Whether the connection that produced `err` must be replaced rather than reused.
pub(crate) fn breaks_connection(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_connection_dropped()
        || err.is_unrecoverable_error()
        || err.is_timeout()
}

pub(crate) fn timeout(phase: TimeoutPhase, elapsed: Duration) -> LockError {
    LockError::Timeout { phase, elapsed }
}
