//! The Lua scripts, kept as `.lua` files and sent with EVALSHA. redis-rs's `Script` loads a
//! script again when the server answers NOSCRIPT (after `SCRIPT FLUSH`, a restart or a
//! failover), so a flushed script costs one extra round trip, never an error.

use std::sync::LazyLock;

use redis::Script;

const ACQUIRE_LUA: &str = include_str!("../lua/acquire.lua");
const RELEASE_LUA: &str = include_str!("../lua/release.lua");
const EXTEND_LUA: &str = include_str!("../lua/extend.lua");

/// Set-if-absent with a TTL and a fencing token; see `lua/acquire.lua`.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE_LUA));

/// Compare-and-delete that announces the release; see `lua/release.lua`.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_LUA));

/// Compare-and-pexpire; see `lua/extend.lua`.
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(EXTEND_LUA));

/// Loads every script on a new connection (`SCRIPT LOAD`, which a cluster connection sends to
/// every master). Otherwise the first burst of concurrent calls (a renewal batch of a thousand
/// leases) would each hit NOSCRIPT and load the script again.
pub(crate) async fn preload(conn: &mut impl redis::aio::ConnectionLike) -> redis::RedisResult<()> {
    for source in [ACQUIRE_LUA, RELEASE_LUA, EXTEND_LUA] {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .exec_async(conn)
            .await?;
    }
    Ok(())
}
