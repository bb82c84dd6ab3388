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

/// The release script's source with its announcing command filled in.
static RELEASE_PUBLISH_LUA: LazyLock<String> =
    LazyLock::new(|| RELEASE_LUA.replace("PUBLISH_COMMAND", "PUBLISH"));
static RELEASE_SPUBLISH_LUA: LazyLock<String> =
    LazyLock::new(|| RELEASE_LUA.replace("PUBLISH_COMMAND", "SPUBLISH"));

/// Compare-and-delete that announces the release with `PUBLISH`; see `lua/release.lua`.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(&RELEASE_PUBLISH_LUA));

/// The same, announcing with `SPUBLISH` (sharded pub/sub), for a Redis Cluster.
#[cfg(feature = "cluster")]
pub(crate) static RELEASE_SHARDED: LazyLock<Script> =
    LazyLock::new(|| Script::new(&RELEASE_SPUBLISH_LUA));

/// Compare-and-pexpire; see `lua/extend.lua`.
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(EXTEND_LUA));

/// Loads every script on a new connection (`SCRIPT LOAD`, which a cluster connection sends to
/// every master). Otherwise the first burst of concurrent calls (a renewal batch of a thousand
/// leases) would each hit NOSCRIPT and load the script again.
pub(crate) async fn preload(conn: &mut impl redis::aio::ConnectionLike) -> redis::RedisResult<()> {
    let sources = [
        ACQUIRE_LUA,
        RELEASE_PUBLISH_LUA.as_str(),
        RELEASE_SPUBLISH_LUA.as_str(),
        EXTEND_LUA,
    ];
    for source in sources {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .exec_async(conn)
            .await?;
    }
    Ok(())
}
