//! Exit codes and the one error type every subcommand returns.

use std::fmt;
use std::process::ExitCode;

use lock_core::{LockError, TimeoutPhase};

/// `release` did not release (another token holds the lock, or nobody does); `run` failed for
/// a reason of its own (`--force` refused, ...).
pub(crate) const FAILURE: u8 = 1;
/// Bad arguments (clap's code too).
pub(crate) const USAGE: u8 = 2;
/// Redis could not be reached or answered with an error: sysexits' EX_UNAVAILABLE.
pub(crate) const BACKEND: u8 = 69;
/// `run`: the lock stayed busy for all of --wait: sysexits' EX_TEMPFAIL ("try again later"),
/// which cron wrappers and systemd treat as temporary.
pub(crate) const BUSY: u8 = 75;
/// `run`: the lease was lost while the command ran, and the command was stopped; the number
/// GNU `timeout` uses for "the command was stopped by us".
pub(crate) const LOST: u8 = 124;
/// `run`: the command exists but could not be executed (shell convention).
pub(crate) const CANNOT_EXECUTE: u8 = 126;
/// `run`: the command was not found (shell convention).
pub(crate) const NOT_FOUND: u8 = 127;

/// The exit codes, for `--help`.
pub(crate) const CODES_HELP: &str = "\
Exit codes:
  0        success (run: the command's own code, 128+N if signal N ended it)
  1        release: not released (another token holds the lock, or nobody)
  2        bad arguments
  69       the store (Redis, etcd, PostgreSQL) unreachable or answering errors (sysexits EX_UNAVAILABLE)
  75       run: the lock stayed busy for all of --wait (EX_TEMPFAIL)
  124      run: the lease was lost; the command got SIGTERM (then SIGKILL)
  126/127  run: the command could not be executed / was not found";

/// Why a subcommand failed: one line for stderr, and the exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// Redis failed: `what` went wrong, with the client's error on the same line.
    pub(crate) fn backend(what: &str, error: &dyn fmt::Display) -> Self {
        Self::new(BACKEND, format!("{what}: {}", one_line(error)))
    }

    /// The process exit code of this failure.
    pub(crate) fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code)
    }
}

impl From<LockError> for Failure {
    fn from(error: LockError) -> Self {
        let code = match &error {
            LockError::InvalidInput { .. } => USAGE,
            LockError::Busy { .. }
            | LockError::Timeout {
                phase: TimeoutPhase::Wait,
                ..
            } => BUSY,
            LockError::Lost { .. } | LockError::NotOwned { .. } | LockError::Fenced { .. } => LOST,
            _ => BACKEND,
        };
        Self::new(code, one_line(&error))
    }
}

impl From<redis::RedisError> for Failure {
    fn from(error: redis::RedisError) -> Self {
        Self::backend("redis", &error)
    }
}

/// `error` on one line: the client's messages may span several.
pub(crate) fn one_line(error: &dyn fmt::Display) -> String {
    error
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
