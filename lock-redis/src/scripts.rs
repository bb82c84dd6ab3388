//! The Lua scripts, kept as `.lua` files and sent with EVALSHA. A script the server no longer
//! has (NOSCRIPT, after `SCRIPT FLUSH`, a restart or a failover) is loaded again and the call
//! repeated once (`RedisLock::run`), so a flushed script costs one extra round trip, never an
//! error.

use std::sync::LazyLock;

/// A script: its source and the SHA1 that EVALSHA names it by.
#[derive(Debug)]
pub(crate) struct Lua {
    source: &'static str,
    sha1: String,
}

impl Lua {
    fn new(source: &'static str) -> Self {
        let sha1 = redis::Script::new(source).get_hash().to_owned();
        Self { source, sha1 }
    }

    pub(crate) fn source(&self) -> &'static str {
        self.source
    }

    pub(crate) fn sha1(&self) -> &str {
        &self.sha1
    }
}

const FENCE_LUA: &str = include_str!("../lua/fence.lua");
const ACQUIRE_LUA: &str = include_str!("../lua/acquire.lua");
const HANDOVER_LUA: &str = include_str!("../lua/handover.lua");
const RELEASE_LUA: &str = include_str!("../lua/release.lua");
const EXTEND_LUA: &str = include_str!("../lua/extend.lua");

/// The scripts that issue fencing tokens, with `lua/fence.lua` in front.
static ACQUIRE_FENCED_LUA: LazyLock<String> = LazyLock::new(|| format!("{FENCE_LUA}{ACQUIRE_LUA}"));
static HANDOVER_FENCED_LUA: LazyLock<String> =
    LazyLock::new(|| format!("{FENCE_LUA}{HANDOVER_LUA}"));

/// Set-if-absent with a TTL and a fencing token; see `lua/acquire.lua`.
pub(crate) static ACQUIRE: LazyLock<Lua> = LazyLock::new(|| Lua::new(&ACQUIRE_FENCED_LUA));

/// Compare-and-pass-on to the next holder; see `lua/handover.lua`.
pub(crate) static HANDOVER: LazyLock<Lua> = LazyLock::new(|| Lua::new(&HANDOVER_FENCED_LUA));

/// The release script's source with its announcing command filled in.
static RELEASE_PUBLISH_LUA: LazyLock<String> =
    LazyLock::new(|| RELEASE_LUA.replace("PUBLISH_COMMAND", "PUBLISH"));
static RELEASE_SPUBLISH_LUA: LazyLock<String> =
    LazyLock::new(|| RELEASE_LUA.replace("PUBLISH_COMMAND", "SPUBLISH"));

/// Compare-and-delete that announces the release with `PUBLISH`; see `lua/release.lua`.
pub(crate) static RELEASE: LazyLock<Lua> = LazyLock::new(|| Lua::new(&RELEASE_PUBLISH_LUA));

/// The same, announcing with `SPUBLISH` (sharded pub/sub), for a Redis Cluster.
#[cfg(feature = "cluster")]
pub(crate) static RELEASE_SHARDED: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(&RELEASE_SPUBLISH_LUA));

/// Compare-and-pexpire; see `lua/extend.lua`.
pub(crate) static EXTEND: LazyLock<Lua> = LazyLock::new(|| Lua::new(EXTEND_LUA));

/// Loads every script on a new connection (`SCRIPT LOAD`, which a cluster connection sends to
/// every master). Otherwise the first burst of concurrent calls (a renewal batch of a thousand
/// leases) would each hit NOSCRIPT and load the script again.
pub(crate) async fn preload(conn: &mut impl redis::aio::ConnectionLike) -> redis::RedisResult<()> {
    let sources = [
        ACQUIRE_FENCED_LUA.as_str(),
        HANDOVER_FENCED_LUA.as_str(),
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
