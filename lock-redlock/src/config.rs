//! Building a [`Redlock`]: its nodes, the per-node timeout and the clock-drift allowance.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::Lock;
use lock_core::{LockError, MAX_TTL};

use crate::node::Node;
use crate::redlock::Redlock;
use crate::settings::{Config, DEFAULT_DRIFT_CONSTANT, DEFAULT_DRIFT_FACTOR};

/// A node as added: its label, if given, and the store.
type NodeEntry = (Option<Arc<str>>, Arc<dyn Lock>);

impl Redlock {
    /// Starts configuring a Redlock; see [`RedlockBuilder`].
    pub fn builder() -> RedlockBuilder {
        RedlockBuilder::default()
    }
}

/// Configures a [`Redlock`]: its nodes (at least one; normally 3 or 5 independent Redis
/// masters), the per-node timeout and the clock-drift allowance.
///
/// ```
/// use std::time::Duration;
/// use lock_core::MemoryLock;
/// use lock_redlock::Redlock;
///
/// let redlock = Redlock::builder()
///     .named_node("a", MemoryLock::new())
///     .named_node("b", MemoryLock::new())
///     .named_node("c", MemoryLock::new())
///     .node_timeout(Duration::from_millis(100))
///     .drift_factor(0.02)
///     .build()?;
/// assert_eq!((redlock.node_count(), redlock.quorum()), (3, 2));
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[must_use]
#[derive(Clone)]
pub struct RedlockBuilder {
    nodes: Vec<NodeEntry>,
    node_timeout: Option<Duration>,
    drift_factor: f64,
    drift_constant: Duration,
}

impl Default for RedlockBuilder {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            node_timeout: None,
            drift_factor: DEFAULT_DRIFT_FACTOR,
            drift_constant: DEFAULT_DRIFT_CONSTANT,
        }
    }
}

impl RedlockBuilder {
    /// Adds a node, labelled by its position (`"0"`, `"1"`, ...) in metrics and logs.
    ///
    /// Each node must be an independent store: its own Redis master (not a replica of another
    /// node, not a second connection to the same server, not a shard of one Redis Cluster).
    pub fn node<L: Lock + 'static>(self, lock: L) -> Self {
        self.node_arc(Arc::new(lock))
    }

    /// Adds a shared node, labelled by its position.
    pub fn node_arc(mut self, lock: Arc<dyn Lock>) -> Self {
        self.nodes.push((None, lock));
        self
    }

    /// Adds a node with a label for the `node` label of metrics and for logs, such as
    /// `"redis-a"`. Labels must be unique and few (they are metric label values).
    pub fn named_node<L: Lock + 'static>(self, label: impl Into<Arc<str>>, lock: L) -> Self {
        self.named_node_arc(label, Arc::new(lock))
    }

    /// Adds a shared node with a label.
    pub fn named_node_arc(mut self, label: impl Into<Arc<str>>, lock: Arc<dyn Lock>) -> Self {
        self.nodes.push((Some(label.into()), lock));
        self
    }

    /// Adds several nodes, labelled by position.
    pub fn nodes<L: Lock + 'static>(mut self, locks: impl IntoIterator<Item = L>) -> Self {
        for lock in locks {
            self = self.node(lock);
        }
        self
    }

    /// A fixed per-node timeout for acquire, extend and release, instead of the default
    /// ([`default_node_timeout`](crate::default_node_timeout) of the TTL, and
    /// [`NODE_TIMEOUT_CEILING`](crate::NODE_TIMEOUT_CEILING) for release).
    ///
    /// Keep it small against the TTL: a node's late answer eats into the lease's validity.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = Some(timeout);
        self
    }

    /// The share of the TTL allowed for clock drift between this process and the nodes (default
    /// [`DEFAULT_DRIFT_FACTOR`], 1 %). Finite and in `[0, 1)`.
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// The constant part of the drift allowance (default [`DEFAULT_DRIFT_CONSTANT`], 2 ms).
    pub fn drift_constant(mut self, constant: Duration) -> Self {
        self.drift_constant = constant;
        self
    }

    /// The `Redlock`.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when there is no node, a node was added twice (the same
    /// `Arc`) or two nodes have the same label, the node timeout is zero, the drift factor is
    /// not finite or not in `[0, 1)`, or the drift constant is above [`MAX_TTL`].
    pub fn build(self) -> Result<Redlock, LockError> {
        if self.nodes.is_empty() {
            return Err(LockError::invalid("a Redlock needs at least one node"));
        }
        if self.node_timeout.is_some_and(|t| t.is_zero()) {
            return Err(LockError::invalid("the node timeout must not be zero"));
        }
        if !(self.drift_factor.is_finite() && (0.0..1.0).contains(&self.drift_factor)) {
            return Err(LockError::invalid(format!(
                "the drift factor {} is not in [0, 1)",
                self.drift_factor
            )));
        }
        if self.drift_constant > MAX_TTL {
            return Err(LockError::invalid(format!(
                "the drift constant {:?} is above the maximum TTL",
                self.drift_constant
            )));
        }
        let mut labels = HashSet::new();
        let mut seen = HashSet::new();
        let mut nodes = Vec::with_capacity(self.nodes.len());
        for (i, (label, lock)) in self.nodes.into_iter().enumerate() {
            let label = label.unwrap_or_else(|| i.to_string().into());
            if !labels.insert(Arc::clone(&label)) {
                return Err(LockError::invalid(format!(
                    "two Redlock nodes are labelled {label:?}"
                )));
            }
            // The same store twice would count one vote twice.
            if !seen.insert(Arc::as_ptr(&lock).cast::<()>()) {
                return Err(LockError::invalid(format!(
                    "Redlock node {label:?} is a node added before: nodes must be independent"
                )));
            }
            nodes.push(Node::new(lock, label));
        }
        Ok(Redlock::assemble(
            nodes,
            Config {
                node_timeout: self.node_timeout,
                drift_factor: self.drift_factor,
                drift_constant: self.drift_constant,
            },
        ))
    }
}

impl fmt::Debug for RedlockBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, (label, lock))| {
                format!(
                    "{}: {}",
                    label
                        .as_deref()
                        .map_or_else(|| i.to_string(), str::to_owned),
                    lock.backend()
                )
            })
            .collect();
        f.debug_struct("RedlockBuilder")
            .field("nodes", &nodes)
            .field("node_timeout", &self.node_timeout)
            .field("drift_factor", &self.drift_factor)
            .field("drift_constant", &self.drift_constant)
            .finish()
    }
}
