//! The store grace period on a Redis Cluster, per master (per slot range).
//!
//! On one server or a Sentinel-named master, a restart or a failover always breaks the lock's
//! connection, and the new connection reads the server's facts (`grace.rs`). A redis-rs cluster
//! connection never does: it re-routes to a promoted replica by itself, under the same pooled
//! connection. So on a Cluster the lock keeps the facts of every node, keyed by its address
//! (`host:port`), and a slot → node map, and *refreshes* both:
//! - on the first use (when the cluster connection is made);
//! - before the next acquire after a command on the cluster failed with an I/O error, a
//!   timeout, `MOVED`, `ASK`, `CLUSTERDOWN`, `TRYAGAIN`, `MASTERDOWN` or `READONLY` (a failover
//!   always shows as such errors to a process that was sending to the failed master);
//! - before an acquire when the last refresh is older than [`CLUSTER_GRACE_REFRESH`], because
//!   redis-rs may absorb a failover without any error reaching the lock (its own retries).
//!
//! Never per command: the healthy path reads two atomics and a timestamp.
//!
//! A refresh is one `CLUSTER SLOTS` (any node) and one `INFO` per node it lists, masters and
//! replicas, so a replica is known as a replica before it is promoted. Each node's facts go to
//! a [`GraceState`] of its own, labelled with its address, which applies the single-server rules,
//! logs and metrics unchanged: a new `run_id`, a replica that became master, or a new
//! replication id starts a grace for that node, and so for the slots it owns. A node first seen
//! after the first look that is a master and was promoted (`second_repl_offset` is not −1) is
//! counted as a promotion too: its history is unknown, so it is given a grace. The first look
//! compares with nothing, so a fresh cluster grants at once.
//!
//! What it cannot see (the crate README says so): a failover that redis-rs absorbs without an
//! error, less than [`CLUSTER_GRACE_REFRESH`] after the last refresh, lets the grants of that
//! window through; and a node that refuses `INFO` or `CLUSTER SLOTS` is not watched.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lock_core::LockError;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{ErrorKind, RedisError, ServerErrorKind, Value};
use tokio::time::Instant;

use crate::layout::slot::key_slot;
use crate::safety::facts::{self, ServerFacts};
use crate::safety::grace::{GraceSettings, GraceState, Strict};

/// How old a Redis Cluster's node facts may get before the next acquire refreshes them
/// (`CLUSTER SLOTS` and one `INFO` per node): 2 s. It bounds how long a failover that the
/// cluster client absorbed without an error can go unseen; failures that reach the lock
/// refresh them at the next acquire regardless.
pub const CLUSTER_GRACE_REFRESH: Duration = Duration::from_secs(2);

/// One slot range and the node that owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owned {
    first: u16,
    last: u16,
    /// The owner's address, `host:port`.
    master: String,
}

/// The grace state of a whole cluster: one [`GraceState`] per node address, and who owns which
/// slots, as the last refresh found.
pub(crate) struct ClusterGrace {
    settings: GraceSettings,
    prefix: String,
    /// How long a refresh may take.
    limit: Duration,
    /// Set by a failure that may come from a topology change: refresh before the next acquire.
    stale: AtomicBool,
    state: Mutex<State>,
    /// One refresh at a time; the others wait and use its result.
    refreshing: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    /// When the last refresh was tried; `None` before the first.
    refreshed: Option<Instant>,
    /// Owned slot ranges, sorted by their first slot.
    slots: Vec<Owned>,
    /// Every node seen, by address.
    nodes: HashMap<String, Arc<GraceState>>,
}

impl ClusterGrace {
    pub(crate) fn new(settings: GraceSettings, prefix: &str, limit: Duration) -> Self {
        Self {
            settings,
            prefix: prefix.to_owned(),
            limit,
            stale: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// Whether nothing here can refuse a grant (zero grace, not strict).
    pub(crate) fn inert(&self) -> bool {
        self.settings.grace.is_zero() && !self.settings.strict
    }

    /// Records a failed command: when it may come from a failover or a resharding, the next
    /// acquire refreshes the node facts first.
    pub(crate) fn saw_error(&self, err: &RedisError) {
        if shows_topology_change(err) {
            self.stale.store(true, Ordering::Release);
        }
    }

    /// Records a command timeout (the node may be gone): as [`Self::saw_error`].
    pub(crate) fn saw_timeout(&self) {
        self.stale.store(true, Ordering::Release);
    }

    /// Whether the next acquire must refresh first: never refreshed, a failure seen since, or
    /// the last refresh older than [`CLUSTER_GRACE_REFRESH`].
    pub(crate) fn needs_refresh(&self) -> bool {
        if self.stale.load(Ordering::Acquire) {
            return true;
        }
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .refreshed
            .is_none_or(|at| at.elapsed() >= CLUSTER_GRACE_REFRESH)
    }

    /// Reads `CLUSTER SLOTS` and every listed node's `INFO` over `conn`, bounded by the
    /// command timeout, and feeds each node's facts to its [`GraceState`]. Failures are logged,
    /// not returned: the facts then stay as they were, and the next acquire tries again.
    pub(crate) async fn refresh(&self, conn: &mut ClusterConnection) {
        let _one = self.refreshing.lock().await;
        // Another task may have refreshed while this one waited.
        if !self.needs_refresh() {
            return;
        }
        self.stale.store(false, Ordering::Release);
        let read = tokio::time::timeout(self.limit, read_cluster(conn)).await;
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.refreshed = Some(now);
        let (slots, facts) = match read {
            Ok(Ok(read)) => read,
            Ok(Err(error)) => {
                tracing::debug!(%error, "CLUSTER SLOTS failed; the cluster's grace state was not refreshed");
                self.stale.store(true, Ordering::Release);
                return;
            }
            Err(_) => {
                tracing::debug!("refreshing the cluster's grace state timed out");
                self.stale.store(true, Ordering::Release);
                return;
            }
        };
        let first_look = state.nodes.is_empty();
        for (address, facts) in facts.iter().cloned() {
            let known = state.nodes.contains_key(&address);
            let watch = Arc::clone(state.nodes.entry(address.clone()).or_insert_with(|| {
                Arc::new(GraceState::new(
                    self.settings,
                    address.clone(),
                    &self.prefix,
                ))
            }));
            if !first_look && !known && facts.is_master() && facts.second_repl_offset != -1 {
                // A master we never saw, promoted at some point: it may have been promoted
                // just now, without the grants of its old master. Seen as the replica it was.
                let was = ServerFacts {
                    role: "slave".to_owned(),
                    ..facts.clone()
                };
                watch.record(was, &Strict::default(), now);
            }
            watch.record(facts, &Strict::default(), now);
        }
        // A master that did not answer may be a promoted replica the cluster client does not
        // know yet: try again before the next grant instead of granting on old facts.
        if slots.iter().any(|owned| !facts_have(&facts, &owned.master)) {
            self.stale.store(true, Ordering::Release);
        }
        if !slots.is_empty() {
            state.slots = slots;
        }
    }

    /// Whether a grant on the slots of `keys` may be sent now: `Ok(None)` yes, `Ok(Some(left))`
    /// not for `left`, the longest grace among the masters of those slots. A slot whose owner is
    /// unknown grants (the cluster's facts could not be read). No I/O.
    ///
    /// # Errors
    /// As [`GraceState::verdict`]: strict mode and a master that may evict lock keys.
    pub(crate) fn verdict(&self, keys: &[&str]) -> Result<Option<Duration>, LockError> {
        let watches: Vec<Arc<GraceState>> = {
            let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            keys.iter()
                .filter_map(|key| owner(&state.slots, key_slot(key)))
                .filter_map(|master| state.nodes.get(master).cloned())
                .collect()
        };
        let mut longest: Option<Duration> = None;
        for watch in watches {
            if let Some(left) = watch.verdict()? {
                longest = Some(longest.map_or(left, |l| l.max(left)));
            }
        }
        Ok(longest)
    }
}

/// Whether a failed command may show a failover or a resharding: the connection broke or
/// timed out, or the cluster redirected or refused it.
fn shows_topology_change(err: &RedisError) -> bool {
    crate::error::breaks_connection(err)
        || matches!(
            err.kind(),
            ErrorKind::ClusterConnectionNotFound
                | ErrorKind::Server(
                    ServerErrorKind::Moved
                        | ServerErrorKind::Ask
                        | ServerErrorKind::TryAgain
                        | ServerErrorKind::ClusterDown
                        | ServerErrorKind::MasterDown
                        | ServerErrorKind::ReadOnly
                )
        )
}

/// Whether `facts` has an entry for `address`.
fn facts_have(facts: &[(String, ServerFacts)], address: &str) -> bool {
    facts.iter().any(|(a, _)| a == address)
}

/// The master of `slot`, if a range covers it.
fn owner(slots: &[Owned], slot: u16) -> Option<&str> {
    let at = slots.partition_point(|r| r.first <= slot);
    let range = slots.get(at.checked_sub(1)?)?;
    (slot <= range.last).then_some(range.master.as_str())
}

/// `CLUSTER SLOTS`, then every listed node's facts (nodes that fail to answer are left out).
async fn read_cluster(
    conn: &mut ClusterConnection,
) -> redis::RedisResult<(Vec<Owned>, Vec<(String, ServerFacts)>)> {
    let reply = conn
        .route_command(
            redis::cmd("CLUSTER").arg("SLOTS").clone(),
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
        )
        .await?;
    let (slots, nodes) = parse_slots(&reply);
    let mut facts = Vec::with_capacity(nodes.len());
    let asks = nodes.into_iter().map(|(host, port)| {
        let mut conn = conn.clone();
        async move {
            let info = conn
                .route_command(
                    facts::info_cmd(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                        host: host.clone(),
                        port,
                    }),
                )
                .await
                .and_then(|v| redis::from_redis_value::<String>(v).map_err(Into::into));
            (format!("{host}:{port}"), info)
        }
    });
    for (address, info) in futures::future::join_all(asks).await {
        match info {
            Ok(info) => facts.push((address, ServerFacts::parse(&info))),
            Err(error) => {
                tracing::debug!(%error, %address, "INFO failed; this node's grace state was not refreshed");
            }
        }
    }
    Ok((slots, facts))
}

/// The masters of a `CLUSTER SLOTS` reply, each with the slot ranges it owns (first and last
/// slot, inclusive), in the order first listed: where the operator reads of `inspect/` walk.
pub(crate) fn masters_of(reply: &Value) -> Vec<(String, Vec<(u16, u16)>)> {
    let mut masters: Vec<(String, Vec<(u16, u16)>)> = Vec::new();
    for owned in parse_slots(reply).0 {
        match masters.iter_mut().find(|(m, _)| *m == owned.master) {
            Some((_, ranges)) => ranges.push((owned.first, owned.last)),
            None => masters.push((owned.master, vec![(owned.first, owned.last)])),
        }
    }
    masters
}

/// The owned ranges (sorted) and every node address (masters and replicas, once each) of a
/// `CLUSTER SLOTS` reply: `[[first, last, [host, port, id, ..], [replica ..] ..] ..]`.
fn parse_slots(reply: &Value) -> (Vec<Owned>, Vec<(String, u16)>) {
    let mut slots = Vec::new();
    let mut nodes: Vec<(String, u16)> = Vec::new();
    let Value::Array(ranges) = reply else {
        return (slots, nodes);
    };
    for range in ranges {
        let Value::Array(parts) = range else { continue };
        let (Some(first), Some(last)) = (int(parts.first()), int(parts.get(1))) else {
            continue;
        };
        let addresses: Vec<(String, u16)> = parts.iter().skip(2).filter_map(node).collect();
        for address in &addresses {
            if !nodes.contains(address) {
                nodes.push(address.clone());
            }
        }
        if let (Some((host, port)), Ok(first), Ok(last)) =
            (addresses.first(), u16::try_from(first), u16::try_from(last))
        {
            slots.push(Owned {
                first,
                last,
                master: format!("{host}:{port}"),
            });
        }
    }
    slots.sort_by_key(|r| r.first);
    (slots, nodes)
}

fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

/// `[host, port, ..]` of a `CLUSTER SLOTS` node entry.
fn node(v: &Value) -> Option<(String, u16)> {
    let Value::Array(parts) = v else { return None };
    let host = match parts.first()? {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok()?,
        Value::SimpleString(s) => s.clone(),
        _ => return None,
    };
    let port = u16::try_from(int(parts.get(1))?).ok()?;
    (!host.is_empty()).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn entry(port: i64) -> Value {
        Value::Array(vec![bulk("127.0.0.1"), Value::Int(port), bulk("id")])
    }

    #[test]
    fn parses_cluster_slots_and_finds_owners() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(10922),
                entry(7001),
                entry(7004),
            ]),
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                entry(7000),
                entry(7003),
            ]),
        ]);
        let (slots, nodes) = parse_slots(&reply);
        assert_eq!(slots.len(), 2);
        assert_eq!(nodes.len(), 4, "masters and replicas: {nodes:?}");
        assert_eq!(owner(&slots, 0), Some("127.0.0.1:7000"));
        assert_eq!(owner(&slots, 5460), Some("127.0.0.1:7000"));
        assert_eq!(owner(&slots, 5461), Some("127.0.0.1:7001"));
        assert_eq!(owner(&slots, 10922), Some("127.0.0.1:7001"));
        assert_eq!(owner(&slots, 10923), None, "no range covers it");
    }

    #[test]
    fn failures_that_may_show_a_failover_mark_the_state_stale() {
        let watch = ClusterGrace::new(
            GraceSettings {
                grace: Duration::from_secs(1),
                strict: false,
            },
            "",
            Duration::from_secs(1),
        );
        assert!(watch.needs_refresh(), "never refreshed");
        watch.state.lock().expect("state").refreshed = Some(Instant::now());
        assert!(!watch.needs_refresh());
        watch.saw_error(&RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "ERR",
        )));
        assert!(!watch.needs_refresh(), "a plain error reply shows nothing");
        watch.saw_error(&RedisError::from((
            ErrorKind::Server(ServerErrorKind::ClusterDown),
            "CLUSTERDOWN",
        )));
        assert!(watch.needs_refresh());
    }
}
