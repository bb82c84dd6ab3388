//! [`RedisServer`]: one `redis-server` child process and its data directory.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use redis::{ConnectionInfo, IntoConnectionInfo, Value};

use crate::servers::binary::try_redis_server_binary;
use crate::servers::launch::{self, Launch, Process, Server, Timing};
use crate::servers::port::try_free_port;
use crate::servers::{client, probe};
use crate::signal;

const TIMING: Timing = Timing {
    // Until it answers `PING`.
    ready: Duration::from_secs(10),
    // Unused: a stop is a `SIGKILL`.
    stop: Duration::ZERO,
    poll: Duration::from_millis(10),
    max_polls: 2_000,
};
/// When the server's identity cannot be checked (e.g. `INFO` renamed), it is
/// taken as ready once it has answered `PING` and stayed alive this long.
const STABLE_FOR: Duration = Duration::from_millis(250);
/// Timeout of [`RedisServer::command`].
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// Timeout of the `SAVE` issued by [`RedisServer::restart`].
const SAVE_TIMEOUT: Duration = Duration::from_secs(30);

const LOG_FILE: &str = "redis.log";
const DUMP_FILE: &str = "dump.rdb";
const NODES_FILE: &str = "nodes.conf";
const SENTINEL_FILE: &str = "sentinel.conf";
const AOF_DIR: &str = "appendonlydir";

/// What [`RedisServer::restart`] does with the server's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeepData {
    /// `SAVE` synchronously before the kill; the new process loads `dump.rdb`.
    Keep,
    /// Kill, delete the persisted data, and start empty.
    Discard,
}

#[derive(Debug, Clone, Default)]
struct Config {
    cluster: bool,
    sentinel: Option<String>,
    password: Option<String>,
    /// `Some(client_auth)`: TLS only, demanding a client certificate if `client_auth`.
    #[cfg(feature = "tls")]
    tls: Option<bool>,
    extra: Vec<String>,
    /// The environment of a [`FakeClock`](crate::FakeClock) the server runs on.
    env: Vec<(OsString, OsString)>,
}

/// Configures a [`RedisServer`] before starting it; see [`RedisServer::builder`].
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct RedisServerBuilder {
    config: Config,
    /// Whether to run Valkey's `valkey-server` instead of `redis-server`.
    valkey: bool,
}

impl RedisServerBuilder {
    /// Runs the server with `--cluster-enabled yes` (its `nodes.conf` and
    /// cluster bus port are private to it), so cluster-only commands such as
    /// `CLUSTER KEYSLOT` work. No slots are assigned.
    pub fn cluster_enabled(mut self, on: bool) -> Self {
        self.config.cluster = on;
        self
    }

    /// Runs the process as a Redis Sentinel (`redis-server sentinel.conf
    /// --sentinel`) instead of a data server.
    ///
    /// `config` becomes the initial contents of `sentinel.conf` in the
    /// server's directory (e.g. `sentinel monitor mymaster 127.0.0.1 PORT 2`
    /// and related lines); the file is written once, before the first launch,
    /// and the sentinel then rewrites it with its state, which therefore
    /// survives [`RedisServer::start_again`]. Port, bind address, directory
    /// and log file are still given on the command line, as for a data
    /// server. [`RedisSentinelSet`](crate::RedisSentinelSet) builds a whole
    /// monitored group on top of this.
    pub fn sentinel(mut self, config: impl Into<String>) -> Self {
        self.config.sentinel = Some(config.into());
        self
    }

    /// Requires this password (`--requirepass`); [`RedisServer::url`] and
    /// [`RedisServer::command`] then authenticate with it.
    pub fn password(mut self, pw: impl Into<String>) -> Self {
        self.config.password = Some(pw.into());
        self
    }

    /// Serves TLS only (`--tls-port`, with `--port 0`), with a fresh throwaway CA and a
    /// certificate for `127.0.0.1` and `localhost` written into the server's directory.
    /// [`RedisServer::url`] is then `rediss://`, and [`RedisServer::command`] and the readiness
    /// check speak TLS, trusting that CA. Not for cluster or sentinel servers.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, on: bool) -> Self {
        self.config.tls = on.then_some(false);
        self
    }

    /// Like [`tls`](Self::tls), and the server also demands a client certificate signed by
    /// its CA (`--tls-auth-clients yes`): mutual TLS. The certificate and key to present are
    /// [`RedisServer::certificates`]' client ones.
    #[cfg(feature = "tls")]
    pub fn mutual_tls(mut self, on: bool) -> Self {
        self.config.tls = on.then_some(true);
        self
    }

    /// Runs the server on `clock` (libfaketime preloaded), restarts included: the test moves
    /// its clock with [`FakeClock::jump`](crate::FakeClock::jump).
    pub fn fake_clock(mut self, clock: &crate::FakeClock) -> Self {
        self.config.env = clock.env();
        self
    }

    /// Runs Valkey's `valkey-server` ([`try_valkey_server_binary`](crate::try_valkey_server_binary))
    /// instead of `redis-server`: the same arguments, protocol and lifecycle.
    pub fn valkey(mut self) -> Self {
        self.valkey = true;
        self
    }

    /// Appends one raw command-line argument, after the defaults, e.g.
    /// `.arg("--maxmemory").arg("1mb")`.
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.config.extra.push(a.into());
        self
    }

    /// Starts the server on a free port and waits until it answers `PING`.
    ///
    /// If the process exits before it is ready (typically because another
    /// process took the port), it is retried on a new port, at most 5 times,
    /// unless its log shows that its configuration was rejected.
    ///
    /// # Errors
    ///
    /// If `redis-server` cannot be found or spawned, or does not become ready;
    /// the message then includes the tail of its log.
    pub fn start(self) -> io::Result<RedisServer> {
        let binary = if self.valkey {
            crate::servers::valkey::try_valkey_server_binary()?
        } else {
            try_redis_server_binary()?
        };
        let dir = tempfile::Builder::new()
            .prefix("lock-testkit-redis-")
            .tempdir()?;
        #[cfg(feature = "tls")]
        let tls = match self.config.tls {
            Some(_) if self.config.cluster || self.config.sentinel.is_some() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "TLS servers cannot be cluster nodes or sentinels in this kit",
                ));
            }
            Some(client_auth) => Some(crate::servers::tls::ServerTls::create(
                dir.path(),
                client_auth,
            )?),
            None => None,
        };
        let mut server = RedisServer {
            #[cfg(feature = "tls")]
            tls,
            process: Process::new("redis-server", LOG_FILE, TIMING, None, dir),
            paused: AtomicBool::new(false),
            port: 0,
            bus_port: None,
            binary,
            config: self.config,
        };
        launch::start_on_fresh_ports(&mut server)?;
        Ok(server)
    }
}

/// A running (or stopped) `redis-server` child process on `127.0.0.1`.
///
/// It owns a temporary directory holding its `dump.rdb`, its log and (in
/// cluster mode) its `nodes.conf`. The process is only ever signalled by its
/// own PID, and only while it has not been reaped. Dropping the value kills
/// the process (`SIGKILL`), reaps it and deletes the directory.
#[derive(Debug)]
pub struct RedisServer {
    /// The `redis-server` process, in the temporary directory.
    process: Process,
    /// Set by a successful `pause`, cleared by `resume` and `stop`.
    paused: AtomicBool,
    port: u16,
    bus_port: Option<u16>,
    binary: PathBuf,
    config: Config,
    #[cfg(feature = "tls")]
    tls: Option<crate::servers::tls::ServerTls>,
}

impl RedisServer {
    /// Starts a server with the default configuration: no persistence
    /// except an explicit `SAVE`, bound to `127.0.0.1` on a free port.
    ///
    /// # Errors
    ///
    /// See [`RedisServerBuilder::start`].
    pub fn start() -> io::Result<RedisServer> {
        Self::builder().start()
    }

    /// A builder for a server with a password, cluster mode or extra arguments.
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder::default()
    }

    /// The TCP port the server listens on (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster bus port (`--cluster-port`) of a server started with
    /// [`cluster_enabled(true)`](RedisServerBuilder::cluster_enabled), as
    /// needed by `CLUSTER MEET`; `None` otherwise.
    pub fn cluster_bus_port(&self) -> Option<u16> {
        self.bus_port
    }

    /// `127.0.0.1:PORT` as a socket address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `redis://127.0.0.1:PORT/`, or `redis://:PASSWORD@127.0.0.1:PORT/`
    /// (password percent-encoded) when a password is set; `rediss://` for a
    /// TLS server.
    pub fn url(&self) -> String {
        let scheme = if self.is_tls() { "rediss" } else { "redis" };
        match &self.config.password {
            Some(pw) => format!(
                "{scheme}://:{}@127.0.0.1:{}/",
                percent_encode(pw),
                self.port
            ),
            None => format!("{scheme}://127.0.0.1:{}/", self.port),
        }
    }

    /// Whether the server speaks TLS only (see `RedisServerBuilder::tls`).
    pub fn is_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// A TLS server's certificates: the CA to trust, and the client certificate
    /// and key a mutual-TLS server accepts. `None` for a plain server.
    #[cfg(feature = "tls")]
    pub fn certificates(&self) -> Option<&crate::TestCertificates> {
        self.tls.as_ref().map(|tls| &tls.certs)
    }

    /// A TLS server's CA certificate (PEM), which clients must trust.
    #[cfg(feature = "tls")]
    pub fn ca_cert_pem(&self) -> Option<&str> {
        self.certificates()
            .map(crate::TestCertificates::ca_cert_pem)
    }

    /// The file holding a TLS server's CA certificate, e.g. for `redis-cli --cacert`.
    #[cfg(feature = "tls")]
    pub fn ca_cert_path(&self) -> Option<PathBuf> {
        self.tls
            .as_ref()
            .map(|_| crate::servers::tls::ServerTls::ca_path(self.dir()))
    }

    /// Where the kit's own commands connect: the URL, with the TLS settings
    /// (our CA, our client certificate) of a TLS server.
    fn target(&self) -> io::Result<ConnectionInfo> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return tls.connection_info(&self.url());
        }
        self.url().into_connection_info().map_err(client::to_io)
    }

    /// The directory holding the server's data and log files.
    pub fn dir(&self) -> &Path {
        self.process.dir()
    }

    /// The PID of the server process, or `None` if it is stopped or has exited.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether the server process is alive (it may be paused).
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Whether the server was suspended by [`pause`](Self::pause) and not
    /// yet [`resume`](Self::resume)d (or stopped).
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst) && self.is_running()
    }

    /// Kills the process by its PID (`SIGKILL`) and reaps it. Does nothing if
    /// it is already stopped. The data directory and port are kept for
    /// [`start_again`](Self::start_again).
    pub fn stop(&mut self) {
        self.paused.store(false, Ordering::SeqCst);
        self.process.stop();
    }

    /// Starts the server again after [`stop`](Self::stop), on the same port
    /// with the same directory and configuration, so it loads any `dump.rdb`
    /// there. Re-binding is retried a few times (with a short backoff) since
    /// the port was only just freed.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::AlreadyExists`] if the server is still running;
    /// otherwise if it does not become ready on its port (message includes
    /// the log tail).
    pub fn start_again(&mut self) -> io::Result<()> {
        if !self.is_running() {
            self.stop(); // forget a child that exited on its own
        }
        launch::start_again(self)
    }

    /// Kills and starts the server again on the same port.
    ///
    /// With [`KeepData::Keep`] a synchronous `SAVE` is issued first (after a
    /// `SIGCONT`, in case it was paused), so the data survives; a stopped
    /// server is just started again from its last `dump.rdb`. With
    /// [`KeepData::Discard`] the persisted data (`dump.rdb`, and any AOF
    /// directory) is deleted and the server comes back empty.
    ///
    /// # Errors
    ///
    /// If the `SAVE` fails, or the server does not start again.
    pub fn restart(&mut self, keep: KeepData) -> io::Result<()> {
        if keep == KeepData::Keep && self.is_running() {
            let _ = self.resume();
            self.command_with_timeout(&["SAVE"], SAVE_TIMEOUT)
                .map_err(|e| io::Error::new(e.kind(), format!("SAVE before restart: {e}")))?;
        }
        self.stop();
        if keep == KeepData::Discard {
            remove_if_present(&self.dir().join(DUMP_FILE))?;
            let aof = self.dir().join(AOF_DIR);
            if aof.is_dir() {
                fs::remove_dir_all(aof)?;
            }
        }
        self.start_again()
    }

    /// Suspends the process by its PID (`SIGSTOP`): it keeps its port and
    /// connections but answers nothing until [`resume`](Self::resume).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`] if the server is not running.
    pub fn pause(&self) -> io::Result<()> {
        self.signal(Signal::SIGSTOP)?;
        self.paused.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Resumes a process suspended by [`pause`](Self::pause) (`SIGCONT`).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`] if the server is not running.
    pub fn resume(&self) -> io::Result<()> {
        self.signal(Signal::SIGCONT)?;
        self.paused.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// Sends one command on a new connection (authenticating if a password
    /// is set) and returns the reply as text, with a 5 s timeout.
    ///
    /// Since every call has its own connection, connection-scoped commands
    /// do not carry over between calls: `WAIT` after a `SET` sent by an
    /// earlier call waits for nothing, and `MULTI`, `ASKING`, `SELECT` or
    /// `CLIENT ...` affect only their own call. Use a `redis` connection for
    /// those.
    ///
    /// Status and bulk replies are returned as-is (`"PONG"`, `"OK"`, a
    /// value), integers in decimal, nil as `"(nil)"`, arrays one element per
    /// line (flattened).
    ///
    /// # Errors
    ///
    /// An error reply from the server ([`io::ErrorKind::Other`], with its
    /// message), [`io::ErrorKind::TimedOut`], or
    /// [`io::ErrorKind::ConnectionRefused`] when nothing listens.
    pub fn command(&self, args: &[&str]) -> io::Result<String> {
        self.command_with_timeout(args, COMMAND_TIMEOUT)
    }

    /// [`command`](Self::command) with a custom timeout, applied to
    /// connecting and to the exchange, e.g. to show that a paused server
    /// does not answer.
    ///
    /// # Errors
    ///
    /// As for [`command`](Self::command).
    pub fn command_with_timeout(&self, args: &[&str], timeout: Duration) -> io::Result<String> {
        client::query(self.target()?, args, timeout).map(|reply| client::render(&reply))
    }

    /// Like [`command_with_timeout`](Self::command_with_timeout), but returns
    /// the reply unrendered, for replies whose structure matters.
    pub(crate) fn query(&self, args: &[&str], timeout: Duration) -> io::Result<Value> {
        client::query(self.target()?, args, timeout)
    }

    /// Like [`query`](Self::query), with binary-safe arguments.
    pub(crate) fn query_bytes(&self, args: &[&[u8]], timeout: Duration) -> io::Result<Value> {
        client::query_bytes(self.target()?, args, timeout)
    }

    /// The last ~40 lines of the server's log (including anything it wrote
    /// to stderr), for panic and error messages.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    fn signal(&self, sig: Signal) -> io::Result<()> {
        let mut guard = self.process.child();
        match guard.as_mut() {
            Some(child) => signal::signal_child(child, sig),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("redis-server on port {} is not running", self.port),
            )),
        }
        .map_err(|e| io::Error::new(e.kind(), format!("{sig} to redis-server: {e}")))
    }

    fn args(&self) -> Vec<OsString> {
        let dir = self.dir();
        let mut args: Vec<OsString> = Vec::new();
        if self.config.sentinel.is_some() {
            // The config file must come first; `--sentinel` selects the mode.
            args.push(dir.join(SENTINEL_FILE).into());
            args.push("--sentinel".into());
        }
        let mut push = |k: &str, v: OsString| {
            args.push(k.into());
            args.push(v);
        };
        push("--bind", "127.0.0.1".into());
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            for (k, v) in tls.args(dir, self.port) {
                push(k, v);
            }
        }
        if !self.is_tls() {
            push("--port", self.port.to_string().into());
        }
        push("--save", "".into());
        push("--appendonly", "no".into());
        push("--dir", dir.into());
        push("--dbfilename", DUMP_FILE.into());
        push("--daemonize", "no".into());
        push("--logfile", dir.join(LOG_FILE).into());
        if self.config.cluster {
            push("--cluster-enabled", "yes".into());
            push("--cluster-config-file", dir.join(NODES_FILE).into());
            if let Some(bus) = self.bus_port {
                push("--cluster-port", bus.to_string().into());
            }
        }
        if let Some(pw) = &self.config.password {
            push("--requirepass", pw.into());
        }
        args.extend(self.config.extra.iter().map(OsString::from));
        args
    }

    /// Whether the last exit was a configuration error (retrying cannot help).
    fn config_rejected(&self) -> bool {
        self.log_tail().contains("FATAL CONFIG FILE ERROR")
    }

    /// Spawns the process on `self.port`, writing `sentinel.conf` first for a sentinel's
    /// first launch.
    fn spawn(&self) -> io::Result<Child> {
        if let Some(config) = &self.config.sentinel {
            let path = self.dir().join(SENTINEL_FILE);
            if !path.exists() {
                fs::write(&path, config)?;
            }
        }
        let log = self.process.append(LOG_FILE)?;
        Command::new(&self.binary)
            .args(self.args())
            .envs(self.config.env.iter().cloned())
            .current_dir(self.dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| {
                io::Error::new(e.kind(), format!("spawning {}: {e}", self.binary.display()))
            })
    }

    /// The readiness probe of a launch: the child answers `PING` on our port and, when it can
    /// be checked, reports our child's PID (`INFO server`). A server that cannot be
    /// identified is taken as ready once it has answered and stayed alive [`STABLE_FOR`].
    fn ready_probe(&self) -> io::Result<impl FnMut(&mut Child) -> io::Result<bool> + use<>> {
        let target = self.target()?;
        let tls = self.is_tls();
        let port = self.port;
        let mut answering_since: Option<Instant> = None;
        Ok(move |child: &mut Child| {
            // A TLS port ignores a plaintext PING; there the INFO below, over TLS, is the probe.
            if !(tls || probe::answers_ping(port)) {
                answering_since = None;
                return Ok(false);
            }
            match probe::server_pid(target.clone()) {
                Some(p) => {
                    // Another server owns the port; ours will fail to bind and exit.
                    if p != child.id() {
                        answering_since = None;
                    }
                    Ok(p == child.id())
                }
                // Not up yet (an unidentified server cannot be told from one still starting).
                None if tls => Ok(false),
                None => {
                    let since = *answering_since.get_or_insert_with(Instant::now);
                    Ok(since.elapsed() >= STABLE_FOR && child.try_wait()?.is_none())
                }
            }
        })
    }
}

impl Server for RedisServer {
    fn process(&self) -> &Process {
        &self.process
    }

    fn port(&self) -> u16 {
        self.port
    }

    fn take_ports(&mut self) -> io::Result<()> {
        self.port = try_free_port()?;
        self.bus_port = if self.config.cluster {
            Some(try_free_port()?)
        } else {
            None
        };
        Ok(())
    }

    /// Spawns the process and waits until it is ready or exits; an exit caused by a
    /// configuration the server rejects is an error (another port or another try cannot help).
    fn launch(&mut self) -> io::Result<Launch> {
        let ready = self.ready_probe()?; // before the spawn: on an error, no child is left behind
        let child = self.spawn()?;
        let launched = self
            .process
            .launch(child, self.port, ready)
            .map_err(|err| self.failure(&err.to_string()))?;
        if let Launch::Exited(status) = &launched
            && self.config_rejected()
        {
            return Err(self.failure(&format!(
                "redis-server rejected its configuration ({status})"
            )));
        }
        Ok(launched)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::percent_encode;

    #[test]
    fn percent_encoding() {
        assert_eq!(percent_encode("abc-._~09"), "abc-._~09");
        assert_eq!(percent_encode("a b@:/%"), "a%20b%40%3A%2F%25");
        assert_eq!(percent_encode("é"), "%C3%A9");
    }
}
