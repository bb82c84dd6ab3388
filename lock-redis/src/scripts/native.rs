//! The server's own compare-and-delete and compare-and-set, where it has them: `DELIFEQ key
//! value` (Valkey ≥ 9.0) for a release, `SET key value IFEQ value PX ttl` (Valkey ≥ 8.1) for an
//! extension. Each replaces a script call (EVALSHA: ~10,000 server instructions of Lua set-up
//! and ~1,500 per argument, `scripts/script-cost.sh`) with a plain command.
//!
//! `SET … IFEQ` is learned on the first refusal: Redis 7.x answers `ERR syntax error`, an ACL
//! user denied it `NOPERM`, and a refused command did nothing, so the caller runs the script
//! instead. `DELIFEQ` is asked for first, once per connection, with `COMMAND INFO DELIFEQ`:
//! a server that does not know a command answers `ERR unknown command …, with args beginning
//! with: …` and echoes the first 128 bytes of the arguments, which can cut a multi-byte
//! character of the lock's name in two; redis-rs cannot read such a reply and drops the
//! connection ("broken pipe" for every command on it). The question carries no user data. A
//! refusal or an unknown command is remembered for the connection it came from
//! (`Conn::generation`): a replaced connection, maybe to another server after a failover,
//! asks again once. Redis 8.4's `DELEX key IFEQ value` is not used: no Redis 8.4 server is in
//! the test matrix, and an untested path is not shipped.

use std::sync::atomic::{AtomicU64, Ordering};

use redis::Value;

/// Never refused (generations start at 1).
const NOT_REFUSED: u64 = 0;

/// Which native commands this lock may send, and the connection that last refused each.
#[derive(Debug)]
pub(crate) struct Native {
    /// Off by the builder (`native_commands(false)`): scripts only.
    enabled: bool,
    /// The generation of the connection that refused `DELIFEQ`, or [`NOT_REFUSED`].
    release_refused_on: AtomicU64,
    /// The generation of the connection that refused `SET … IFEQ`, or [`NOT_REFUSED`].
    extend_refused_on: AtomicU64,
    /// The generation of the connection that said it knows `DELIFEQ` (`COMMAND INFO`), or
    /// [`NOT_REFUSED`] (not asked yet).
    release_known_on: AtomicU64,
}

/// One of the native commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// `DELIFEQ`, the release.
    Release,
    /// `SET … IFEQ … PX`, the extension.
    Extend,
}

impl Native {
    /// Native commands tried first when `enabled`, else never.
    pub(crate) fn new(enabled: bool) -> Self {
        Self {
            enabled,
            release_refused_on: AtomicU64::new(NOT_REFUSED),
            extend_refused_on: AtomicU64::new(NOT_REFUSED),
            release_known_on: AtomicU64::new(NOT_REFUSED),
        }
    }

    /// Whether `command` must be asked about on the connection of `generation` before it is
    /// sent with user data (`DELIFEQ`, until that connection said it knows it).
    pub(crate) fn must_ask(&self, command: Command, generation: u64) -> bool {
        command == Command::Release && self.release_known_on.load(Ordering::Relaxed) != generation
    }

    /// Remembers that the connection of `generation` knows `command`.
    pub(crate) fn known(&self, command: Command, generation: u64) {
        if command == Command::Release {
            self.release_known_on.store(generation, Ordering::Relaxed);
        }
    }

    fn refused_on(&self, command: Command) -> &AtomicU64 {
        match command {
            Command::Release => &self.release_refused_on,
            Command::Extend => &self.extend_refused_on,
        }
    }

    /// Whether `command` may be tried on the connection of `generation`.
    pub(crate) fn usable(&self, command: Command, generation: u64) -> bool {
        self.enabled && self.refused_on(command).load(Ordering::Relaxed) != generation
    }

    /// Remembers that the connection of `generation` refused `command`.
    pub(crate) fn refused(&self, command: Command, generation: u64) {
        self.refused_on(command)
            .store(generation, Ordering::Relaxed);
    }
}

/// The question [`Native::must_ask`] asks: `COMMAND INFO DELIFEQ`, answered by one entry per
/// name, nil for a command the server does not have.
pub(crate) fn ask(command: Command) -> redis::Cmd {
    let mut cmd = redis::cmd("COMMAND");
    cmd.arg("INFO").arg(match command {
        Command::Release => "DELIFEQ",
        Command::Extend => "SET",
    });
    cmd
}

/// Whether the answer to [`ask`] says the server has the command.
pub(crate) fn has_command(answer: &Value) -> bool {
    matches!(answer, Value::Array(entries) if entries.first().is_some_and(|e| !matches!(e, Value::Nil)))
}

/// Whether `reply` says the server will not run the command at all — it does not know it, does
/// not know the `IFEQ` option, or the ACL forbids it — so that it did nothing and the script
/// must do the work.
pub(crate) fn is_refusal(reply: &Value) -> bool {
    let Value::ServerError(error) = reply else {
        return false;
    };
    match error.code() {
        "NOPERM" => true,
        "ERR" => error.details().is_some_and(|detail| {
            let detail = detail.trim_start().to_ascii_lowercase();
            detail.starts_with("unknown command") || detail.starts_with("syntax error")
        }),
        _ => false,
    }
}
