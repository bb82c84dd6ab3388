//! [`EtcdMember`]: one `etcd` process of an [`EtcdCluster`](super::EtcdCluster), in a network
//! namespace of its own (see [`netns`](super::netns)) or on loopback ports.

use std::ffi::OsString;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::Signal;

use super::network::Place;
use crate::servers::launch::{self, Launch, Process, Server, Timing};
use crate::signal;

pub(super) const TIMING: Timing = Timing {
    ready: Duration::from_secs(30),
    stop: Duration::from_secs(10),
    poll: Duration::from_millis(20),
    max_polls: 10_000,
};

const LOG_FILE: &str = "etcd.log";
const DATA_DIR: &str = "data";

/// How long a probe of a member's client port waits for the connection.
const ACCEPT_TIMEOUT: Duration = Duration::from_millis(200);

/// What a member is started with; every member of a cluster knows every other's peer URL.
#[derive(Debug, Clone)]
pub(super) struct MemberSpec {
    pub(super) name: String,
    /// Its address and ports, and its network namespace (entered through `ip netns exec`)
    /// when it has one.
    pub(super) place: Place,
    /// `m0=http://10.213.S.1:2380,m1=...`: every member's peer URL.
    pub(super) initial_cluster: String,
    pub(super) token: String,
    pub(super) heartbeat: Duration,
    pub(super) election: Duration,
}

/// One member of an [`EtcdCluster`](super::EtcdCluster): an `etcd` process with its data in a
/// temporary directory, signalled only by its own PID. With
/// [`EtcdNetwork::Namespaces`](super::EtcdNetwork::Namespaces) it runs in a network namespace
/// of its own, on its private address (`10.213.S.<i+1>`, ports 2379 for clients and 2380 for
/// peers), and clients and peers reach it over its one link to the cluster's bridge, which
/// [`EtcdCluster::partition`](super::EtcdCluster::partition) takes down: nothing goes in or
/// out. With [`EtcdNetwork::Loopback`](super::EtcdNetwork::Loopback) it listens on
/// `127.0.0.1`, on a client and a peer port of its own.
#[derive(Debug)]
pub struct EtcdMember {
    process: Process,
    binary: PathBuf,
    spec: MemberSpec,
    paused: AtomicBool,
    /// Whether [`EtcdCluster::partition`](super::EtcdCluster::partition) cut it off.
    partitioned: AtomicBool,
    /// Its Raft member id, once learnt from its status.
    id: Option<u64>,
    /// How far ahead its monotonic and boot-time clocks run (a time namespace of its own
    /// when not zero), from its next start.
    clock_ahead: Duration,
}

impl EtcdMember {
    pub(super) fn new(binary: PathBuf, spec: MemberSpec) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("lock-testkit-etcd-")
            .tempdir()?;
        Ok(Self {
            process: Process::new("etcd", LOG_FILE, TIMING, None, dir),
            binary,
            spec,
            paused: AtomicBool::new(false),
            partitioned: AtomicBool::new(false),
            id: None,
            clock_ahead: Duration::ZERO,
        })
    }

    /// Its name in the cluster (`m0`, `m1`, ...).
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Its client URL, what clients use: `http://10.213.S.N:2379` in a namespace (reachable
    /// from the test process's namespace, and cut by
    /// [`EtcdCluster::partition`](super::EtcdCluster::partition)), `http://127.0.0.1:PORT` on
    /// loopback.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.client_addr())
    }

    /// The same as [`endpoint`](Self::endpoint): no proxy stands in front of a member any
    /// more (kept for the benchmarks, which want the member itself).
    pub fn direct_endpoint(&self) -> String {
        self.endpoint()
    }

    /// Its client port: 2379 on every member in a namespace (each on its own address), a
    /// free port of its own on loopback. The same across restarts.
    pub fn client_port(&self) -> u16 {
        self.spec.place.client_port
    }

    /// Its client address (`10.213.S.N:2379` or `127.0.0.1:PORT`, the same across restarts).
    pub fn client_addr(&self) -> SocketAddr {
        SocketAddr::from((self.spec.place.addr, self.spec.place.client_port))
    }

    /// Its peer address (`10.213.S.N:2380` or `127.0.0.1:PORT`), which the other members
    /// reach it on.
    pub fn peer_addr(&self) -> SocketAddr {
        SocketAddr::from((self.spec.place.addr, self.spec.place.peer_port))
    }

    /// The network namespace it runs in (`distlock-<pid>-s<SS>-m<i>`, for `ip netns exec`);
    /// `None` on loopback.
    pub fn namespace(&self) -> Option<&str> {
        self.spec
            .place
            .namespace
            .as_ref()
            .map(|ns| ns.name.as_str())
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

    /// Spawns the process, in its namespace if it has one (`ip netns exec NS etcd ...`: `ip`
    /// enters it and execs etcd, so the child's PID is etcd's); [`Process::launch`] waits only
    /// until its client port accepts, since a member of a cluster becomes healthy only once a
    /// quorum runs.
    pub(super) fn spawn(&mut self) -> io::Result<Launch> {
        let log = self.process.append(LOG_FILE)?;
        let peer_url = format!("http://{}", self.peer_addr());
        let mut words: Vec<OsString> = Vec::new();
        if !self.clock_ahead.is_zero() {
            // A time namespace, entered at the exec: its offsets are fixed before etcd runs.
            let secs = self.clock_ahead.as_secs();
            words.extend(
                [
                    "unshare".to_owned(),
                    "--time".to_owned(),
                    format!("--monotonic={secs}"),
                    format!("--boottime={secs}"),
                    "--".to_owned(),
                ]
                .map(OsString::from),
            );
        }
        if let Some(ns) = &self.spec.place.namespace {
            words.push(ns.ip.clone().into());
            words.extend(["netns", "exec", &ns.name].map(OsString::from));
        }
        words.push(self.binary.clone().into());
        let mut command = Command::new(&words[0]);
        command.args(&words[1..]);
        let child = command
            .current_dir(self.dir())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .args(self.args(&peer_url))
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("spawning etcd: {e}")))?;
        self.paused.store(false, Ordering::SeqCst);
        let addr = self.client_addr();
        self.process
            .launch(child, self.client_port(), |_| {
                Ok(TcpStream::connect_timeout(&addr, ACCEPT_TIMEOUT).is_ok())
            })
            .map_err(|err| self.process.failure(&err.to_string()))
    }

    fn args(&self, peer_url: &str) -> Vec<String> {
        let spec = &self.spec;
        let client = self.endpoint();
        vec![
            format!("--name={}", spec.name),
            format!("--data-dir={}", self.dir().join(DATA_DIR).display()),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer_url}"),
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

    /// From its next start, runs it with its monotonic and boot-time clocks `ahead` of the
    /// machine's (whole seconds): a Linux time namespace (`unshare --time`, root or
    /// `CAP_SYS_ADMIN`). Its wall clock stays the machine's: no namespace offsets
    /// `CLOCK_REALTIME`, and etcd (Go) reads its clocks through the vDSO, past any
    /// `LD_PRELOAD`.
    pub(super) fn set_clock_ahead(&mut self, ahead: Duration) {
        self.clock_ahead = ahead;
    }

    /// How far ahead its monotonic clock runs (see [`EtcdCluster::restart_ahead`](super::EtcdCluster::restart_ahead)).
    pub fn clock_ahead(&self) -> Duration {
        self.clock_ahead
    }
}

impl Server for EtcdMember {
    fn process(&self) -> &Process {
        &self.process
    }

    fn port(&self) -> u16 {
        self.client_port()
    }

    /// A member's address and ports are the cluster's to choose: every member names every
    /// peer's.
    fn take_ports(&mut self) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "an etcd member's address and ports are chosen by its cluster",
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
