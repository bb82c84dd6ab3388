//! [`EtcdCluster`]: throwaway etcd clusters (1 or 3 members, or any odd count), each member
//! in a network namespace of its own (partitionable) or on loopback ports, for lock-etcd's
//! tests, torture runs, benchmarks and the examples.

mod binary;
mod http;
mod member;
mod netns;
mod network;

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nix::sys::signal::Signal;

pub use binary::{ETCD_VERSION, etcd_install_dir, try_etcd_binary};
pub use member::EtcdMember;
pub use network::EtcdNetwork;

use crate::servers::launch::{Launch, START_ATTEMPTS};
use crate::servers::poll;
use member::MemberSpec;
use netns::MAX_MEMBERS;
use network::Net;

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
    network: EtcdNetwork,
}

impl Default for EtcdClusterBuilder {
    fn default() -> Self {
        Self {
            members: 1,
            // etcd's own defaults: shorter ones elect spuriously on a busy shared machine.
            heartbeat: Duration::from_millis(100),
            election: Duration::from_millis(1_000),
            network: EtcdNetwork::Auto,
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

    /// Where the members listen (default [`EtcdNetwork::Auto`]: a network namespace each when
    /// this process may make them, loopback otherwise). Only namespaced members can be
    /// [`partition`](EtcdCluster::partition)ed; a throwaway etcd that is never partitioned
    /// (a demo, an example, a load run) asks for [`EtcdNetwork::Loopback`], which needs no
    /// privilege and leaves nothing on the machine's network even as root.
    pub fn network(mut self, network: EtcdNetwork) -> Self {
        self.network = network;
        self
    }

    /// Makes the cluster's network as [`network`](Self::network) asks (with namespaces: a
    /// bridge, and a network namespace per member linked to it; see [`EtcdCluster`]), starts
    /// every member (in its namespace, if any) and waits until each is healthy: a leader is
    /// elected and serves quorum reads.
    ///
    /// If a member exits before its port accepts, the whole cluster is started again on a
    /// fresh network (fresh ports on loopback), at most 5 times.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] for 0 or more than 100 members;
    /// [`io::ErrorKind::NotFound`] without `etcd`; with [`EtcdNetwork::Namespaces`],
    /// [`io::ErrorKind::PermissionDenied`] without root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and
    /// [`io::ErrorKind::NotFound`] without iproute2's `ip`, each saying what is missing
    /// ([`EtcdNetwork::Auto`] falls back to loopback on these two); otherwise if `etcd`
    /// cannot be spawned, or the cluster does not become healthy within 30 s (the message
    /// then includes the members' logs).
    pub fn start(self) -> io::Result<EtcdCluster> {
        if self.members == 0 || self.members > MAX_MEMBERS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "an etcd cluster has 1 to {MAX_MEMBERS} members, not {}",
                    self.members
                ),
            ));
        }
        let binary = try_etcd_binary()?;
        let mut exits = String::new();
        for attempt in 1..=START_ATTEMPTS {
            let network = Net::create(self.network, self.members)?;
            let mut cluster = EtcdCluster {
                members: self.fresh_members(&binary, &network)?,
                network,
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
            "etcd exited before becoming ready on {START_ATTEMPTS} fresh networks:{exits}"
        )))
    }

    fn fresh_members(
        &self,
        binary: &std::path::Path,
        network: &Net,
    ) -> io::Result<Vec<EtcdMember>> {
        // A token per cluster, so that members of two clusters can never join each other.
        static CLUSTERS: AtomicU64 = AtomicU64::new(0);
        let token = format!(
            "lock-testkit-{}-{}",
            std::process::id(),
            CLUSTERS.fetch_add(1, Ordering::Relaxed)
        );
        let places = (0..self.members)
            .map(|i| network.place(i))
            .collect::<io::Result<Vec<_>>>()?;
        let initial_cluster = places
            .iter()
            .enumerate()
            .map(|(i, place)| format!("m{i}=http://{}:{}", place.addr, place.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        places
            .into_iter()
            .enumerate()
            .map(|(i, place)| {
                let spec = MemberSpec {
                    name: format!("m{i}"),
                    place,
                    initial_cluster: initial_cluster.clone(),
                    token: token.clone(),
                    heartbeat: self.heartbeat,
                    election: self.election,
                };
                EtcdMember::new(binary.to_owned(), spec)
            })
            .collect()
    }
}

/// A running etcd cluster of throwaway members, each in its own temporary directory and (with
/// [`EtcdNetwork::Namespaces`]) its own network namespace, killed by its own PID (`SIGKILL`,
/// then reaped) when the cluster is dropped; its network is removed then too (also when a
/// test panics: it is dropped while unwinding).
///
/// Where the members listen is the builder's [`network`](EtcdClusterBuilder::network):
/// namespaces by default when this process may make them (see below), else loopback. On
/// loopback ([`EtcdNetwork::Loopback`]) member `i` listens on `127.0.0.1`, on a client and a
/// peer port of its own ([`free_port`](crate::free_port)'s), started directly; everything
/// works but [`partition`](Self::partition) and [`heal`](Self::heal), which are refused.
///
/// The namespaced network: a bridge in the test process's namespace holding `10.213.S.254/24`, where
/// `S` is a subnet claimed across processes (a `flock` under `$TMPDIR/distlock-ports/`), and
/// member `i` in namespace `distlock-<pid>-s<SS>-m<i>`, linked to the bridge by a veth pair,
/// listening on `10.213.S.<i+1>`, port 2379 for clients (the [`endpoints`](Self::endpoints))
/// and 2380 for peers. [`partition`](Self::partition) takes a member's link down: it is cut
/// from its clients and its peers both ways. Making the network takes root (CAP_NET_ADMIN and
/// CAP_SYS_ADMIN) and iproute2's `ip`; starting a cluster first removes what test processes
/// that are gone left behind (names carry their PID).
///
/// A member can be killed, started again on the same address and data, paused (`SIGSTOP`)
/// and resumed, or partitioned. The binary is found by [`try_etcd_binary`];
/// `scripts/ensure-etcd.sh` installs etcd 3.5.1.
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
    /// Dropped first: the processes stop before their namespaces go.
    members: Vec<EtcdMember>,
    network: Net,
}

impl EtcdCluster {
    /// Starts a one-member cluster; see [`EtcdClusterBuilder::start`].
    ///
    /// # Errors
    /// See [`EtcdClusterBuilder::start`].
    pub fn start() -> io::Result<EtcdCluster> {
        Self::builder().start()
    }

    /// A builder: member count, Raft timing, network.
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

    /// Every member's client endpoint (`http://10.213.S.N:2379`, or `http://127.0.0.1:PORT`
    /// on loopback).
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(EtcdMember::endpoint).collect()
    }

    /// Where its members listen: [`EtcdNetwork::Namespaces`] (partitionable) or
    /// [`EtcdNetwork::Loopback`], never [`EtcdNetwork::Auto`].
    pub fn network(&self) -> EtcdNetwork {
        self.network.kind()
    }

    /// Kills member `i` with `SIGKILL` by its PID (like a crash) and reaps it. Its ports and
    /// data stay for [`restart`](Self::restart). Does nothing if it is stopped.
    ///
    /// # Panics
    /// If there is no member `i`.
    pub fn kill(&mut self, i: usize) {
        self.members[i].kill();
    }

    /// Starts member `i` again after [`kill`](Self::kill), on the same address with the same
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

    /// As [`restart`](Self::restart), with member `i`'s monotonic and boot-time clocks
    /// `further` ahead of where they ran before (whole seconds; a Linux time namespace of its
    /// own, which needs root or `CAP_SYS_ADMIN`): a member whose monotonic clock jumped while it
    /// was down. Its wall clock stays the machine's.
    ///
    /// # Errors
    /// As [`restart`](Self::restart); also when `unshare --time` is refused (the message then
    /// has its log).
    ///
    /// # Panics
    /// If there is no member `i`.
    pub fn restart_ahead(&mut self, i: usize, further: Duration) -> io::Result<()> {
        let member = &mut self.members[i];
        member.set_clock_ahead(member.clock_ahead() + further);
        member.start_again()
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

    /// Partitions member `i` from its clients and its peers, both ways: its link to the
    /// cluster's bridge goes down, and every packet to or from it is dropped (connections
    /// stall; new ones time out or find no route). The others keep their links: a minority
    /// of one loses its lead, and its clients fail over to the others.
    ///
    /// While it is partitioned, [`leader`](Self::leader) and
    /// [`wait_healthy`](Self::wait_healthy) leave it out (the kit cannot reach it either).
    ///
    /// # Errors
    /// [`io::ErrorKind::Unsupported`] on a loopback cluster (see [`network`](Self::network)),
    /// saying what a partition needs (root or CAP_NET_ADMIN and CAP_SYS_ADMIN, iproute2) and
    /// why this cluster lacks it: a test that partitions fails, it is never skipped. When
    /// `ip link set` fails.
    ///
    /// # Panics
    /// If there is no member `i`.
    pub fn partition(&self, i: usize) -> io::Result<()> {
        self.network.set_link(i, self.members[i].name(), false)?;
        self.members[i].set_partitioned(true);
        Ok(())
    }

    /// Ends [`partition`](Self::partition) of member `i`: its link comes up again, and
    /// connections that lived through the cut go on (or are reopened by their owners).
    ///
    /// # Errors
    /// [`io::ErrorKind::Unsupported`] on a loopback cluster, as
    /// [`partition`](Self::partition); when `ip link set` fails.
    ///
    /// # Panics
    /// If there is no member `i`.
    pub fn heal(&self, i: usize) -> io::Result<()> {
        self.network.set_link(i, self.members[i].name(), true)?;
        self.members[i].set_partitioned(false);
        Ok(())
    }

    /// Waits (bounded) until every running, unpaused, unpartitioned member says it is healthy
    /// (`GET /health`: a leader and a served quorum read), and learns the member ids.
    ///
    /// # Errors
    /// [`io::ErrorKind::TimedOut`] with the members' logs, when `timeout` runs out.
    pub fn wait_healthy(&mut self, timeout: Duration) -> io::Result<()> {
        let waited = poll::until("every etcd member healthy", timeout, POLL, || {
            let sick: Vec<&str> = self
                .members
                .iter()
                .filter(|m| m.is_running() && !m.is_paused() && !m.is_partitioned())
                .filter(|m| !http::healthy(m.client_addr()))
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
                && !member.is_partitioned()
                && let Ok(status) = http::status(member.client_addr())
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
                // The kit cannot reach a partitioned member either.
                if !member.is_running() || member.is_paused() || member.is_partitioned() {
                    continue;
                }
                match http::status(member.client_addr()) {
                    Ok(status) => answers.push((i, status)),
                    Err(err) => return Err(format!("{}: {err}", member.name())),
                }
            }
            let mut leaders = answers.iter().map(|(_, s)| (s.leader, s.raft_term));
            let Some(first) = leaders.next() else {
                return Err("no member answers".to_owned());
            };
            if first.0 == 0 || leaders.any(|other| other != first) {
                return Err(format!("members disagree or have no leader: {answers:?}"));
            }
            answers
                .iter()
                .find(|(_, s)| s.member_id == first.0)
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
                    "{} on {} -> {status}",
                    member.name(),
                    member.client_addr()
                )));
            }
        }
        Ok(None)
    }
}
