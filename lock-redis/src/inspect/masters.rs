//! The masters an inspection walks: the one server (or the master Sentinel names), or every
//! master of a Redis Cluster with the slots it serves (`CLUSTER SLOTS`, asked once per
//! listing over the lock's own cluster connection, which then routes each read by address).

use lock_core::{LockError, Op};

use crate::error::BACKEND;
use crate::executor::Executor;
use crate::topology::Topology;

/// A cluster master's address (`host`, `port`) and the slot ranges it serves (first and last,
/// inclusive).
type Node = ((String, u16), Vec<(u16, u16)>);

/// One master: its label (the `node` of what it holds) and, on a cluster, its address and
/// slots.
pub(super) struct Master {
    /// `host:port` on a cluster; the server's label elsewhere.
    pub(super) label: String,
    /// On a cluster: its address (reads are routed to it) and the slot ranges it serves.
    node: Option<Node>,
}

impl Master {
    /// Where reads of its keys are routed: `None` for the one server.
    pub(super) fn route(&self) -> Option<&(String, u16)> {
        self.node.as_ref().map(|(address, _)| address)
    }

    /// Whether release channels are sharded here (a cluster's: `SHARDNUMSUB`).
    pub(super) fn sharded(&self) -> bool {
        self.node.is_some()
    }

    /// Whether it serves `key`'s slot (always, for the one server).
    fn serves(&self, key: &str) -> bool {
        let slot = crate::layout::slot::key_slot(key);
        self.node.as_ref().is_none_or(|(_, ranges)| {
            ranges
                .iter()
                .any(|(first, last)| (*first..=*last).contains(&slot))
        })
    }
}

/// Every master of the deployment.
///
/// # Errors
/// As [`Executor::read_pipeline`]; [`LockError::Backend`] when a cluster lists no master.
pub(super) async fn masters(exec: &Executor) -> Result<Vec<Master>, LockError> {
    if exec.topology() != Topology::Cluster {
        return Ok(vec![Master {
            label: exec.server().to_owned(),
            node: None,
        }]);
    }
    cluster_masters(exec).await
}

/// Every master of a Redis Cluster, with its slots (`CLUSTER SLOTS`).
#[cfg(feature = "cluster")]
async fn cluster_masters(exec: &Executor) -> Result<Vec<Master>, LockError> {
    let mut pipe = redis::pipe();
    pipe.cmd("CLUSTER").arg("SLOTS");
    let reply = exec.read_pipeline(&pipe, None).await?;
    let slots = reply.first().unwrap_or(&redis::Value::Nil);
    let masters: Vec<Master> = crate::safety::cluster_grace::masters_of(slots)
        .into_iter()
        .filter_map(|(label, ranges)| {
            let (host, port) = label.rsplit_once(':')?;
            let address = (host.to_owned(), port.parse().ok()?);
            Some(Master {
                label,
                node: Some((address, ranges)),
            })
        })
        .collect();
    if masters.is_empty() {
        return Err(LockError::Backend {
            backend: BACKEND,
            op: Op::Read,
            retryable: true,
            source: "the cluster lists no master with slots (CLUSTER SLOTS)".into(),
        });
    }
    Ok(masters)
}

/// Without the `cluster` feature there is no cluster connection to walk.
#[cfg(not(feature = "cluster"))]
async fn cluster_masters(_exec: &Executor) -> Result<Vec<Master>, LockError> {
    Err(LockError::Unsupported {
        backend: BACKEND,
        kind: "cluster",
    })
}

/// The master among `masters` that serves `key`.
///
/// # Errors
/// [`LockError::Backend`] when none does (the cluster's slots are not all assigned).
pub(super) fn master_for<'a>(masters: &'a [Master], key: &str) -> Result<&'a Master, LockError> {
    masters
        .iter()
        .find(|m| m.serves(key))
        .ok_or_else(|| LockError::Backend {
            backend: BACKEND,
            op: Op::Read,
            retryable: true,
            source: format!("no master serves the slot of {key:?}",).into(),
        })
}
