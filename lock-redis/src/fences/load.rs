//! Loading the `distlock` function library: `FUNCTION LOAD` without `REPLACE`; when a library
//! of that name is there already, its version (`FCALL_RO distlock_version 0`) decides, and only
//! an older one is replaced (`FUNCTION LOAD REPLACE`). A server without functions (Redis < 7)
//! or a user the ACL denies `FUNCTION LOAD` falls back to the same code as EVAL scripts, unless
//! an operator loaded the library already (`distlock migrate`), which is then used.
//!
//! Reading the version and replacing are two commands: two distlocks of three different
//! versions loading in the same instant may leave the middle one; the newest restores itself on
//! its next load (`distlock migrate`, or a restart of its process). Two versions never do.

use std::fmt;
use std::time::Duration;

use redis::{Cmd, ErrorKind, RedisError, RedisResult, Value};

use super::script::{LIBRARY, LIBRARY_VERSION};
use crate::connection::conn::Handle;

/// What [`RedisFences::load`](crate::RedisFences::load) found and did. On a Redis Cluster,
/// the outcome of every master combined: the first of `Unsupported`, `KeptNewer`, `KeptOlder`,
/// `Replaced`, `Loaded`, `Current` that any master answered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LibraryLoad {
    /// No `distlock` library was loaded; ours (`version`) is now.
    Loaded {
        /// Our version, [`LIBRARY_VERSION`](crate::LIBRARY_VERSION).
        version: i64,
    },
    /// The same version was loaded already; nothing changed.
    Current {
        /// The loaded version, ours.
        version: i64,
    },
    /// An older version was loaded and ours replaced it.
    Replaced {
        /// The version that was loaded (0: a `distlock` library without `distlock_version`).
        older: i64,
        /// Ours.
        version: i64,
    },
    /// A newer version was loaded (by a newer distlock) and was kept: its functions keep
    /// the same contract.
    KeptNewer {
        /// The loaded version.
        newer: i64,
        /// Ours.
        version: i64,
    },
    /// An older version is loaded and this user may not replace it (ACL); it is used as it is
    /// (the functions' contract is stable across versions).
    KeptOlder {
        /// The loaded version.
        older: i64,
        /// Ours.
        version: i64,
    },
    /// Functions are unavailable (Redis < 7, or the ACL denies `FUNCTION LOAD` and no library
    /// is loaded): fenced writes run the same code as EVAL scripts (EVALSHA).
    Unsupported {
        /// The server's refusal.
        reason: String,
    },
}

impl LibraryLoad {
    /// Whether fenced writes call the library's functions (`FCALL`), not its scripts.
    #[must_use]
    pub fn uses_functions(&self) -> bool {
        !matches!(self, Self::Unsupported { .. })
    }

    /// How telling this outcome is when masters differ (higher first).
    #[cfg(feature = "cluster")]
    fn rank(&self) -> u8 {
        match self {
            Self::Unsupported { .. } => 5,
            Self::KeptNewer { .. } => 4,
            Self::KeptOlder { .. } => 3,
            Self::Replaced { .. } => 2,
            Self::Loaded { .. } => 1,
            Self::Current { .. } => 0,
        }
    }
}

impl fmt::Display for LibraryLoad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Loaded { version } => write!(f, "loaded the distlock library, version {version}"),
            Self::Current { version } => {
                write!(
                    f,
                    "the distlock library, version {version}, was loaded already"
                )
            }
            Self::Replaced { older, version } => write!(
                f,
                "replaced the distlock library version {older} with version {version}"
            ),
            Self::KeptNewer { newer, version } => write!(
                f,
                "kept the newer distlock library version {newer} (ours: {version})"
            ),
            Self::KeptOlder { older, version } => write!(
                f,
                "kept the distlock library version {older}: this user may not replace it with version {version}"
            ),
            Self::Unsupported { reason } => write!(
                f,
                "functions unavailable ({reason}); fenced writes use EVALSHA scripts"
            ),
        }
    }
}

/// One server to load on: the lock's connection to it, or one master of a Cluster by address.
enum Node {
    Plain(redis::aio::MultiplexedConnection),
    #[cfg(feature = "cluster")]
    At(redis::cluster_async::ClusterConnection, String, u16),
}

impl Node {
    /// Sends `cmd` to this server, its error reply as `Err`, bounded by `limit`.
    async fn query(&mut self, cmd: Cmd, limit: Duration) -> RedisResult<Value> {
        let reply = match self {
            Self::Plain(conn) => tokio::time::timeout(limit, cmd.query_async::<Value>(conn)).await,
            #[cfg(feature = "cluster")]
            Self::At(conn, host, port) => {
                use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                tokio::time::timeout(limit, conn.route_command(cmd, route)).await
            }
        };
        match reply {
            Ok(Ok(Value::ServerError(error))) => Err(error.into()),
            Ok(answer) => answer,
            Err(_) => Err(RedisError::from((ErrorKind::Io, "no reply in time"))),
        }
    }
}

fn function_load(replace: bool) -> Cmd {
    let mut cmd = redis::cmd("FUNCTION");
    cmd.arg("LOAD");
    if replace {
        cmd.arg("REPLACE");
    }
    cmd.arg(LIBRARY);
    cmd
}

/// Loads the library on every server behind `handle` (every master of a Cluster).
pub(crate) async fn load(handle: Handle, limit: Duration) -> RedisResult<LibraryLoad> {
    match handle {
        Handle::Multiplexed(conn) => load_on(&mut Node::Plain(conn), None, limit).await,
        #[cfg(feature = "cluster")]
        Handle::Cluster(conn) => load_on_masters(conn, limit).await,
    }
}

/// `FUNCTION LOAD` on every master at once, then each master's own answer settled by address.
#[cfg(feature = "cluster")]
async fn load_on_masters(
    mut conn: redis::cluster_async::ClusterConnection,
    limit: Duration,
) -> RedisResult<LibraryLoad> {
    use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
    let route = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
    let replies = tokio::time::timeout(limit, conn.route_command(function_load(false), route))
        .await
        .map_err(|_| RedisError::from((ErrorKind::Io, "no reply in time")))??;
    let Value::Map(replies) = replies else {
        return Err(RedisError::from((
            ErrorKind::Parse,
            "FUNCTION LOAD on every master: not one reply per master",
        )));
    };
    let mut outcome: Option<LibraryLoad> = None;
    for (addr, reply) in replies {
        let addr: String = redis::from_redis_value(addr)?;
        let (host, port) = addr
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h.to_owned(), p.parse().ok()?)))
            .ok_or_else(|| RedisError::from((ErrorKind::Parse, "a master's address")))?;
        let first = match reply {
            Value::ServerError(error) => Err(error.into()),
            other => Ok(other),
        };
        let node = load_on(&mut Node::At(conn.clone(), host, port), Some(first), limit).await?;
        if outcome.as_ref().is_none_or(|o| node.rank() > o.rank()) {
            outcome = Some(node);
        }
    }
    Ok(outcome.unwrap_or(LibraryLoad::Current {
        version: LIBRARY_VERSION,
    }))
}

/// Loads the library on one server; `first` is the answer to a `FUNCTION LOAD` already sent.
async fn load_on(
    node: &mut Node,
    first: Option<RedisResult<Value>>,
    limit: Duration,
) -> RedisResult<LibraryLoad> {
    let first = match first {
        Some(first) => first,
        None => node.query(function_load(false), limit).await,
    };
    let version = LIBRARY_VERSION;
    match first {
        Ok(_) => Ok(LibraryLoad::Loaded { version }),
        Err(error) if already_exists(&error) => {
            let loaded = loaded_version(node, limit).await?.unwrap_or(0);
            if loaded > version {
                return Ok(LibraryLoad::KeptNewer {
                    newer: loaded,
                    version,
                });
            }
            if loaded == version {
                return Ok(LibraryLoad::Current { version });
            }
            match node.query(function_load(true), limit).await {
                Ok(_) => Ok(LibraryLoad::Replaced {
                    older: loaded,
                    version,
                }),
                Err(error) if refused(&error) => Ok(LibraryLoad::KeptOlder {
                    older: loaded,
                    version,
                }),
                Err(error) => Err(error),
            }
        }
        Err(error) if refused(&error) => {
            // A user without FUNCTION LOAD may still call a library an operator loaded.
            Ok(match loaded_version(node, limit).await {
                Ok(Some(loaded)) if loaded > version => LibraryLoad::KeptNewer {
                    newer: loaded,
                    version,
                },
                Ok(Some(loaded)) if loaded < version => LibraryLoad::KeptOlder {
                    older: loaded,
                    version,
                },
                Ok(Some(_)) => LibraryLoad::Current { version },
                _ => LibraryLoad::Unsupported {
                    reason: crate::fences::one_line(&error),
                },
            })
        }
        Err(error) => Err(error),
    }
}

/// The loaded library's version: `None` when its `distlock_version` is missing (a library of
/// that name without it counts as version 0) or refused.
async fn loaded_version(node: &mut Node, limit: Duration) -> RedisResult<Option<i64>> {
    let mut ask = redis::cmd("FCALL_RO");
    ask.arg("distlock_version").arg(0);
    match node.query(ask, limit).await {
        Ok(Value::Int(v)) => Ok(Some(v)),
        Ok(_) => Ok(None),
        Err(error) if function_missing(&error) || refused(&error) => Ok(None),
        Err(error) => Err(error),
    }
}

/// "ERR Library 'distlock' already exists".
fn already_exists(error: &RedisError) -> bool {
    error
        .detail()
        .is_some_and(|d| d.to_ascii_lowercase().contains("already exists"))
}

/// The server has no such function (never loaded, `FUNCTION FLUSH`, a restart).
pub(crate) fn function_missing(error: &RedisError) -> bool {
    error
        .detail()
        .is_some_and(|d| d.to_ascii_lowercase().contains("function not found"))
}

/// Functions are unavailable to this client: Redis < 7 knows no such command, or the ACL
/// denies it (NOPERM).
pub(crate) fn refused(error: &RedisError) -> bool {
    error.code() == Some("NOPERM")
        || error
            .detail()
            .is_some_and(|d| d.to_ascii_lowercase().starts_with("unknown command"))
}
