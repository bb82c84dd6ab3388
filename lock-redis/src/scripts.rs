//! The Lua scripts, kept as `.lua` files and sent with EVALSHA. redis-rs's `Script` loads a
//! script again when the server answers NOSCRIPT (after `SCRIPT FLUSH`, a restart or a
//! failover), so a flushed script costs one extra round trip, never an error.

use std::sync::LazyLock;

use redis::Script;

/// Set-if-absent with a TTL and a fencing token; see `lua/acquire.lua`.
pub(crate) static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/acquire.lua")));

/// Compare-and-delete; see `lua/release.lua`.
pub(crate) static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/release.lua")));

/// Compare-and-pexpire; see `lua/extend.lua`.
pub(crate) static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/extend.lua")));
