//! [`EtcdCluster`]: throwaway etcd clusters (1 or 3 members, or any odd count) on free
//! loopback ports, for lock-etcd's tests, torture runs and benchmarks.

mod binary;
mod http;
mod member;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nix::sys::signal::Signal;

pub use binary::{ETCD_VERSION, etcd_install_dir, try_etcd_binary};
pub use member::EtcdMember;

use crate::servers::launch::{Launch, START_ATTEMPTS};
use crate::servers::poll;
use crate::servers::port::try_free_port;
use crate::servers::proxy::FaultProxy;
use member::MemberSpec;

/// How long a cluster may take to become healthy (a leader elected, quorum reads served).
const HEALTHY_TIMEOUT: Duration = Duration::from_secs(30);
/// The pause between two checks of a wait.
const POLL: Duration = Duration::from_millis(50);

/// Configures an [`EtcdCluster`] before starting it; see [`EtcdCluster::builder`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct EtcdClusterBuilder {
    members: usize,
    heartbeat: Duration,
    election: Duration,
}

impl Default for EtcdClusterBuilder {
    fn default() -> Self {
        Self {
            members: 1,
            // etcd's own defaults: shorter ones elect spuriously on a busy shared machine.
            heartbeat: Duration::from_millis(100),
            election: Duration::from_millis(1_000),
        }
    }
}

impl EtcdClusterBuilder {
    /// How many members (default 1). Use an odd count: 3 survives the loss of one.
    pub fn members(mut self, members: usize) -> Self {
        self.members = members;
        self
    }

    /// Raft's heartbeat interval and election timeout (`--heartbeat-interval`,
    /// `--election-timeout`; default 100 ms and 1 s). A shorter election timeout makes a
    /// leader's loss cost less, and spurious elections on a loaded machine more likely.
    pub fn raft_timing(mut self, heartbeat: Duration, election: Duration) -> Self {
        self.heartbeat = heartbeat;
        self.election = election;
        self
    }

    /// Starts every member on free loopback ports (each behind two fault proxies) and waits
    /// until each is healthy: a leader is elected and serves quorum reads.
    ///
    /// If a member exits before its port accepts (typically because another process took a
    /// port), the whole cluster is started again on fresh ports, at most 5 times.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] for 0 members; otherwise if `etcd` cannot be found or
    /// spawned, or the cluster does not become healthy within 30 s (the message then includes
    /// the members' logs).
    pub fn start(self) -> io::Result<EtcdCluster> {
        if self.members == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an etcd cluster needs at least one member",
            ));
        }
        let binary = try_etcd_binary()?;
        let mut exits = String::new();
        for attempt in 1..=START_ATTEMPTS {
            let mut cluster = EtcdCluster {
                members: self.fresh_members(&binary)?,
            };
            match cluster.spawn_all()? {
                None => {
                    cluster.wait_healthy(HEALTHY_TIMEOUT)?;
                    return Ok(cluster);
                }
                Some(exit) => {
                    exits.push_str(&format!("\n  attempt {attempt}: {exit}"));
                }
            }
        }
        Err(io::Error::other(format!(
            "etcd exited before becoming ready on {START_ATTEMPTS} sets of fresh ports:{exits}"
        )))
    }

    fn fresh_members(&self, binary: &std::path::Path) -> io::Result<Vec<EtcdMember>> {
        // A token per cluster, so that members of two clusters can never join each other.
        static CLUSTERS: AtomicU64 = AtomicU64::new(0);
        let token = format!(
            "lock-testkit-{}-{}",
            std::process::id(),
            CLUSTERS.fetch_add(1, Ordering::Relaxed)
        );
        let mut planned = Vec::with_capacity(self.members);
        for i in 0..self.members {
            let client_port = try_free_port()?;
            let peer_port = try_free_port()?;
            let client_proxy = FaultProxy::start(loopback(client_port))?;
            let peer_proxy = FaultProxy::start(loopback(peer_port))?;
            planned.push((
                format!("m{i}"),
                client_port,
                peer_port,
                client_proxy,
                peer_proxy,
            ));
        }
        let initial_cluster = planned
            .iter()
            .map(|(name, _, _, _, peer)| format!("{name}=http://{}", peer.addr()))
            .collect::<Vec<_>>()
            .join(",");
        planned
            .into_iter()
            .map(|(name, client_port, peer_port, client_proxy, peer_proxy)| {
                let spec = MemberSpec {
                    name,
                    client_port,
                    peer_port,
                    initial_cluster: initial_cluster.clone(),
                    token: token.clone(),
                    heartbeat: self.heartbeat,
                    election: self.election,
                };
                EtcdMember::new(binary.to_owned(), spec, client_proxy, peer_proxy)
            })
            .collect()
    }
}

/// A running etcd cluster of throwaway members on `127.0.0.1`, each in its own temporary
/// directory, killed by its own PID (`SIGKILL`, then reaped) when the cluster is dropped.
///
/// Every member sits behind two [`FaultProxy`]s: one in front of its client port (the
/// [`endpoints`](Self::endpoints) clients use) and one in front of its peer port (the peer URL
/// it advertises to the others). A member can be killed, started again on the same ports and
/// data, paused (`SIGSTOP`) and resumed, or partitioned from clients and peers. The binary is
/// found by [`try_etcd_binary`]; `scripts/ensure-etcd.sh` installs etcd 3.5.1.
///
/// Members run with `--unsafe-no-fsync`: a killed process keeps what it wrote, and no test
/// simulates an operating-system crash.
///
/// ```no_run
/// use lock_testkit::EtcdCluster;
///
/// let mut cluster = EtcdCluster::builder().members(3).start()?;
/// let endpoints = cluster.endpoints(); // give these to the client
/// let leader = cluster.leader()?;
/// cluster.kill(leader);
/// let next = cluster.leader()?; // bounded wait for a new one
/// assert_ne!(next, leader);
/// cluster.restart(leader)?; // same ports, same data
/// # drop(endpoints);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<EtcdMember>,
}

impl EtcdCluster {
    /// Starts a one-member cluster; see [`EtcdClusterBuilder::start`].
    ///
    /// # Errors
    /// See [`EtcdClusterBuilder::start`].
    pub fn start() -> io::Result<EtcdCluster> {
        Self::builder().start()
    }

    /// A builder: member count, Raft timing.
    pub fn builder() -> EtcdClusterBuilder {
        EtcdClusterBuilder::default()
    }

    /// Its members, in the order of their names (`m0`, `m1`, ...).
    pub fn members(&self) -> &[EtcdMember] {
        &self.members
    }

    /// Member `i`.
    ///
    /// # Panics
    /// If there is no member `i`.
    pub fn member(&self, i: usize) -> &EtcdMember {
        &self.members[i]
    }

    /// How many members it has (running or not).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always `false`: a cluster has at least one member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Every member's client endpoint (`http://127.0.0.1:PORT`, through its client proxy).
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(EtcdMember::endpoint).collect()
    }

    /// Kills member `i` with `SIGKILL` by its PID (like a crash) and reaps it. Its ports and
    /// data stay for [`restart`](Self::restart). Does nothing if it is stopped.
    ///
    /// # Panics
    /// If there is no member `i`.
    pub fn kill(&mut self, i: usize) {
        self.members[i].kill();
    }

    /// Starts member `i` again after [`kill`](Self::kill), on the same ports with the same
    /// data directory, and waits until its client port accepts (not until it is healthy: on
    /// its own it may have no quorum; see [`wait_healthy`](Self::wait_healthy)).
    ///
    /// # Errors
    /// [`io::ErrorKind::AlreadyExists`] if it is running; otherwise if it does not start
    /// (message includes its log).
    ///
    /// # Panics
    /// If there is no member `i`.
    pub fn restart(&mut self, i: usize) -> io::Result<()> {
        self.members[i].start_again()
    }

    /// Kills every member, then starts each again on its data: the whole cluster restarted.
    /// Waits until every member is healthy again.
    ///
    /// # Errors
    /// As [`restart`](Self::restart) and [`wait_healthy`](Self::wait_healthy).
    pub fn restart_all(&mut self, healthy_within: Duration) -> io::Result<()> {
        for member in &mut self.members {
            member.kill();
        }
        for member in &mut self.members {
            member.start_again()?;
        }
        self.wait_healthy(healthy_within)
    }

    /// Suspends member `i` (`SIGSTOP` to its PID): a hung member that holds its connections
    /// open and answers nothing.
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] if it is not running.
    ///
    /// # Panics
    /// If there is no member `i`.
    pub fn pause(&self, i: usize) -> io::Result<()> {
        self.members[i].signal(Signal::SIGSTOP)
    }

    /// Resumes member `i` after [`pause`](Self::pause) (`SIGCONT`).
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] if it is not running.
    ///
    /// # Panics
    /// If there is no member `i`.
    pub fn resume(&self, i: usize) -> io::Result<()> {
        self.members[i].signal(Signal::SIGCONT)
    }

    /// Partitions member `i` from its clients and its peers: its client proxy and its peer
    /// proxy hold every byte ([`FaultProxy::partition`]). Raft messages a member sends travel
    /// on connections its peers opened to its peer port, so none of them is heard; it still
    /// hears the others (a one-way cut, which Raft handles as a lost member: it cannot win a
    /// vote nor ack an entry, and its clients get nothing).
    ///
    /// # Panics
    /// If there is no member `i`.
    pub fn partition(&self, i: usize) {
        self.members[i].set_partitioned(true);
    }

    /// Ends [`partition`](Self::partition) of member `i` (and any other fault on its proxies);
    /// connections that lived through it are closed and reopened by their owners.
    ///
    /// # Panics
    /// If there is no member `i`.
    pub fn heal(&self, i: usize) {
        self.members[i].set_partitioned(false);
    }

    /// Waits (bounded) until every running, unpaused member says it is healthy
    /// (`GET /health`: a leader and a served quorum read), and learns the member ids.
    ///
    /// # Errors
    /// [`io::ErrorKind::TimedOut`] with the members' logs, when `timeout` runs out.
    pub fn wait_healthy(&mut self, timeout: Duration) -> io::Result<()> {
        let waited = poll::until("every etcd member healthy", timeout, POLL, || {
            let sick: Vec<&str> = self
                .members
                .iter()
                .filter(|m| m.is_running() && !m.is_paused())
                .filter(|m| !http::healthy(m.client_port()))
                .map(EtcdMember::name)
                .collect();
            if sick.is_empty() {
                Ok(())
            } else {
                Err(format!("not healthy: {}", sick.join(", ")))
            }
        });
        if let Err(err) = waited {
            return Err(self.failure(&err.to_string()));
        }
        for member in &mut self.members {
            if member.id().is_none()
                && member.is_running()
                && !member.is_paused()
                && let Ok(status) = http::status(member.client_port())
            {
                member.set_id(status.member_id);
            }
        }
        Ok(())
    }

    /// The index of the member that leads, once the running, unpaused, unpartitioned members
    /// that answer agree on one that is among them (a bounded wait, at most 30 s, through an
    /// election).
    ///
    /// # Errors
    /// [`io::ErrorKind::TimedOut`] when they do not agree in time (no quorum, say).
    pub fn leader(&self) -> io::Result<usize> {
        self.leader_within(HEALTHY_TIMEOUT)
    }

    /// [`leader`](Self::leader) with a bound of its own.
    ///
    /// # Errors
    /// [`io::ErrorKind::TimedOut`] when they do not agree within `timeout`.
    pub fn leader_within(&self, timeout: Duration) -> io::Result<usize> {
        poll::until("an etcd leader", timeout, POLL, || {
            let mut answers = Vec::new();
            for (i, member) in self.members.iter().enumerate() {
                if !member.is_running() || member.is_paused() {
                    continue;
                }
                match http::status(member.client_port()) {
                    Ok(status) => answers.push((i, status)),
                    Err(err) => return Err(format!("{}: {err}", member.name())),
                }
            }
            let partitioned = |i: usize| self.members[i].is_partitioned();
            let mut leaders = answers
                .iter()
                .filter(|(i, _)| !partitioned(*i))
                .map(|(_, s)| (s.leader, s.raft_term));
            let Some(first) = leaders.next() else {
                return Err("no member answers".to_owned());
            };
            if first.0 == 0 || leaders.any(|other| other != first) {
                return Err(format!("members disagree or have no leader: {answers:?}"));
            }
            answers
                .iter()
                .find(|(i, s)| s.member_id == first.0 && !partitioned(*i))
                .map(|(i, _)| *i)
                .ok_or_else(|| format!("the leader {:x} is not a reachable member", first.0))
        })
    }

    /// `what`, followed by every member's log tail.
    fn failure(&self, what: &str) -> io::Error {
        let mut message = what.to_owned();
        for member in &self.members {
            message.push_str(&format!(
                "\n--- {} ({}) ---\n{}",
                member.name(),
                member.dir().display(),
                member.log_tail()
            ));
        }
        io::Error::new(io::ErrorKind::TimedOut, message)
    }

    /// Spawns every member; `Some(description)` when one exited before its port accepted.
    fn spawn_all(&mut self) -> io::Result<Option<String>> {
        for member in &mut self.members {
            if let Launch::Exited(status) = member.spawn()? {
                return Ok(Some(format!(
                    "{} on port {} -> {status}",
                    member.name(),
                    member.client_addr()
                )));
            }
        }
        Ok(None)
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}
