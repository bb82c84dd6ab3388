//! [`PgBouncer`]: a throwaway PgBouncer in front of a [`PostgresServer`], on a free loopback
//! port, with its configuration, user list and log in a temporary directory.

use std::env;
use std::fs;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::PostgresServer;
use crate::servers::launch::{self, Launch, Process, Server, Timing};
use crate::servers::port::try_free_port;
use crate::servers::postgres::run_as;
use crate::servers::probe;

/// Environment variable naming the `pgbouncer` binary.
const BINARY_ENV: &str = "DISTLOCK_PGBOUNCER";
const TIMING: Timing = Timing {
    ready: Duration::from_secs(20),
    stop: Duration::from_secs(10),
    poll: Duration::from_millis(20),
    max_polls: 2_000,
};
/// PgBouncer's own log (its `logfile`).
const LOG_FILE: &str = "pgbouncer.log";
/// Where its stdout and stderr go.
const OUTPUT_FILE: &str = "stdout.log";
const CONFIG_FILE: &str = "pgbouncer.ini";
const USERS_FILE: &str = "userlist.txt";
/// The user the testkit's PostgreSQL trusts, and the database its URL names.
const USER: &str = "postgres";

/// How PgBouncer hands server connections to clients (its `pool_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoolMode {
    /// A server connection per client connection, for the client's whole session.
    Session,
    /// A server connection per transaction: consecutive statements of one client may run on
    /// different server connections (the mode that breaks session state).
    #[default]
    Transaction,
    /// A server connection per statement.
    Statement,
}

impl PoolMode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::Transaction => "transaction",
            Self::Statement => "statement",
        }
    }
}

/// Configures a [`PgBouncer`]; see [`PgBouncer::builder`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct PgBouncerBuilder {
    mode: PoolMode,
    pool_size: u32,
    settings: Vec<(String, String)>,
}

impl Default for PgBouncerBuilder {
    fn default() -> Self {
        Self {
            mode: PoolMode::Transaction,
            pool_size: 2,
            settings: Vec::new(),
        }
    }
}

impl PgBouncerBuilder {
    /// The pool mode (default [`PoolMode::Transaction`]).
    pub fn pool_mode(mut self, mode: PoolMode) -> Self {
        self.mode = mode;
        self
    }

    /// Server connections per database and user (`default_pool_size`, default 2).
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size;
        self
    }

    /// Any other `[pgbouncer]` setting, after the defaults (e.g. `server_round_robin = 1`).
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((name.into(), value.into()));
        self
    }

    /// Writes the configuration and user list to a fresh temporary directory and starts
    /// `pgbouncer` on a free port of `127.0.0.1`, forwarding every database to `upstream`
    /// (trusting the user `postgres`, as the testkit's server does); waits until it accepts
    /// connections. As root it runs as the same unprivileged user as the server. Retried on a
    /// new port, at most 5 times, when it exits before it is ready.
    ///
    /// # Errors
    /// If the binary cannot be found (run `scripts/ensure-postgres.sh`), or it does not become
    /// ready; the message then includes the tail of its log.
    pub fn start(self, upstream: &PostgresServer) -> io::Result<PgBouncer> {
        let binary = pgbouncer_binary()?;
        let run_as = run_as()?;
        let dir = tempfile::Builder::new()
            .prefix("lock-testkit-pgbouncer-")
            .tempdir()?;
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))?;
        }
        fs::write(dir.path().join(USERS_FILE), format!("\"{USER}\" \"\"\n"))?;
        let mut bouncer = PgBouncer {
            // A safe shutdown.
            process: Process::new("pgbouncer", LOG_FILE, TIMING, Some(Signal::SIGINT), dir),
            port: 0,
            binary,
            run_as,
            config: self,
            upstream: upstream.port(),
        };
        launch::start_on_fresh_ports(&mut bouncer)?;
        Ok(bouncer)
    }

    fn config(&self, dir: &Path, port: u16, upstream: u16) -> String {
        let mut text = format!(
            "[databases]\n* = host=127.0.0.1 port={upstream}\n\n[pgbouncer]\n\
             listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = trust\nauth_file = {users}\nlogfile = {log}\n\
             pool_mode = {mode}\ndefault_pool_size = {size}\nmax_client_conn = 200\n\
             admin_users = {USER}\n",
            users = dir.join(USERS_FILE).display(),
            log = dir.join(LOG_FILE).display(),
            mode = self.mode.as_str(),
            size = self.pool_size,
        );
        for (name, value) in &self.settings {
            text.push_str(&format!("{name} = {value}\n"));
        }
        text
    }
}

/// A running PgBouncer on `127.0.0.1` in front of one [`PostgresServer`], in its own temporary
/// directory. Signalled only by its own PID; dropping it stops it and deletes the directory.
#[derive(Debug)]
pub struct PgBouncer {
    /// The `pgbouncer` process, in the temporary directory.
    process: Process,
    port: u16,
    binary: PathBuf,
    run_as: Option<(u32, u32)>,
    /// What its configuration file says, rewritten for each port it tries.
    config: PgBouncerBuilder,
    /// The port of the PostgreSQL server it pools connections to.
    upstream: u16,
}

impl PgBouncer {
    /// A PgBouncer in transaction mode (2 server connections) in front of `upstream`.
    ///
    /// # Errors
    /// See [`PgBouncerBuilder::start`].
    pub fn start(upstream: &PostgresServer) -> io::Result<Self> {
        Self::builder().start(upstream)
    }

    /// A builder for another pool mode, pool size or settings.
    pub fn builder() -> PgBouncerBuilder {
        PgBouncerBuilder::default()
    }

    /// The port PgBouncer listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`: the upstream's database, through
    /// PgBouncer.
    pub fn url(&self) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/postgres", self.port)
    }

    /// The URL of PgBouncer's admin console (database `pgbouncer`; simple queries only, e.g.
    /// `SHOW SERVERS`, `RECONNECT`).
    pub fn admin_url(&self) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/pgbouncer", self.port)
    }

    /// The PID of the `pgbouncer` process, or `None` once stopped or exited.
    pub fn pid(&mut self) -> Option<u32> {
        self.process.pid()
    }

    /// Stops PgBouncer by its PID (`SIGINT`, a safe shutdown) and reaps it; `SIGKILL` if it
    /// has not exited within 10 s. Does nothing if it is already stopped.
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// The last ~40 lines of PgBouncer's log.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }
}

impl Server for PgBouncer {
    fn process(&self) -> &Process {
        &self.process
    }

    fn port(&self) -> u16 {
        self.port
    }

    /// A fresh port, and the configuration file that names it.
    fn take_ports(&mut self) -> io::Result<()> {
        self.port = try_free_port()?;
        let dir = self.process.dir();
        fs::write(
            dir.join(CONFIG_FILE),
            self.config.config(dir, self.port, self.upstream),
        )
    }

    /// Spawns `pgbouncer` on its configuration file; it is ready when its port accepts TCP
    /// connections.
    fn launch(&mut self) -> io::Result<Launch> {
        let out = self.process.append(OUTPUT_FILE)?;
        let mut cmd = Command::new(&self.binary);
        cmd.arg(self.process.dir().join(CONFIG_FILE))
            .current_dir(self.process.dir())
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out));
        if let Some((uid, gid)) = self.run_as {
            cmd.uid(uid).gid(gid);
        }
        let child = cmd
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("spawning pgbouncer: {e}")))?;
        let port = self.port;
        self.process
            .launch(child, port, |_| Ok(probe::accepts(port)))
            .map_err(|err| self.failure(&err.to_string()))
    }

    /// `what`, with PgBouncer's log and its own output (where it explains a refused
    /// configuration).
    fn failure(&self, what: &str) -> io::Error {
        let stdout = fs::read_to_string(self.process.dir().join(OUTPUT_FILE)).unwrap_or_default();
        io::Error::other(format!(
            "{what}\n--- pgbouncer log ---\n{}\n--- stdout/stderr ---\n{stdout}",
            self.log_tail()
        ))
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The `pgbouncer` binary: `DISTLOCK_PGBOUNCER` if set, else on `PATH`, else in `/usr/sbin`
/// or `/usr/bin` (Debian's package puts it in `/usr/sbin`, often not on a user's `PATH`).
///
/// # Errors
/// [`io::ErrorKind::NotFound`] with installation advice (`scripts/ensure-postgres.sh`).
pub fn pgbouncer_binary() -> io::Result<PathBuf> {
    if let Some(path) = env::var_os(BINARY_ENV).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let path = env::var_os("PATH")
        .map(|p| env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    path.into_iter()
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("pgbouncer"))
        .find(|file| file.is_file())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "pgbouncer was not found ({BINARY_ENV}, PATH, /usr/sbin): run \
                     `scripts/ensure-postgres.sh` from the repository root to install it"
                ),
            )
        })
}
