//! [`RedisCluster`]: a real Redis Cluster of throwaway nodes.

mod migration;
mod node;

use std::fmt::Write as _;
use std::io;
use std::time::{Duration, Instant};

use crate::RedisServer;
use crate::servers::poll;
use crate::servers::role::{self, Role, RoleReport};

pub use migration::SlotMigration;
pub use node::ClusterNode;
use node::NodeLine;

/// Number of hash slots in a Redis Cluster.
pub const CLUSTER_SLOTS: u16 = 16_384;

/// Timeout of each query made while inspecting the cluster.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between two inspections while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How long one `CLUSTER FAILOVER` is given before it is sent again: just
/// over the 5 s after which Redis abandons a manual failover, so that two
/// attempts never overlap.
const MANUAL_FAILOVER_WAIT: Duration = Duration::from_secs(6);
/// `CLUSTER FAILOVER` attempts by [`RedisCluster::failover`].
const MANUAL_FAILOVER_ATTEMPTS: u32 = 3;
/// Log lines per node included in start-up errors.
const ERROR_LOG_LINES: usize = 8;

#[derive(Debug, Clone)]
struct ClusterConfig {
    masters: usize,
    replicas_per_master: usize,
    node_timeout: Duration,
    wait_timeout: Duration,
    extra: Vec<String>,
    /// Nodes are `valkey-server` rather than `redis-server`.
    valkey: bool,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            masters: 3,
            replicas_per_master: 1,
            node_timeout: Duration::from_millis(2_000),
            wait_timeout: Duration::from_secs(30),
            extra: Vec::new(),
            valkey: false,
        }
    }
}

/// Configures a [`RedisCluster`] before starting it; see
/// [`RedisCluster::builder`].
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct RedisClusterBuilder {
    config: ClusterConfig,
}

impl RedisClusterBuilder {
    /// Number of masters (default 3); the slots are split evenly between
    /// them. Automatic failover needs a majority of masters alive, so use
    /// at least 3 to test it.
    pub fn masters(mut self, n: usize) -> Self {
        self.config.masters = n;
        self
    }

    /// Replicas of each master (default 1).
    pub fn replicas_per_master(mut self, n: usize) -> Self {
        self.config.replicas_per_master = n;
        self
    }

    /// `cluster-node-timeout` of every node (default 2 s): how long a node
    /// must be unreachable before it is considered failing. Smaller values
    /// fail over faster but risk spurious failovers on a loaded machine.
    /// Whole milliseconds; at least 100 ms is used.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.config.node_timeout = timeout;
        self
    }

    /// Upper bound of every wait (default 30 s): for the cluster to form,
    /// for a failover, for a migration to settle.
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.config.wait_timeout = timeout;
        self
    }

    /// Appends one raw command-line argument to every node, e.g.
    /// `.arg("--cluster-allow-reads-when-down").arg("yes")`.
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.config.extra.push(a.into());
        self
    }

    /// Runs every node as Valkey's `valkey-server --cluster-enabled yes`
    /// ([`RedisServerBuilder::valkey`](crate::RedisServerBuilder::valkey)) instead of
    /// `redis-server`: Valkey's cluster speaks the same bus and commands.
    pub fn valkey(mut self) -> Self {
        self.config.valkey = true;
        self
    }

    /// Starts the nodes, assigns the slots to the masters, joins the nodes
    /// (`CLUSTER MEET`), attaches the replicas (`CLUSTER REPLICATE`) and
    /// waits until the cluster is healthy (see
    /// [`RedisCluster::wait_until_healthy`]).
    ///
    /// Nodes `0..masters` are the masters (master `i` holds the `i`-th
    /// slice of the slots), followed by the replicas of master 0, then of
    /// master 1, and so on.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] for zero masters, or more masters
    /// than slots; otherwise if a node does not start or the cluster does
    /// not become healthy within the wait timeout (the message then
    /// includes the end of each node's log). Nodes already started are
    /// stopped.
    pub fn start(self) -> io::Result<RedisCluster> {
        let config = self.config;
        if config.masters == 0 || config.masters > usize::from(CLUSTER_SLOTS) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a cluster needs 1..={CLUSTER_SLOTS} masters, not {}",
                    config.masters
                ),
            ));
        }
        let total = config
            .replicas_per_master
            .checked_add(1)
            .and_then(|per| per.checked_mul(config.masters))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "too many nodes"))?;
        let node_timeout_ms = config.node_timeout.as_millis().max(100).to_string();
        let mut nodes = Vec::with_capacity(total);
        for _ in 0..total {
            let mut builder = RedisServer::builder()
                .cluster_enabled(true)
                .arg("--cluster-node-timeout")
                .arg(node_timeout_ms.as_str())
                // A replica may always fail over, however stale (no data-age check).
                .arg("--cluster-replica-validity-factor")
                .arg("0")
                // Full syncs start at once rather than after 5 s.
                .arg("--repl-diskless-sync-delay")
                .arg("0")
                .arg("--appendonly")
                .arg("no")
                .arg("--save")
                .arg("");
            for a in &config.extra {
                builder = builder.arg(a.as_str());
            }
            if config.valkey {
                builder = builder.valkey();
            }
            let server = builder.start()?;
            let id = server.command(&["CLUSTER", "MYID"])?;
            nodes.push(ClusterNode { server, id });
        }
        let cluster = RedisCluster { nodes, config };
        cluster.form().map_err(|e| cluster.with_logs(e))?;
        Ok(cluster)
    }
}

/// A Redis Cluster of throwaway [`RedisServer`]s on `127.0.0.1`: by default
/// 3 masters and 3 replicas, with a 2 s node timeout.
///
/// Nodes are addressed by their index in [`nodes`](Self::nodes), which never
/// changes; what a node is (master or replica, which slots) is asked of the
/// nodes each time, since failovers and migrations change it. Methods taking
/// a node index panic if it is out of range. Every wait is bounded by the
/// builder's [`wait_timeout`](RedisClusterBuilder::wait_timeout).
///
/// A node is *live* when its process is running and not paused; stopped and
/// paused nodes are expected to be failed over, and are ignored by the health
/// checks. Dropping the cluster kills every node by its PID.
///
/// ```no_run
/// use lock_testkit::RedisCluster;
///
/// let mut cluster = RedisCluster::start()?;
/// let slot = cluster.slot_of("lock:{orders}")?;
/// let master = cluster.master_for_slot(slot)?;
/// let replica = cluster.replica_of(master)?;
/// cluster.kill(master);
/// assert_eq!(cluster.wait_for_failover(slot)?, replica);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<ClusterNode>,
    config: ClusterConfig,
}

impl RedisCluster {
    /// Starts a cluster with the default configuration: 3 masters, 1 replica
    /// each, 2 s node timeout.
    ///
    /// # Errors
    ///
    /// See [`RedisClusterBuilder::start`].
    pub fn start() -> io::Result<RedisCluster> {
        Self::builder().start()
    }

    /// A builder for another shape or timing.
    pub fn builder() -> RedisClusterBuilder {
        RedisClusterBuilder::default()
    }

    /// All nodes, in creation order (see [`RedisClusterBuilder::start`]).
    pub fn nodes(&self) -> &[ClusterNode] {
        &self.nodes
    }

    /// One node, mutably (e.g. to stop or restart its server yourself).
    ///
    /// # Panics
    ///
    /// If `node` is out of range.
    pub fn node_mut(&mut self, node: usize) -> &mut ClusterNode {
        &mut self.nodes[node]
    }

    /// `redis://127.0.0.1:PORT/` of every node, live or not; any of them
    /// can seed a cluster client.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(ClusterNode::url).collect()
    }

    /// Indices of the live nodes that report themselves master right now.
    /// Nodes that do not answer are left out.
    pub fn masters(&self) -> Vec<usize> {
        self.live_with_role(Role::Master)
    }

    /// Indices of the live nodes that report themselves replica right now.
    /// Nodes that do not answer are left out.
    pub fn replicas(&self) -> Vec<usize> {
        self.live_with_role(Role::Replica)
    }

    /// URLs of [`masters`](Self::masters).
    pub fn master_urls(&self) -> Vec<String> {
        self.masters()
            .into_iter()
            .map(|i| self.nodes[i].url())
            .collect()
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`, asked of a live node).
    ///
    /// # Errors
    ///
    /// If no live node answers.
    pub fn slot_of(&self, key: &str) -> io::Result<u16> {
        let mut last = None;
        for node in self.live_nodes() {
            match node
                .server
                .command_with_timeout(&["CLUSTER", "KEYSLOT", key], PROBE_TIMEOUT)
            {
                Ok(text) => {
                    return text.trim().parse().map_err(|_| {
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("CLUSTER KEYSLOT replied {text:?}"),
                        )
                    });
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| no_live_node("CLUSTER KEYSLOT")))
    }

    /// The node that serves `slot` right now: the live master that claims
    /// it in its own `CLUSTER NODES` line (the one with the highest config
    /// epoch if, transiently, several do). During a migration this is still
    /// the source.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] for a slot ≥ 16384;
    /// [`io::ErrorKind::NotFound`] if no live master claims the slot (e.g.
    /// its master was killed and not yet failed over).
    pub fn master_for_slot(&self, slot: u16) -> io::Result<usize> {
        check_slot(slot)?;
        let mut best: Option<(u64, usize)> = None;
        for (i, node) in self.nodes.iter().enumerate() {
            if !node.is_live() {
                continue;
            }
            let Ok(me) = node.myself_within(PROBE_TIMEOUT) else {
                continue;
            };
            if me.is_master()
                && me.owns(slot)
                && best.is_none_or(|(epoch, _)| me.config_epoch > epoch)
            {
                best = Some((me.config_epoch, i));
            }
        }
        best.map(|(_, i)| i).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no live master claims slot {slot}"),
            )
        })
    }

    /// A live replica of `master` (the first, in node order, whose `ROLE`
    /// names `master`'s port).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`] if `master` has no live replica.
    ///
    /// # Panics
    ///
    /// If `master` is out of range.
    pub fn replica_of(&self, master: usize) -> io::Result<usize> {
        self.replicas_of(master).first().copied().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "node {master} (port {}) has no live replica",
                    self.nodes[master].port()
                ),
            )
        })
    }

    /// All live replicas of `master`, in node order.
    ///
    /// # Panics
    ///
    /// If `master` is out of range.
    pub fn replicas_of(&self, master: usize) -> Vec<usize> {
        let master_port = self.nodes[master].port();
        self.nodes
            .iter()
            .enumerate()
            .filter(|(i, node)| *i != master && node.is_live())
            .filter(|(_, node)| {
                matches!(
                    role::role_report(&node.server, PROBE_TIMEOUT),
                    Ok(RoleReport::Replica { master_port: p }) if p == master_port
                )
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// Promotes `replica` with a coordinated `CLUSTER FAILOVER` (its master
    /// must be reachable), then waits until it reports itself master and
    /// the cluster is healthy again (the old master is then its replica).
    /// The command is sent again if the replica is still not master 6 s
    /// later (Redis abandons a manual failover after 5 s), at most 3 times
    /// in all.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] if `replica` is not a replica;
    /// [`io::ErrorKind::TimedOut`] if the failover does not complete in time.
    ///
    /// # Panics
    ///
    /// If `replica` is out of range.
    pub fn failover(&self, replica: usize) -> io::Result<()> {
        let node = &self.nodes[replica];
        if node.role()? != Role::Replica {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("node {replica} (port {}) is not a replica", node.port()),
            ));
        }
        let started = Instant::now();
        for attempt in 1..=MANUAL_FAILOVER_ATTEMPTS {
            node.command(&["CLUSTER", "FAILOVER"])?;
            let left = self.config.wait_timeout.saturating_sub(started.elapsed());
            let promoted = poll::until(
                &format!("node {replica} to become master"),
                left.min(MANUAL_FAILOVER_WAIT),
                POLL_INTERVAL,
                || match node.role() {
                    Ok(Role::Master) => Ok(()),
                    Ok(Role::Replica) => Err("still a replica".to_owned()),
                    Err(e) => Err(e.to_string()),
                },
            );
            match promoted {
                Ok(()) => break,
                Err(err)
                    if attempt == MANUAL_FAILOVER_ATTEMPTS
                        || started.elapsed() >= self.config.wait_timeout =>
                {
                    return Err(err);
                }
                Err(_) => {}
            }
        }
        let left = self.config.wait_timeout.saturating_sub(started.elapsed());
        self.wait_healthy_within(left)
    }

    /// Kills `node` (`SIGKILL` by its PID, via [`RedisServer::stop`]). Its
    /// directory and port are kept for [`start_again`](Self::start_again).
    ///
    /// # Panics
    ///
    /// If `node` is out of range.
    pub fn kill(&mut self, node: usize) {
        self.nodes[node].server.stop();
    }

    /// Starts a killed `node` again on its port with its `nodes.conf`, and
    /// waits until the cluster is healthy; a former master that was failed
    /// over comes back as a replica of its successor.
    ///
    /// # Errors
    ///
    /// If the server does not start (e.g. it is still running), or the
    /// cluster does not become healthy in time.
    ///
    /// # Panics
    ///
    /// If `node` is out of range.
    pub fn start_again(&mut self, node: usize) -> io::Result<()> {
        self.nodes[node].server.start_again()?;
        self.wait_until_healthy()
    }

    /// Waits until a live master serves `slot` and the cluster is healthy,
    /// e.g. after [`kill`](Self::kill)ing or pausing its master, and
    /// returns that master. If the slot's master was never lost, this
    /// returns it at once.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::TimedOut`] if that does not happen within the wait
    /// timeout; [`io::ErrorKind::InvalidInput`] for a slot ≥ 16384.
    pub fn wait_for_failover(&self, slot: u16) -> io::Result<usize> {
        check_slot(slot)?;
        poll::until(
            &format!("a live master for slot {slot} and a healthy cluster"),
            self.config.wait_timeout,
            POLL_INTERVAL,
            || {
                self.health()?;
                self.master_for_slot(slot).map_err(|e| e.to_string())
            },
        )
    }

    /// Waits until the cluster is healthy, as seen by every live node:
    /// `cluster_state:ok` with all 16384 slots ok; every live node known to
    /// every other, not flagged failing, its link connected, and seen with
    /// the role it reports (`ROLE`: master, or replica of a given master);
    /// every slot owned by a live master, the same one in every node's view;
    /// and every live replica's master live, its link up and not in a full
    /// sync.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::TimedOut`] (with what was last wrong) if that does
    /// not happen within the wait timeout.
    pub fn wait_until_healthy(&self) -> io::Result<()> {
        self.wait_healthy_within(self.config.wait_timeout)
    }

    fn wait_healthy_within(&self, timeout: Duration) -> io::Result<()> {
        poll::until("a healthy cluster", timeout, POLL_INTERVAL, || {
            self.health()
        })
    }

    fn live_nodes(&self) -> impl Iterator<Item = &ClusterNode> {
        self.nodes.iter().filter(|n| n.is_live())
    }

    fn live_with_role(&self, wanted: Role) -> Vec<usize> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| node.is_live())
            .filter(|(_, node)| role::role(&node.server, PROBE_TIMEOUT).ok() == Some(wanted))
            .map(|(i, _)| i)
            .collect()
    }

    /// `Ok` if the cluster is healthy (see [`Self::wait_until_healthy`]),
    /// else what is wrong first.
    fn health(&self) -> Result<(), String> {
        let live: Vec<(usize, &ClusterNode)> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.is_live())
            .collect();
        if live.is_empty() {
            return Err("no live node".to_owned());
        }
        // What every live node says it is: master, or replica of which live node.
        let mut masters_of: Vec<Option<&str>> = Vec::with_capacity(live.len());
        for &(i, node) in &live {
            let port = node.port();
            match role::role_report(&node.server, PROBE_TIMEOUT)
                .map_err(|e| format!("node {i} (port {port}): ROLE: {e}"))?
            {
                RoleReport::Master => masters_of.push(None),
                RoleReport::Replica { master_port } => {
                    let (_, master) = live
                        .iter()
                        .find(|(_, n)| n.port() == master_port)
                        .ok_or_else(|| {
                            format!("node {i} replicates port {master_port}, not a live node")
                        })?;
                    role::replica_in_sync(&node.server, PROBE_TIMEOUT)
                        .map_err(|e| format!("node {i}: {e}"))?;
                    masters_of.push(Some(master.id.as_str()));
                }
                RoleReport::Sentinel => return Err(format!("node {i} is a sentinel")),
            }
        }
        let mut reference: Option<(usize, SlotOwners)> = None;
        for &(i, node) in &live {
            let port = node.port();
            let info = node
                .server
                .command_with_timeout(&["CLUSTER", "INFO"], PROBE_TIMEOUT)
                .map_err(|e| format!("node {i} (port {port}): CLUSTER INFO: {e}"))?;
            let state = role::info_field(&info, "cluster_state").unwrap_or("?");
            let slots_ok = role::info_field(&info, "cluster_slots_ok").unwrap_or("?");
            if state != "ok" || slots_ok != CLUSTER_SLOTS.to_string() {
                return Err(format!(
                    "node {i} (port {port}): cluster_state:{state} cluster_slots_ok:{slots_ok}"
                ));
            }
            let view = node
                .view(PROBE_TIMEOUT)
                .map_err(|e| format!("node {i} (port {port}): CLUSTER NODES: {e}"))?;
            // Every live node known, reachable, and with the role it reports
            // (a master drops a manual failover request from a node it does
            // not yet see as its replica).
            for (&(j, other), master_of) in live.iter().zip(&masters_of) {
                let line = view
                    .iter()
                    .find(|l| l.id == other.id)
                    .ok_or_else(|| format!("node {i} does not know node {j} yet"))?;
                if let Some(trouble) = line.trouble() {
                    return Err(format!("node {i} sees node {j}: {trouble}"));
                }
                let seen = (line.is_master(), line.master_id.as_deref());
                let agrees = match master_of {
                    None => seen.0,
                    Some(m) => line.has_flag("slave") && seen.1 == Some(*m),
                };
                if !agrees {
                    return Err(format!(
                        "node {i} does not yet see node {j} as {}",
                        master_of.map_or("a master".to_owned(), |m| format!("a replica of {m}"))
                    ));
                }
            }
            let owners = slot_owners(&view);
            if let Some((_, _, owner)) = owners
                .iter()
                .find(|(_, _, owner)| !live.iter().any(|(_, n)| n.id == *owner))
            {
                return Err(format!(
                    "node {i} sees slots owned by {owner}, which is not a live node"
                ));
            }
            match &reference {
                None => reference = Some((i, owners)),
                Some((r, expected)) if *expected != owners => {
                    return Err(format!(
                        "nodes {r} and {i} disagree on slot owners: {expected:?} vs {owners:?}"
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Slots, epochs, `CLUSTER MEET`, `CLUSTER REPLICATE`, then waits.
    fn form(&self) -> io::Result<()> {
        let masters = self.config.masters;
        let per_master = self.config.replicas_per_master;
        let timeout = self.config.wait_timeout;
        for (i, node) in self.nodes[..masters].iter().enumerate() {
            let (start, end) = slice_of_slots(i, masters)?;
            node.command(&[
                "CLUSTER",
                "ADDSLOTSRANGE",
                &start.to_string(),
                &end.to_string(),
            ])?;
        }
        for (i, node) in self.nodes.iter().enumerate() {
            node.command(&["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()])?;
        }
        let seed = &self.nodes[0];
        for node in &self.nodes[1..] {
            let bus = node.server.cluster_bus_port().ok_or_else(|| {
                io::Error::other(format!("node on port {} has no bus port", node.port()))
            })?;
            seed.command(&[
                "CLUSTER",
                "MEET",
                "127.0.0.1",
                &node.port().to_string(),
                &bus.to_string(),
            ])?;
        }
        let total = self.nodes.len();
        poll::until(
            "every node to know every other",
            timeout,
            POLL_INTERVAL,
            || {
                for (i, node) in self.nodes.iter().enumerate() {
                    let view = node
                        .view(PROBE_TIMEOUT)
                        .map_err(|e| format!("node {i}: CLUSTER NODES: {e}"))?;
                    let known = view.iter().filter(|l| l.trouble().is_none()).count();
                    if known != total {
                        return Err(format!("node {i} knows {known} of {total} nodes"));
                    }
                }
                Ok(())
            },
        )?;
        for (r, replica) in self.nodes[masters..].iter().enumerate() {
            let master = &self.nodes[r / per_master.max(1)];
            poll::until(
                &format!("node {} to replicate node {}", masters + r, r / per_master),
                timeout,
                POLL_INTERVAL,
                || {
                    replica
                        .command(&["CLUSTER", "REPLICATE", &master.id])
                        .map(drop)
                        .map_err(|e| e.to_string())
                },
            )?;
        }
        poll::until("the cluster to form", timeout, POLL_INTERVAL, || {
            for (r, replica) in self.nodes[masters..].iter().enumerate() {
                let master_port = self.nodes[r / per_master.max(1)].port();
                match role::role_report(&replica.server, PROBE_TIMEOUT) {
                    Ok(RoleReport::Replica { master_port: p }) if p == master_port => {}
                    other => {
                        return Err(format!(
                            "node {} is not yet a replica of port {master_port}: {other:?}",
                            masters + r
                        ));
                    }
                }
            }
            self.health()
        })
    }

    /// Adds the end of every node's log to a start-up error.
    fn with_logs(&self, err: io::Error) -> io::Error {
        let mut msg = err.to_string();
        for (i, node) in self.nodes.iter().enumerate() {
            let tail = node.server.log_tail();
            let lines: Vec<&str> = tail.lines().collect();
            let from = lines.len().saturating_sub(ERROR_LOG_LINES);
            let _ = write!(
                msg,
                "\n--- node {i} (port {}) log ---\n{}",
                node.port(),
                lines[from..].join("\n")
            );
        }
        io::Error::new(err.kind(), msg)
    }
}

impl Drop for RedisCluster {
    /// Kills every node by its PID (each [`RedisServer`] also does so when
    /// dropped; this just makes the order explicit).
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.server.stop();
        }
    }
}

/// `(start, end, owner id)` for every slot range claimed by a master in a
/// view, sorted.
type SlotOwners = Vec<(u16, u16, String)>;

fn slot_owners(view: &[NodeLine]) -> SlotOwners {
    let mut owners: SlotOwners = view
        .iter()
        .filter(|l| l.is_master())
        .flat_map(|l| {
            l.slots
                .iter()
                .map(move |r| (*r.start(), *r.end(), l.id.clone()))
        })
        .collect();
    owners.sort();
    owners
}

/// The slots of master `i` out of `n`: the `i`-th of `n` even slices.
fn slice_of_slots(i: usize, n: usize) -> io::Result<(u16, u16)> {
    let total = usize::from(CLUSTER_SLOTS);
    let to_slot = |x: usize| {
        u16::try_from(x).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "slot overflow"))
    };
    let start = to_slot(i * total / n)?;
    let end = to_slot((i + 1) * total / n - 1)?;
    Ok((start, end))
}

fn check_slot(slot: u16) -> io::Result<()> {
    if slot < CLUSTER_SLOTS {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("slot {slot} is out of range (0..{CLUSTER_SLOTS})"),
        ))
    }
}

fn no_live_node(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        format!("{what}: no live node in the cluster"),
    )
}

#[cfg(test)]
mod tests {
    use super::{CLUSTER_SLOTS, slice_of_slots};

    #[test]
    fn slices_cover_all_slots() {
        for n in [1, 2, 3, 5, 7] {
            let mut next = 0_u32;
            for i in 0..n {
                let (start, end) = slice_of_slots(i, n).expect("slice");
                assert_eq!(u32::from(start), next);
                assert!(end >= start);
                next = u32::from(end) + 1;
            }
            assert_eq!(next, u32::from(CLUSTER_SLOTS));
        }
        assert_eq!(slice_of_slots(0, 3).expect("slice"), (0, 5460));
        assert_eq!(slice_of_slots(2, 3).expect("slice"), (10922, 16383));
    }
}
