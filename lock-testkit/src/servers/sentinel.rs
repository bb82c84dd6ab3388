//! [`RedisSentinelSet`]: a primary, its replicas and the Sentinels watching them.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use crate::RedisServer;
use crate::servers::role::{self, RoleReport};
use crate::servers::{client, poll};

/// Timeout of each query made while inspecting the set.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between two inspections while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Log lines per process included in start-up errors.
const ERROR_LOG_LINES: usize = 8;

#[derive(Debug, Clone)]
struct SentinelConfig {
    master_name: String,
    replicas: usize,
    sentinels: usize,
    quorum: Option<usize>,
    down_after: Duration,
    failover_timeout: Duration,
    wait_timeout: Duration,
    /// Every process is `valkey-server` rather than `redis-server`.
    valkey: bool,
}

impl Default for SentinelConfig {
    fn default() -> Self {
        SentinelConfig {
            master_name: "mymaster".to_owned(),
            replicas: 1,
            sentinels: 3,
            quorum: None,
            down_after: Duration::from_millis(2_000),
            failover_timeout: Duration::from_millis(5_000),
            wait_timeout: Duration::from_secs(30),
            valkey: false,
        }
    }
}

impl SentinelConfig {
    fn quorum(&self) -> usize {
        self.quorum.unwrap_or(self.sentinels / 2 + 1)
    }

    fn sentinel_conf(&self, primary_port: u16) -> String {
        let name = &self.master_name;
        let mut conf = String::new();
        let _ = writeln!(conf, "sentinel resolve-hostnames no");
        let _ = writeln!(conf, "sentinel announce-hostnames no");
        let _ = writeln!(
            conf,
            "sentinel monitor {name} 127.0.0.1 {primary_port} {}",
            self.quorum()
        );
        let _ = writeln!(
            conf,
            "sentinel down-after-milliseconds {name} {}",
            self.down_after.as_millis().max(1)
        );
        let _ = writeln!(
            conf,
            "sentinel failover-timeout {name} {}",
            self.failover_timeout.as_millis().max(1)
        );
        let _ = writeln!(conf, "sentinel parallel-syncs {name} 1");
        conf
    }
}

/// Configures a [`RedisSentinelSet`] before starting it; see
/// [`RedisSentinelSet::builder`].
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct RedisSentinelSetBuilder {
    config: SentinelConfig,
}

impl RedisSentinelSetBuilder {
    /// The name the Sentinels monitor the primary under (default
    /// `"mymaster"`); no whitespace.
    pub fn master_name(mut self, name: impl Into<String>) -> Self {
        self.config.master_name = name.into();
        self
    }

    /// Number of replicas of the primary (default 1).
    pub fn replicas(mut self, n: usize) -> Self {
        self.config.replicas = n;
        self
    }

    /// Number of Sentinels (default 3).
    pub fn sentinels(mut self, n: usize) -> Self {
        self.config.sentinels = n;
        self
    }

    /// Sentinels that must agree the primary is down (default: a majority
    /// of them, 2 of 3). A failover also needs a majority to elect a leader.
    pub fn quorum(mut self, n: usize) -> Self {
        self.config.quorum = Some(n);
        self
    }

    /// `down-after-milliseconds` (default 2 s): how long the primary must
    /// be unreachable before a Sentinel considers it down. Smaller fails
    /// over faster but risks spurious failovers on a loaded machine.
    pub fn down_after(mut self, d: Duration) -> Self {
        self.config.down_after = d;
        self
    }

    /// `failover-timeout` (default 5 s). A failed attempt is retried by the
    /// Sentinels after twice this.
    pub fn failover_timeout(mut self, d: Duration) -> Self {
        self.config.failover_timeout = d;
        self
    }

    /// Upper bound of every wait (default 30 s): for the set to form, and
    /// for a failover.
    pub fn wait_timeout(mut self, d: Duration) -> Self {
        self.config.wait_timeout = d;
        self
    }

    /// Runs the primary, the replicas and the Sentinels (`valkey-server sentinel.conf
    /// --sentinel`) as Valkey ([`RedisServerBuilder::valkey`](crate::RedisServerBuilder::valkey))
    /// instead of Redis: one binary serves both, with the same Sentinel protocol.
    pub fn valkey(mut self) -> Self {
        self.config.valkey = true;
        self
    }

    /// Starts the primary, then its replicas (`--replicaof`) and waits until
    /// they are in sync, then the Sentinels (each `redis-server
    /// sentinel.conf --sentinel`, its config file in its own directory), and
    /// waits until every Sentinel reports the primary, sees every replica
    /// and every other Sentinel, and `SENTINEL CKQUORUM` passes.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] for no Sentinel, a quorum of 0 or
    /// above the number of Sentinels, or an empty or spaced master name;
    /// otherwise if a process does not start or the set does not form
    /// within the wait timeout (the message then includes the end of each
    /// log). Processes already started are stopped.
    pub fn start(self) -> io::Result<RedisSentinelSet> {
        let config = self.config;
        let invalid = |msg: String| Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
        if config.sentinels == 0 {
            return invalid("a sentinel set needs at least one sentinel".to_owned());
        }
        if config.quorum() == 0 || config.quorum() > config.sentinels {
            return invalid(format!(
                "quorum {} is not in 1..={}",
                config.quorum(),
                config.sentinels
            ));
        }
        if config.master_name.is_empty() || config.master_name.contains(char::is_whitespace) {
            return invalid(format!("bad master name {:?}", config.master_name));
        }
        let valkey = config.valkey;
        let server = move || {
            let builder = RedisServer::builder();
            if valkey { builder.valkey() } else { builder }
        };
        let data_node = || {
            server()
                // Full syncs start at once rather than after 5 s.
                .arg("--repl-diskless-sync-delay")
                .arg("0")
        };
        let primary = data_node().start()?;
        let primary_port = primary.port();
        let mut set = RedisSentinelSet {
            servers: vec![primary],
            sentinels: Vec::with_capacity(config.sentinels),
            primary_port: AtomicU16::new(primary_port),
            config,
        };
        for _ in 0..set.config.replicas {
            let replica = data_node()
                .arg("--replicaof")
                .arg("127.0.0.1")
                .arg(primary_port.to_string())
                .start()?;
            set.servers.push(replica);
        }
        // Sentinels learn of replicas from the primary's INFO, which they
        // read on connecting and then only every 10 s: attach replicas first.
        set.wait_for("the replicas to sync", || {
            set.replication_settled(primary_port)
        })
        .map_err(|e| set.with_logs(e))?;
        let conf = set.config.sentinel_conf(primary_port);
        for _ in 0..set.config.sentinels {
            let sentinel = server().sentinel(conf.as_str()).start()?;
            set.sentinels.push(sentinel);
        }
        set.wait_for("the sentinels to form", || set.formed(primary_port))
            .map_err(|e| set.with_logs(e))?;
        Ok(set)
    }
}

/// One Redis primary, its replicas, and the Redis Sentinels monitoring them
/// (by default 1 replica and 3 Sentinels with quorum 2), all throwaway
/// processes on `127.0.0.1`.
///
/// The data nodes ([`servers`](Self::servers)) keep their index; which one is
/// primary is asked of the Sentinels, since failovers change it. A process is
/// *live* when it runs and is not paused. Every wait is bounded by the
/// builder's [`wait_timeout`](RedisSentinelSetBuilder::wait_timeout).
/// Dropping the set kills every process by its PID, Sentinels first.
///
/// ```no_run
/// use lock_testkit::RedisSentinelSet;
///
/// let mut set = RedisSentinelSet::start()?;
/// let old = set.primary()?;
/// let replica = set.replica()?;
/// set.kill_primary()?;
/// let new = set.wait_for_failover()?;
/// assert_ne!(new, old);
/// assert_eq!(new, replica);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct RedisSentinelSet {
    /// Data nodes; the first was the initial primary.
    servers: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    /// Primary as of the last completed start or failover.
    primary_port: AtomicU16,
    config: SentinelConfig,
}

impl RedisSentinelSet {
    /// Starts a set with the default configuration: a primary, 1 replica,
    /// 3 Sentinels (quorum 2), `down-after-milliseconds` 2000,
    /// `failover-timeout` 5000.
    ///
    /// # Errors
    ///
    /// See [`RedisSentinelSetBuilder::start`].
    pub fn start() -> io::Result<RedisSentinelSet> {
        Self::builder().start()
    }

    /// A builder for another shape or timing.
    pub fn builder() -> RedisSentinelSetBuilder {
        RedisSentinelSetBuilder::default()
    }

    /// The name the primary is monitored under (`"mymaster"` by default).
    pub fn master_name(&self) -> &str {
        &self.config.master_name
    }

    /// The Sentinel processes.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The Sentinel processes, mutably (e.g. to stop one).
    pub fn sentinels_mut(&mut self) -> &mut [RedisServer] {
        &mut self.sentinels
    }

    /// `127.0.0.1:PORT` of every Sentinel.
    pub fn sentinel_addrs(&self) -> Vec<SocketAddr> {
        self.sentinels.iter().map(RedisServer::addr).collect()
    }

    /// `redis://127.0.0.1:PORT/` of every Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The data nodes (primary and replicas), in creation order: index 0
    /// was the initial primary.
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    /// The data nodes, mutably (e.g. to pause or stop one yourself).
    pub fn servers_mut(&mut self) -> &mut [RedisServer] {
        &mut self.servers
    }

    /// The primary's address according to the first live Sentinel that
    /// answers (`SENTINEL GET-MASTER-ADDR-BY-NAME`). During a failover
    /// Sentinels may briefly disagree.
    ///
    /// # Errors
    ///
    /// If no live Sentinel answers with an address.
    pub fn primary(&self) -> io::Result<SocketAddr> {
        let mut last = None;
        for sentinel in self.live_sentinels() {
            match self.primary_per(sentinel) {
                Ok(addr) => return Ok(addr),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "no live sentinel")))
    }

    /// Index in [`servers`](Self::servers) of the [`primary`](Self::primary).
    ///
    /// # Errors
    ///
    /// As for [`primary`](Self::primary); [`io::ErrorKind::NotFound`] if the
    /// address is not one of the set's data nodes.
    pub fn primary_index(&self) -> io::Result<usize> {
        let addr = self.primary()?;
        self.index_of(addr).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("sentinels report primary {addr}, which is not a node of this set"),
            )
        })
    }

    /// The [`primary`](Self::primary)'s server.
    ///
    /// # Errors
    ///
    /// As for [`primary_index`](Self::primary_index).
    pub fn primary_server(&self) -> io::Result<&RedisServer> {
        Ok(&self.servers[self.primary_index()?])
    }

    /// The replicas the first live Sentinel that answers knows of and does
    /// not consider down or disconnected (`SENTINEL REPLICAS`).
    ///
    /// # Errors
    ///
    /// If no live Sentinel answers.
    pub fn replicas(&self) -> io::Result<Vec<SocketAddr>> {
        let mut last = None;
        for sentinel in self.live_sentinels() {
            match self.records(sentinel, "REPLICAS") {
                Ok(records) => {
                    return Ok(records
                        .iter()
                        .filter(|r| flags_ok(r, "slave"))
                        .filter_map(record_addr)
                        .collect());
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "no live sentinel")))
    }

    /// The first of [`replicas`](Self::replicas).
    ///
    /// # Errors
    ///
    /// As for [`replicas`](Self::replicas); [`io::ErrorKind::NotFound`] if
    /// there is none.
    pub fn replica(&self) -> io::Result<SocketAddr> {
        self.replicas()?
            .into_iter()
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no healthy replica"))
    }

    /// Kills the current [`primary`](Self::primary) (`SIGKILL` by its PID)
    /// and returns its address. Follow with
    /// [`wait_for_failover`](Self::wait_for_failover).
    ///
    /// # Errors
    ///
    /// As for [`primary_index`](Self::primary_index).
    pub fn kill_primary(&mut self) -> io::Result<SocketAddr> {
        let i = self.primary_index()?;
        self.primary_port
            .store(self.servers[i].port(), Ordering::SeqCst);
        self.servers[i].stop();
        Ok(self.servers[i].addr())
    }

    /// Waits until the Sentinels have failed over from the primary of the
    /// last completed start or failover, and returns the new primary: every
    /// live Sentinel reports the same new address, that node is live and
    /// reports itself master, and every other live data node replicates it
    /// with its link up.
    ///
    /// A live data node that still claims to be master (the old primary
    /// after [`failover`](Self::failover), or one started again) is sent
    /// `REPLICAOF` the new primary, as the Sentinels would do themselves
    /// some 10 s later.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::TimedOut`] if that does not happen within the wait
    /// timeout (including when nothing made the primary fail).
    pub fn wait_for_failover(&self) -> io::Result<SocketAddr> {
        let old = self.primary_port.load(Ordering::SeqCst);
        let new = self.wait_for("a failover", || {
            let addr = self.agreed_primary()?;
            if addr.port() == old {
                return Err(format!("sentinels still report the old primary {addr}"));
            }
            self.replication_settled(addr.port())?;
            Ok(addr)
        })?;
        self.primary_port.store(new.port(), Ordering::SeqCst);
        Ok(new)
    }

    /// Forces a failover with `SENTINEL FAILOVER` (retried while the
    /// Sentinel answers that no replica is ready, e.g. right after a
    /// previous failover) and waits for it as
    /// [`wait_for_failover`](Self::wait_for_failover) does. Returns the new
    /// primary; the old one becomes its replica.
    ///
    /// # Errors
    ///
    /// If the failover cannot be started or does not complete within the
    /// wait timeout.
    pub fn failover(&self) -> io::Result<SocketAddr> {
        let current = self.primary()?;
        self.primary_port.store(current.port(), Ordering::SeqCst);
        let name = self.config.master_name.as_str();
        self.wait_for("SENTINEL FAILOVER to be accepted", || {
            let sentinel = self
                .live_sentinels()
                .next()
                .ok_or_else(|| "no live sentinel".to_owned())?;
            match sentinel.command_with_timeout(&["SENTINEL", "FAILOVER", name], PROBE_TIMEOUT) {
                Ok(_) => Ok(()),
                // Already started, e.g. by an earlier attempt whose reply was lost.
                Err(e) if e.to_string().contains("INPROG") => Ok(()),
                Err(e) => Err(format!("SENTINEL FAILOVER: {e}")),
            }
        })?;
        self.wait_for_failover()
    }

    /// Starts data node `server` again after it was stopped or killed, and
    /// waits until it replicates the current primary with its link up
    /// (sending it `REPLICAOF` if it comes back as a master, as the
    /// Sentinels would some seconds later) — unless the Sentinels still
    /// consider it the primary.
    ///
    /// # Errors
    ///
    /// If it does not start (e.g. it is still running), or does not settle
    /// within the wait timeout.
    ///
    /// # Panics
    ///
    /// If `server` is out of range.
    pub fn start_again(&mut self, server: usize) -> io::Result<()> {
        self.servers[server].start_again()?;
        self.wait_until_healthy().map(drop)
    }

    /// Waits until every live Sentinel reports the same primary, that node
    /// is live and master, and every other live data node replicates it with
    /// its link up; returns the primary. Live data nodes that claim to be
    /// master or follow another node are sent `REPLICAOF` the primary, as
    /// the Sentinels would some seconds later. Useful after resuming a
    /// paused node.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::TimedOut`] if that does not happen within the wait
    /// timeout.
    pub fn wait_until_healthy(&self) -> io::Result<SocketAddr> {
        let primary = self.wait_for("a healthy sentinel set", || {
            let primary = self.agreed_primary()?;
            self.replication_settled(primary.port())?;
            Ok(primary)
        })?;
        self.primary_port.store(primary.port(), Ordering::SeqCst);
        Ok(primary)
    }

    fn live_sentinels(&self) -> impl Iterator<Item = &RedisServer> {
        self.sentinels
            .iter()
            .filter(|s| s.is_running() && !s.is_paused())
    }

    fn index_of(&self, addr: SocketAddr) -> Option<usize> {
        self.servers.iter().position(|s| s.addr() == addr)
    }

    fn primary_per(&self, sentinel: &RedisServer) -> io::Result<SocketAddr> {
        let name = self.config.master_name.as_str();
        let text = sentinel.command_with_timeout(
            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", name],
            PROBE_TIMEOUT,
        )?;
        let mut lines = text.lines().map(str::trim);
        let ip = lines.next().and_then(|l| l.parse::<IpAddr>().ok());
        let port = lines.next().and_then(|l| l.parse::<u16>().ok());
        match (ip, port) {
            (Some(ip), Some(port)) => Ok(SocketAddr::new(ip, port)),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "sentinel on port {} has no address for {name}: {text:?}",
                    sentinel.port()
                ),
            )),
        }
    }

    fn records(
        &self,
        sentinel: &RedisServer,
        what: &str,
    ) -> io::Result<Vec<HashMap<String, String>>> {
        let name = self.config.master_name.as_str();
        let reply = sentinel.query(&["SENTINEL", what, name], PROBE_TIMEOUT)?;
        Ok(client::records(&reply))
    }

    /// The primary every live Sentinel reports, if they all agree.
    fn agreed_primary(&self) -> Result<SocketAddr, String> {
        let mut agreed: Option<SocketAddr> = None;
        for sentinel in self.live_sentinels() {
            let addr = self
                .primary_per(sentinel)
                .map_err(|e| format!("sentinel {}: {e}", sentinel.port()))?;
            match agreed {
                Some(a) if a != addr => {
                    return Err(format!("sentinels disagree: {a} vs {addr}"));
                }
                _ => agreed = Some(addr),
            }
        }
        agreed.ok_or_else(|| "no live sentinel".to_owned())
    }

    /// `Ok` when the node on `primary_port` is live and master, and every
    /// other live data node replicates it, in sync. Live nodes that claim
    /// to be master, or follow another node, are sent `REPLICAOF`.
    fn replication_settled(&self, primary_port: u16) -> Result<(), String> {
        let primary = self
            .servers
            .iter()
            .find(|s| s.port() == primary_port)
            .ok_or_else(|| format!("primary port {primary_port} is not a node of this set"))?;
        if !primary.is_running() || primary.is_paused() {
            return Err(format!("primary {primary_port} is not live"));
        }
        match role::role_report(primary, PROBE_TIMEOUT) {
            Ok(RoleReport::Master) => {}
            other => return Err(format!("primary {primary_port} reports {other:?}")),
        }
        let port = primary_port.to_string();
        for server in &self.servers {
            if server.port() == primary_port || !server.is_running() || server.is_paused() {
                continue;
            }
            match role::role_report(server, PROBE_TIMEOUT) {
                Ok(RoleReport::Replica { master_port }) if master_port == primary_port => {
                    role::replica_in_sync(server, PROBE_TIMEOUT)?;
                }
                Ok(RoleReport::Master | RoleReport::Replica { .. }) => {
                    let _ = server
                        .command_with_timeout(&["REPLICAOF", "127.0.0.1", &port], PROBE_TIMEOUT);
                    return Err(format!(
                        "node {} did not replicate {primary_port}; sent REPLICAOF",
                        server.port()
                    ));
                }
                other => return Err(format!("node {}: ROLE {other:?}", server.port())),
            }
        }
        Ok(())
    }

    /// `Ok` when every Sentinel reports `primary_port`, sees every replica
    /// and every other Sentinel healthy, and `CKQUORUM` passes.
    fn formed(&self, primary_port: u16) -> Result<(), String> {
        let replicas: Vec<u16> = self
            .servers
            .iter()
            .map(RedisServer::port)
            .filter(|p| *p != primary_port)
            .collect();
        for sentinel in &self.sentinels {
            let at = sentinel.port();
            let addr = self
                .primary_per(sentinel)
                .map_err(|e| format!("sentinel {at}: {e}"))?;
            if addr.port() != primary_port {
                return Err(format!("sentinel {at} reports primary {addr}"));
            }
            let known = self
                .records(sentinel, "REPLICAS")
                .map_err(|e| format!("sentinel {at}: SENTINEL REPLICAS: {e}"))?;
            for port in &replicas {
                let ok = known.iter().any(|r| {
                    record_addr(r).map(|a| a.port()) == Some(*port)
                        && flags_ok(r, "slave")
                        && r.get("master-link-status").map(String::as_str) == Some("ok")
                });
                if !ok {
                    return Err(format!("sentinel {at} does not see replica {port} up yet"));
                }
            }
            let peers = self
                .records(sentinel, "SENTINELS")
                .map_err(|e| format!("sentinel {at}: SENTINEL SENTINELS: {e}"))?;
            let healthy = peers.iter().filter(|r| flags_ok(r, "sentinel")).count();
            if healthy + 1 != self.sentinels.len() {
                return Err(format!(
                    "sentinel {at} knows {healthy} of {} other sentinels",
                    self.sentinels.len() - 1
                ));
            }
            let name = self.config.master_name.as_str();
            let quorum = sentinel
                .command_with_timeout(&["SENTINEL", "CKQUORUM", name], PROBE_TIMEOUT)
                .map_err(|e| format!("sentinel {at}: CKQUORUM: {e}"))?;
            if !quorum.starts_with("OK") {
                return Err(format!("sentinel {at}: CKQUORUM: {quorum}"));
            }
        }
        Ok(())
    }

    fn wait_for<T>(&self, what: &str, check: impl FnMut() -> Result<T, String>) -> io::Result<T> {
        poll::until(what, self.config.wait_timeout, POLL_INTERVAL, check)
    }

    /// Adds the end of every process's log to a start-up error.
    fn with_logs(&self, err: io::Error) -> io::Error {
        let mut msg = err.to_string();
        let all = self
            .servers
            .iter()
            .map(|s| ("server", s))
            .chain(self.sentinels.iter().map(|s| ("sentinel", s)));
        for (kind, server) in all {
            let tail = server.log_tail();
            let lines: Vec<&str> = tail.lines().collect();
            let from = lines.len().saturating_sub(ERROR_LOG_LINES);
            let _ = write!(
                msg,
                "\n--- {kind} on port {} ---\n{}",
                server.port(),
                lines[from..].join("\n")
            );
        }
        io::Error::new(err.kind(), msg)
    }
}

impl Drop for RedisSentinelSet {
    /// Kills the Sentinels, then the data nodes, each by its PID.
    fn drop(&mut self) {
        for server in self.sentinels.iter_mut().chain(self.servers.iter_mut()) {
            server.stop();
        }
    }
}

/// Whether a `SENTINEL REPLICAS`/`SENTINELS` record's flags are exactly
/// `kind` (no `s_down`, `o_down`, `disconnected`, ...).
fn flags_ok(record: &HashMap<String, String>, kind: &str) -> bool {
    record.get("flags").map(String::as_str) == Some(kind)
}

fn record_addr(record: &HashMap<String, String>) -> Option<SocketAddr> {
    let ip = record.get("ip")?.parse::<IpAddr>().ok()?;
    let port = record.get("port")?.parse::<u16>().ok()?;
    Some(SocketAddr::new(ip, port))
}
