//! Fenced writes on Redis (the crate README, "Fenced writes"): the `distlock` function library
//! and [`RedisFences`], which calls it on a lock's own connections.
//!
//! A *fence* is the record, per Redis key, of the largest fencing token a write to that key
//! carried (Kleppmann, "How to do distributed locking", 2016): a write applies only with a token
//! at least that large, and raises the record in the same atomic step (one function or script).
//! The record's key and the `STALEFENCE` error are the contract other languages' clients share
//! (`lua/fence_library.lua`).

mod load;
mod script;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use lock_core::{Fence, LockError, Op};
use redis::{RedisError, Value};

use crate::executor::Executor;
use crate::scripts::Lua;
pub use load::LibraryLoad;
use script::{DEL_SCRIPT, SET_SCRIPT};
pub use script::{FencedScript, LIBRARY_VERSION};

/// How a fence record's key continues after the hash tag it shares with the fenced key (see
/// [`RedisFences::record_key`]).
pub const RECORD_SUFFIX: &str = ":distlock-accepted";

/// The largest fencing token a fence takes: 2^53 − 1, the largest integer Lua's doubles hold
/// exactly (distlock's Redis tokens, server time in µs, are about 1.8 × 10^15).
const MAX_TOKEN: u64 = (1 << 53) - 1;

/// Not yet learned whether the server has functions.
const UNKNOWN: u8 = 0;
/// `FCALL` the library.
const FUNCTIONS: u8 = 1;
/// EVALSHA its scripts.
const SCRIPTS: u8 = 2;

/// What one lock learned about its server's functions, shared by all its [`RedisFences`].
#[derive(Debug, Default)]
pub(crate) struct FenceState {
    mode: AtomicU8,
    /// How many loads this lock made: a task that saw the library missing reloads only if no
    /// other task did since it sent its call.
    loads: AtomicU64,
    /// One load at a time: the first burst of writes loads the library once, not per task.
    loading: tokio::sync::Mutex<()>,
}

/// Fenced writes to Redis keys, on the connections of the [`RedisLock`](crate::RedisLock) it
/// came from ([`RedisLock::fences`](crate::RedisLock::fences)); clones share them.
///
/// Each write carries a [`Fence`]: `fence.resource` is the Redis key written (take a guard's
/// [`Guard::fence`](lock_core::Guard::fence) and name the key with
/// [`Fence::for_resource`] unless the key is the lock's name), `fence.token` the grant's fencing
/// token. A write applies iff the token is at least the largest the key accepted, and raises that
/// record in the same step; a smaller one fails with [`LockError::Fenced`] and changes nothing.
/// A key is fenced by one lock: tokens of different locks do not compare.
///
/// The library is loaded on first use, once per lock (see [`RedisFences::load`]); where
/// functions are unavailable the same code runs as EVALSHA scripts, learned once per lock.
#[derive(Clone)]
pub struct RedisFences {
    exec: Arc<Executor>,
    state: Arc<FenceState>,
}

impl RedisFences {
    pub(crate) fn new(exec: Arc<Executor>, state: Arc<FenceState>) -> Self {
        Self { exec, state }
    }

    /// The key of the fence record of `key`, in `key`'s cluster slot:
    /// `{T}:distlock-accepted:KEY` when `key` has the hash tag `T` (its first `{`, then the
    /// first `}` after it, `T` not empty), `{KEY}:distlock-accepted` otherwise. It never
    /// collides with a lock's fencing counter (`…:distlock-fence`).
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for a key without a hash tag that is empty or holds a `}`
    /// (no record of that form would share its slot: give it a hash tag), and for a key that
    /// ends like a record.
    pub fn record_key(key: &str) -> Result<String, LockError> {
        check_key(key)?;
        Ok(match crate::layout::slot::hash_tag(key) {
            Some(tag) => format!("{{{tag}}}{RECORD_SUFFIX}:{key}"),
            None => format!("{{{key}}}{RECORD_SUFFIX}"),
        })
    }

    /// `FCALL distlock_fenced_set 1 KEY TOKEN VALUE [PX ms]`: sets `fence.resource` to `value`
    /// (binary-safe), expiring after `ttl` when given (whole milliseconds, at least 1), if
    /// `fence.token` is at least the largest token the key accepted; the record is raised in
    /// the same step. The record never expires: it must outlive the values it fences.
    ///
    /// # Errors
    /// [`LockError::Fenced`] for a stale token (nothing written);
    /// [`LockError::InvalidInput`] for a token ≥ 2^53, a `ttl` under 1 ms, or a key
    /// [`record_key`](Self::record_key) refuses (nothing sent); [`LockError::WrongType`] when
    /// the record key holds another type; [`LockError::Timeout`] / [`LockError::Backend`] when
    /// Redis fails.
    ///
    /// # Cancel safety
    /// Dropped before the answer, the write may or may not have applied (with its record).
    pub async fn set(
        &self,
        fence: &Fence,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<(), LockError> {
        let token = checked(fence)?;
        let ms = match ttl {
            Some(ttl) if ttl.as_millis() == 0 => {
                return Err(LockError::invalid(
                    "the TTL of a fenced write is under 1 ms",
                ));
            }
            Some(ttl) => Some(ttl.as_millis().min(u128::from(u64::MAX)).to_string()),
            None => None,
        };
        let mut args: Vec<&[u8]> = vec![token.as_bytes(), value];
        if let Some(ms) = &ms {
            args.extend([b"PX".as_slice(), ms.as_bytes()]);
        }
        self.call("distlock_fenced_set", &SET_SCRIPT, fence, &args)
            .await
            .map(drop)
    }

    /// `FCALL distlock_fenced_del 1 KEY TOKEN`: deletes `fence.resource` if `fence.token` is at
    /// least the largest token the key accepted, raising the record (which stays). `true` when
    /// the key existed.
    ///
    /// # Errors
    /// As [`set`](Self::set).
    ///
    /// # Cancel safety
    /// Dropped before the answer, the key may or may not be deleted.
    pub async fn del(&self, fence: &Fence) -> Result<bool, LockError> {
        let token = checked(fence)?;
        let reply = self
            .call(
                "distlock_fenced_del",
                &DEL_SCRIPT,
                fence,
                &[token.as_bytes()],
            )
            .await?;
        Ok(matches!(reply, Value::Int(n) if n > 0))
    }

    /// Runs `script` (EVALSHA) behind the fence of `fence.resource`: `KEYS` =
    /// `[fence.resource, keys...]`, `ARGV` = `[token, args...]`, of which the user's code sees
    /// only `keys` and `args` (see [`FencedScript`]). Answers the script's reply.
    ///
    /// # Errors
    /// As [`set`](Self::set); an error the user's script raises is [`LockError::Backend`]
    /// (or [`LockError::WrongType`]).
    ///
    /// # Cancel safety
    /// Dropped before the answer, the script may or may not have run.
    pub async fn run(
        &self,
        script: &FencedScript,
        fence: &Fence,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Value, LockError> {
        let token = checked(fence)?;
        let mut all_keys = Vec::with_capacity(keys.len() + 1);
        all_keys.push(fence.resource.as_str());
        all_keys.extend_from_slice(keys);
        let mut all_args = Vec::with_capacity(args.len() + 1);
        all_args.push(token.as_bytes());
        all_args.extend_from_slice(args);
        self.script(script.lua(), fence, &all_keys, &all_args).await
    }

    /// Loads the `distlock` function library on the lock's server (every master of a Cluster)
    /// now, as the first fenced write does by itself: `FUNCTION LOAD` without `REPLACE`; a
    /// loaded library of the same name is replaced only when older (its `distlock_version`),
    /// so two distlock versions sharing a server never downgrade each other. `distlock
    /// migrate` calls this. Answers what happened; [`LibraryLoad::Unsupported`] means fenced
    /// writes run as EVALSHA scripts (Redis < 7, or an ACL without `FUNCTION LOAD` and no
    /// library loaded), which this lock remembers.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    /// Dropped, the library may or may not be loaded; loading again is harmless.
    pub async fn load(&self) -> Result<LibraryLoad, LockError> {
        let conn = self.exec.connection().await?;
        let limit = self.exec.command_timeout();
        let started = tokio::time::Instant::now();
        let outcome = load::load(conn.conn, limit)
            .await
            .map_err(|e| crate::error::from_redis(e, Op::Connect, "", started.elapsed()))?;
        let mode = if outcome.uses_functions() {
            FUNCTIONS
        } else {
            SCRIPTS
        };
        self.state.mode.store(mode, Ordering::Relaxed);
        self.state.loads.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%outcome, "the distlock function library");
        Ok(outcome)
    }

    /// Loads the library unless another task did since `seen` loads had been made.
    async fn load_once(&self, seen: u64) -> Result<(), LockError> {
        let _loading = self.state.loading.lock().await;
        if self.state.loads.load(Ordering::Relaxed) == seen {
            self.load().await?;
        }
        Ok(())
    }

    /// Calls the library's `function`, or its `script` where functions are unavailable; loads
    /// the library first on this lock's first call, and again when the server lost it
    /// (`FUNCTION FLUSH`, a restart).
    async fn call(
        &self,
        function: &str,
        script: &Lua,
        fence: &Fence,
        args: &[&[u8]],
    ) -> Result<Value, LockError> {
        let key = fence.resource.as_str();
        for _ in 0..3 {
            let loads = self.state.loads.load(Ordering::Relaxed);
            match self.state.mode.load(Ordering::Relaxed) {
                UNKNOWN => self.load_once(loads).await?,
                FUNCTIONS => {
                    let mut fcall = redis::cmd("FCALL");
                    fcall.arg(function).arg(1).arg(key).arg(args);
                    match self.exec.send::<Value>(Op::Write, &fcall, key).await {
                        Err(error) if redis_error(&error).is_some_and(load::function_missing) => {
                            self.load_once(loads).await?;
                        }
                        Err(error) if redis_error(&error).is_some_and(load::refused) => {
                            // FCALL itself is unknown or denied: the scripts, from now on.
                            self.state.mode.store(SCRIPTS, Ordering::Relaxed);
                        }
                        reply => return reply.map(|(v, _)| v).map_err(|e| stale(e, fence)),
                    }
                }
                _ => return self.script(script, fence, &[key], args).await,
            }
        }
        Err(LockError::Backend {
            backend: crate::error::BACKEND,
            op: Op::Write,
            retryable: true,
            source: format!("the distlock function {function} vanished after each load").into(),
        })
    }

    /// EVALSHA of `script` (SCRIPT LOAD on NOSCRIPT).
    async fn script(
        &self,
        script: &Lua,
        fence: &Fence,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Value, LockError> {
        self.exec
            .run::<Value, &[u8]>(Op::Write, script, keys, args)
            .await
            .map(|(v, _)| v)
            .map_err(|e| stale(e, fence))
    }
}

impl fmt::Debug for RedisFences {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.state.mode.load(Ordering::Relaxed) {
            UNKNOWN => "unknown",
            FUNCTIONS => "functions",
            _ => "scripts",
        };
        f.debug_struct("RedisFences")
            .field("mode", &mode)
            .finish_non_exhaustive()
    }
}

/// The fence's token as the decimal text the library takes, after checking it and the key.
fn checked(fence: &Fence) -> Result<String, LockError> {
    if fence.token > MAX_TOKEN {
        return Err(LockError::invalid(format!(
            "the fencing token {} is not below 2^53",
            fence.token
        )));
    }
    check_key(&fence.resource)?;
    Ok(fence.token.to_string())
}

/// What [`RedisFences::record_key`] refuses, checked without building the record's key (the
/// library builds it on the server).
fn check_key(key: &str) -> Result<(), LockError> {
    if key.ends_with(RECORD_SUFFIX) {
        return Err(LockError::invalid(format!(
            "the key {key:?} ends like a fence record ({RECORD_SUFFIX})"
        )));
    }
    if crate::layout::slot::hash_tag(key).is_none() && (key.is_empty() || key.contains('}')) {
        return Err(LockError::invalid(format!(
            "the key {key:?} is empty or holds a }} without a hash tag: give it a hash tag {{...}}"
        )));
    }
    Ok(())
}

/// The Redis error inside a backend failure.
fn redis_error(error: &LockError) -> Option<&RedisError> {
    match error {
        LockError::Backend { source, .. } => source.downcast_ref::<RedisError>(),
        _ => None,
    }
}

/// A `STALEFENCE` reply as [`LockError::Fenced`], the library's refusals of bad input
/// (`ERR distlock: ...`) as [`LockError::InvalidInput`]; other errors as they are.
fn stale(error: LockError, fence: &Fence) -> LockError {
    let Some(redis) = redis_error(&error) else {
        return error;
    };
    let detail = redis.detail().unwrap_or_default();
    if redis.code() == Some("STALEFENCE") {
        // "token <TOKEN> < accepted <RECORDED> for <KEY>"
        let current = detail
            .split_whitespace()
            .nth(4)
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::MAX);
        return LockError::Fenced {
            resource: fence.resource.clone(),
            token: fence.token,
            current,
        };
    }
    if let Some(reason) = detail.strip_prefix("distlock: ") {
        return LockError::invalid(reason);
    }
    error
}

/// `error` on one line.
pub(crate) fn one_line(error: &dyn fmt::Display) -> String {
    error
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
