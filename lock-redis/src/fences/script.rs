//! The Lua of fenced writes: the `distlock` function library (`lua/fence_library.lua`), the
//! EVAL scripts made of the same file for servers without functions, and [`FencedScript`].

use std::sync::{Arc, LazyLock};

use crate::scripts::Lua;

/// The library's source, as `FUNCTION LOAD` takes it (its first line names it `distlock`).
pub(crate) const LIBRARY: &str = include_str!("../../lua/fence_library.lua");

/// The version of the `distlock` function library this crate loads (`FCALL_RO
/// distlock_version 0` answers the loaded one). It only grows; a distlock replaces a loaded
/// library only with a newer one, so two versions sharing a server never downgrade each other.
pub const LIBRARY_VERSION: i64 = 1;

/// The library without its `#!lua name=distlock` line: the body every EVAL script shares. Its
/// functions register themselves only under `FUNCTION LOAD` (`redis.register_function` is nil
/// in EVAL), so in a script it only defines the local functions `fence`, `fenced_set` and
/// `fenced_del`.
fn body() -> &'static str {
    LIBRARY.split_once('\n').map_or(LIBRARY, |(_, rest)| rest)
}

/// `distlock_fenced_set` as an EVAL script, for servers without functions: same keys, same
/// arguments, same replies.
pub(crate) static SET_SCRIPT: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(format!("{}\nreturn fenced_set(KEYS, ARGV)\n", body())));

/// `distlock_fenced_del` as an EVAL script.
pub(crate) static DEL_SCRIPT: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(format!("{}\nreturn fenced_del(KEYS, ARGV)\n", body())));

/// A user's Lua script behind the fence: it runs only when the write's fencing token is at
/// least the largest its resource accepted, and that record is raised in the same script, so
/// whatever the script writes is fenced (one atomic step on the server).
///
/// Convention, as sent by [`RedisFences::run`](crate::RedisFences::run): `KEYS[1]` is the
/// fenced resource's key and `ARGV[1]` the fencing token; the user's script sees `KEYS` and
/// `ARGV` **without** them (its own `KEYS[1]` is the call's second key). A stale token answers
/// the `STALEFENCE` error before the user's code runs. The user's keys must share the
/// resource's cluster slot on a Redis Cluster (give them its hash tag). A user script that
/// raises an error after the check leaves the record raised (Redis scripts do not roll back).
/// A first line starting with `#!lua` (flags) stays first; its flags must allow writes.
///
/// ```
/// use lock_redis::FencedScript;
/// // Append to a list, fenced: KEYS[1] (after the resource) is the list, ARGV[1] the entry.
/// let script = FencedScript::new("return redis.call('RPUSH', KEYS[1], ARGV[1])");
/// assert!(script.source().contains("RPUSH"));
/// ```
#[derive(Debug, Clone)]
pub struct FencedScript {
    lua: Arc<Lua>,
}

impl FencedScript {
    /// Wraps `user_lua` (see the type's docs for the keys and arguments it sees). Nothing is
    /// sent: the script is loaded on first use (EVALSHA, then SCRIPT LOAD on NOSCRIPT).
    #[must_use]
    pub fn new(user_lua: &str) -> Self {
        let (shebang, user) = match user_lua.strip_prefix("#!") {
            Some(_) => user_lua.split_once('\n').unwrap_or((user_lua, "")),
            None => ("", user_lua),
        };
        let source = format!(
            "{shebang}\n{}\n\
             local distlock_refused = fence(KEYS[1], ARGV[1])\n\
             if distlock_refused then return distlock_refused end\n\
             local KEYS, ARGV = {{unpack(KEYS, 2)}}, {{unpack(ARGV, 2)}}\n\
             {user}\n",
            body()
        );
        Self {
            lua: Arc::new(Lua::new(source)),
        }
    }

    /// The whole script as sent (the fence, then the user's code): for other languages'
    /// clients, which EVAL it with the same keys and arguments.
    #[must_use]
    pub fn source(&self) -> &str {
        self.lua.source()
    }

    /// The SHA1 that EVALSHA names it by.
    #[must_use]
    pub fn sha1(&self) -> &str {
        self.lua.sha1()
    }

    pub(crate) fn lua(&self) -> &Lua {
        &self.lua
    }
}
