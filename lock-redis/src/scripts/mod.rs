//! The Lua scripts, kept as `.lua` files and sent with EVALSHA. A script the server no longer
//! has (NOSCRIPT, after `SCRIPT FLUSH`, a restart or a failover) is loaded again and the call
//! repeated once (`Executor::run`), so a flushed script costs one extra round trip, never an
//! error.

pub(crate) mod native;

use std::sync::LazyLock;

use crate::topology::Topology;

/// A script: its source and the SHA1 that EVALSHA names it by.
#[derive(Debug)]
pub(crate) struct Lua {
    source: String,
    sha1: String,
}

impl Lua {
    pub(crate) fn new(source: impl Into<String>) -> Self {
        let source = source.into();
        let sha1 = redis::Script::new(&source).get_hash().to_owned();
        Self { source, sha1 }
    }

    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    pub(crate) fn sha1(&self) -> &str {
        &self.sha1
    }
}

const FENCE_LUA: &str = include_str!("../../lua/fence.lua");
const ACQUIRE_LUA: &str = include_str!("../../lua/acquire.lua");
const HANDOVER_LUA: &str = include_str!("../../lua/handover.lua");
const RELEASE_LUA: &str = include_str!("../../lua/release.lua");
const EXTEND_LUA: &str = include_str!("../../lua/extend.lua");

/// The scripts that issue fencing tokens, with `lua/fence.lua` in front.
static ACQUIRE_FENCED_LUA: LazyLock<String> = LazyLock::new(|| format!("{FENCE_LUA}{ACQUIRE_LUA}"));
static HANDOVER_FENCED_LUA: LazyLock<String> =
    LazyLock::new(|| format!("{FENCE_LUA}{HANDOVER_LUA}"));

/// Set-if-absent with a TTL and a fencing token; see `lua/acquire.lua`.
pub(crate) static ACQUIRE: LazyLock<Lua> = LazyLock::new(|| Lua::new(ACQUIRE_FENCED_LUA.as_str()));

/// Compare-and-pass-on to the next holder; see `lua/handover.lua`.
pub(crate) static HANDOVER: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(HANDOVER_FENCED_LUA.as_str()));

/// The release script's source with its announcing command filled in.
static RELEASE_PUBLISH_LUA: LazyLock<String> =
    LazyLock::new(|| RELEASE_LUA.replace("PUBLISH_COMMAND", "PUBLISH"));
static RELEASE_SPUBLISH_LUA: LazyLock<String> =
    LazyLock::new(|| RELEASE_LUA.replace("PUBLISH_COMMAND", "SPUBLISH"));

/// Compare-and-delete that announces the release with `PUBLISH`; see `lua/release.lua`.
pub(crate) static RELEASE: LazyLock<Lua> = LazyLock::new(|| Lua::new(RELEASE_PUBLISH_LUA.as_str()));

/// The same, announcing with `SPUBLISH` (sharded pub/sub), for a Redis Cluster.
#[cfg(feature = "cluster")]
pub(crate) static RELEASE_SHARDED: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(RELEASE_SPUBLISH_LUA.as_str()));

/// Compare-and-pexpire; see `lua/extend.lua`.
pub(crate) static EXTEND: LazyLock<Lua> = LazyLock::new(|| Lua::new(EXTEND_LUA));

// The read-write lock and the semaphore: `lua/clock.lua` (the server's clock, expiry of sorted
// sets) in front of each, `lua/semaphore.lua` (pruning) in front of the semaphore's.
const CLOCK_LUA: &str = include_str!("../../lua/clock.lua");
const SEMAPHORE_LUA: &str = include_str!("../../lua/semaphore.lua");
const FAIR_LUA: &str = include_str!("../../lua/fair.lua");

/// The script with the helpers it needs in front, and its announcing command filled in.
fn assemble(parts: &[&str], publish: &str) -> Lua {
    Lua::new(parts.concat().replace("PUBLISH_COMMAND", publish))
}

/// A script made once, on first use.
type Lazy = LazyLock<Lua>;

/// A reader's share; see `lua/read_acquire.lua`.
pub(crate) static READ_ACQUIRE: Lazy =
    LazyLock::new(|| assemble(&[CLOCK_LUA, include_str!("../../lua/read_acquire.lua")], ""));
/// The write lock, with writer preference; see `lua/write_acquire.lua`.
pub(crate) static WRITE_ACQUIRE: Lazy = LazyLock::new(|| {
    assemble(
        &[
            CLOCK_LUA,
            FENCE_LUA,
            include_str!("../../lua/write_acquire.lua"),
        ],
        "",
    )
});
/// One reader's expiry; see `lua/read_extend.lua`.
pub(crate) static READ_EXTEND: Lazy =
    LazyLock::new(|| assemble(&[CLOCK_LUA, include_str!("../../lua/read_extend.lua")], ""));
const RW_RELEASE_LUA: &str = include_str!("../../lua/rw_release.lua");
/// A reader's or writer's release, announced with `PUBLISH`; see `lua/rw_release.lua`.
pub(crate) static RW_RELEASE: Lazy =
    LazyLock::new(|| assemble(&[CLOCK_LUA, RW_RELEASE_LUA], "PUBLISH"));
/// The same, announced with `SPUBLISH` on a Redis Cluster.
pub(crate) static RW_RELEASE_SHARDED: Lazy =
    LazyLock::new(|| assemble(&[CLOCK_LUA, RW_RELEASE_LUA], "SPUBLISH"));
/// Permits, all or none; see `lua/semaphore_acquire.lua`.
pub(crate) static SEMAPHORE_ACQUIRE: Lazy = LazyLock::new(|| {
    assemble(
        &[
            CLOCK_LUA,
            SEMAPHORE_LUA,
            include_str!("../../lua/semaphore_acquire.lua"),
        ],
        "",
    )
});
/// One holder's expiry; see `lua/semaphore_extend.lua`.
pub(crate) static SEMAPHORE_EXTEND: Lazy = LazyLock::new(|| {
    assemble(
        &[
            CLOCK_LUA,
            SEMAPHORE_LUA,
            include_str!("../../lua/semaphore_extend.lua"),
        ],
        "",
    )
});
const SEMAPHORE_RELEASE_LUA: &str = include_str!("../../lua/semaphore_release.lua");
/// A holder's permits back, announced with `PUBLISH`; see `lua/semaphore_release.lua`.
pub(crate) static SEMAPHORE_RELEASE: Lazy = LazyLock::new(|| {
    assemble(
        &[CLOCK_LUA, SEMAPHORE_LUA, SEMAPHORE_RELEASE_LUA],
        "PUBLISH",
    )
});
/// The same, announced with `SPUBLISH` on a Redis Cluster.
pub(crate) static SEMAPHORE_RELEASE_SHARDED: Lazy = LazyLock::new(|| {
    assemble(
        &[CLOCK_LUA, SEMAPHORE_LUA, SEMAPHORE_RELEASE_LUA],
        "SPUBLISH",
    )
});
/// The mutex for the head of the fair queue; see `lua/fair_acquire.lua`.
pub(crate) static FAIR_ACQUIRE: Lazy = LazyLock::new(|| {
    assemble(
        &[
            CLOCK_LUA,
            FENCE_LUA,
            FAIR_LUA,
            include_str!("../../lua/fair_acquire.lua"),
        ],
        "",
    )
});
const FAIR_RELEASE_LUA: &str = include_str!("../../lua/fair_release.lua");
/// A fair holder's release or a fair waiter's withdrawal, telling the head with `PUBLISH`;
/// see `lua/fair_release.lua`.
pub(crate) static FAIR_RELEASE: Lazy =
    LazyLock::new(|| assemble(&[CLOCK_LUA, FAIR_LUA, FAIR_RELEASE_LUA], "PUBLISH"));
/// The same with `SPUBLISH` on a Redis Cluster.
pub(crate) static FAIR_RELEASE_SHARDED: Lazy =
    LazyLock::new(|| assemble(&[CLOCK_LUA, FAIR_LUA, FAIR_RELEASE_LUA], "SPUBLISH"));
/// Several mutexes in one slot, all or none; see `lua/multi_acquire.lua`.
pub(crate) static MULTI_ACQUIRE: Lazy = LazyLock::new(|| {
    assemble(
        &[FENCE_LUA, include_str!("../../lua/multi_acquire.lua")],
        "",
    )
});
/// The permits in use; see `lua/semaphore_in_use.lua`.
pub(crate) static SEMAPHORE_IN_USE: Lazy = LazyLock::new(|| {
    assemble(
        &[
            CLOCK_LUA,
            SEMAPHORE_LUA,
            include_str!("../../lua/semaphore_in_use.lua"),
        ],
        "",
    )
});

/// A note beside a mutex grant, if the grant still holds; see `lua/annotate.lua`.
pub(crate) static ANNOTATE: Lazy =
    LazyLock::new(|| Lua::new(include_str!("../../lua/annotate.lua")));
/// The holder of a mutex, its fencing token and note, in one read; see
/// `lua/describe_holder.lua`.
pub(crate) static DESCRIBE_HOLDER: Lazy =
    LazyLock::new(|| Lua::new(include_str!("../../lua/describe_holder.lua")));

/// The release scripts of one lock: announcing with `SPUBLISH` (sharded pub/sub, answered by
/// the slot's own node) on a Redis Cluster, `PUBLISH` elsewhere.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Releases {
    pub(crate) mutex: &'static Lua,
    pub(crate) read_write: &'static Lua,
    pub(crate) semaphore: &'static Lua,
    pub(crate) fair: &'static Lua,
}

impl Releases {
    /// The release scripts for a lock on `topology`.
    pub(crate) fn on(topology: Topology) -> Self {
        #[cfg(feature = "cluster")]
        if topology == Topology::Cluster {
            return Self {
                mutex: &RELEASE_SHARDED,
                read_write: &RW_RELEASE_SHARDED,
                semaphore: &SEMAPHORE_RELEASE_SHARDED,
                fair: &FAIR_RELEASE_SHARDED,
            };
        }
        let _ = topology;
        Self {
            mutex: &RELEASE,
            read_write: &RW_RELEASE,
            semaphore: &SEMAPHORE_RELEASE,
            fair: &FAIR_RELEASE,
        }
    }
}

/// Loads every script on a new connection (`SCRIPT LOAD`, which a cluster connection sends to
/// every master), all in one pipeline. Otherwise the first burst of concurrent calls (a renewal
/// batch of a thousand leases) would each hit NOSCRIPT and load the script again.
pub(crate) async fn preload(conn: &mut impl redis::aio::ConnectionLike) -> redis::RedisResult<()> {
    let kinds: [&Lua; 16] = [
        &ANNOTATE,
        &DESCRIBE_HOLDER,
        &MULTI_ACQUIRE,
        &FAIR_ACQUIRE,
        &FAIR_RELEASE,
        &FAIR_RELEASE_SHARDED,
        &READ_ACQUIRE,
        &WRITE_ACQUIRE,
        &READ_EXTEND,
        &RW_RELEASE,
        &RW_RELEASE_SHARDED,
        &SEMAPHORE_ACQUIRE,
        &SEMAPHORE_EXTEND,
        &SEMAPHORE_RELEASE,
        &SEMAPHORE_RELEASE_SHARDED,
        &SEMAPHORE_IN_USE,
    ];
    let sources = [
        ACQUIRE_FENCED_LUA.as_str(),
        HANDOVER_FENCED_LUA.as_str(),
        RELEASE_PUBLISH_LUA.as_str(),
        RELEASE_SPUBLISH_LUA.as_str(),
        EXTEND_LUA,
    ]
    .into_iter()
    .chain(kinds.iter().map(|lua| lua.source()));
    let mut pipe = redis::pipe();
    for source in sources {
        pipe.cmd("SCRIPT").arg("LOAD").arg(source).ignore();
    }
    pipe.exec_async(conn).await
}
