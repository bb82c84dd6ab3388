//! [`EtcdMember`]: one `etcd` process of an [`EtcdCluster`](super::EtcdCluster), with a fault
//! proxy in front of its client port and one in front of its peer port.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::servers::launch::{self, Launch, Process, Server, Timing};
use crate::servers::probe;
use crate::servers::proxy::FaultProxy;
use crate::signal;

pub(super) const TIMING: Timing = Timing {
    ready: Duration::from_secs(30),
    stop: Duration::from_secs(10),
    poll: Duration::from_millis(20),
    max_polls: 10_000,
};

const LOG_FILE: &str = "etcd.log";
const DATA_DIR: &str = "data";

/// What a member is started with; every member of a cluster knows every other's peer URL.
#[derive(Debug, Clone)]
pub(super) struct MemberSpec {
    pub(super) name: String,
    pub(super) client_port: u16,
    pub(super) peer_port: u16,
    /// `m0=http://127.0.0.1:P0,m1=...`: the peer proxies' URLs.
    pub(super) initial_cluster: String,
    pub(super) token: String,
    pub(super) heartbeat: Duration,
    pub(super) election: Duration,
}

/// One member of an [`EtcdCluster`](super::EtcdCluster): an `etcd` process on loopback ports
/// with its data in a temporary directory, signalled only by its own PID.
///
/// Clients reach it through a [`FaultProxy`] ([`endpoint`](Self::endpoint)); its peers reach
/// its peer port through another one (the peer URL it advertises). A Raft message a member
/// sends travels on a connection its peer opened to it, so partitioning that peer proxy stops
/// everything the member says from being heard.
#[derive(Debug)]
pub struct EtcdMember {
    process: Process,
    binary: PathBuf,
    spec: MemberSpec,
    client_proxy: FaultProxy,
    peer_proxy: FaultProxy,
    paused: AtomicBool,
    /// Whether [`EtcdCluster::partition`](super::EtcdCluster::partition) cut it off.
    partitioned: AtomicBool,
    /// Its Raft member id, once learnt from its status.
    id: Option<u64>,
}

impl EtcdMember {
    pub(super) fn new(
        binary: PathBuf,
        spec: MemberSpec,
        client_proxy: FaultProxy,
        peer_proxy: FaultProxy,
    ) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("lock-testkit-etcd-")
            .tempdir()?;
        Ok(Self {
            process: Process::new("etcd", LOG_FILE, TIMING, None, dir),
            binary,
            spec,
            client_proxy,
            peer_proxy,
            paused: AtomicBool::new(false),
            partitioned: AtomicBool::new(false),
            id: None,
        })
    }

    /// Its name in the cluster (`m0`, `m1`, ...).
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// `http://127.0.0.1:PORT` of its client proxy: what clients should use, so that
    /// [`EtcdCluster::partition`](super::EtcdCluster::partition) reaches them too.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.client_proxy.addr())
    }

    /// `http://127.0.0.1:PORT` of its own client port, past the proxy (benchmarks).
    pub fn direct_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.spec.client_port)
    }

    /// Its own client port (the same across restarts).
    pub fn client_port(&self) -> u16 {
        self.spec.client_port
    }

    /// The proxy in front of its client port.
    pub fn client_proxy(&self) -> &FaultProxy {
        &self.client_proxy
    }

    /// The proxy in front of its peer port (its advertised peer URL).
    pub fn peer_proxy(&self) -> &FaultProxy {
        &self.peer_proxy
    }

    /// The directory holding its data directory (`data/`) and its log.
    pub fn dir(&self) -> &Path {
        self.process.dir()
    }

    /// Its PID, or `None` if it is stopped or has exited.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether the process is alive (paused or not).
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Whether it is suspended by [`EtcdCluster::pause`](super::EtcdCluster::pause).
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// Whether it is cut off by [`EtcdCluster::partition`](super::EtcdCluster::partition).
    pub fn is_partitioned(&self) -> bool {
        self.partitioned.load(Ordering::SeqCst)
    }

    pub(super) fn set_partitioned(&self, on: bool) {
        if on {
            self.client_proxy.partition();
            self.peer_proxy.partition();
        } else {
            self.client_proxy.heal();
            self.peer_proxy.heal();
        }
        self.partitioned.store(on, Ordering::SeqCst);
    }

    /// Its Raft member id, known once the cluster was healthy.
    pub fn id(&self) -> Option<u64> {
        self.id
    }

    /// The last ~40 lines of its log.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    pub(super) fn set_id(&mut self, id: u64) {
        self.id = Some(id);
    }

    /// Spawns the process; [`Process::launch`] waits only until its client port accepts, since
    /// a member of a cluster becomes healthy only once a quorum runs.
    pub(super) fn spawn(&mut self) -> io::Result<Launch> {
        let log = self.process.append(LOG_FILE)?;
        let peer_url = format!("http://{}", self.peer_proxy.addr());
        let child = Command::new(&self.binary)
            .current_dir(self.dir())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .args(self.args(&peer_url))
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("spawning etcd: {e}")))?;
        self.paused.store(false, Ordering::SeqCst);
        let port = self.spec.client_port;
        self.process
            .launch(child, port, |_| Ok(probe::accepts(port)))
            .map_err(|err| self.process.failure(&err.to_string()))
    }

    fn args(&self, peer_url: &str) -> Vec<String> {
        let spec = &self.spec;
        let client = format!("http://127.0.0.1:{}", spec.client_port);
        vec![
            format!("--name={}", spec.name),
            format!("--data-dir={}", self.dir().join(DATA_DIR).display()),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={}", self.endpoint()),
            format!("--listen-peer-urls=http://127.0.0.1:{}", spec.peer_port),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster={}", spec.initial_cluster),
            format!("--initial-cluster-token={}", spec.token),
            "--initial-cluster-state=new".to_owned(),
            format!("--heartbeat-interval={}", spec.heartbeat.as_millis()),
            format!("--election-timeout={}", spec.election.as_millis()),
            // A killed process keeps what it wrote (the page cache survives it); no test
            // simulates an operating-system crash, and fsync is the slow part on a shared disk.
            "--unsafe-no-fsync".to_owned(),
            "--log-level=warn".to_owned(),
        ]
    }

    /// `SIGKILL` by PID, reaped; does nothing if it is stopped.
    pub(super) fn kill(&mut self) {
        self.process.stop_with(None);
        self.paused.store(false, Ordering::SeqCst);
    }

    pub(super) fn signal(&self, sig: Signal) -> io::Result<()> {
        let mut child = self.process.child();
        let child = child.as_mut().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("etcd member {} is not running", self.spec.name),
            )
        })?;
        signal::signal_child(child, sig)?;
        self.paused.store(sig == Signal::SIGSTOP, Ordering::SeqCst);
        Ok(())
    }

    pub(super) fn start_again(&mut self) -> io::Result<()> {
        launch::start_again(self)
    }

    pub(super) fn client_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.spec.client_port))
    }
}

impl Server for EtcdMember {
    fn process(&self) -> &Process {
        &self.process
    }

    fn port(&self) -> u16 {
        self.spec.client_port
    }

    /// A member's ports are the cluster's to choose: every member names every peer's.
    fn take_ports(&mut self) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "an etcd member's ports are chosen by its cluster",
        ))
    }

    fn launch(&mut self) -> io::Result<Launch> {
        self.spawn()
    }
}

impl Drop for EtcdMember {
    fn drop(&mut self) {
        self.kill();
    }
}
