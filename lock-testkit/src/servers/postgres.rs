//! [`PostgresServer`]: one throwaway PostgreSQL cluster (`initdb` in a temporary directory) and
//! its `postgres` process on a free loopback port.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::servers::launch::{self, Launch, Process, Server, Timing, wait_exit};
use crate::servers::port::try_free_port;
use crate::servers::probe;
use crate::signal;

/// Environment variable naming the directory that holds `initdb` and `postgres`.
const BINDIR_ENV: &str = "DISTLOCK_PG_BINDIR";
/// Environment variable naming the unprivileged user the server runs as when we are root.
const USER_ENV: &str = "DISTLOCK_PG_USER";
/// The user the server runs as when we are root and [`USER_ENV`] is unset: the one Debian's
/// `postgresql` package creates.
const DEFAULT_OS_USER: &str = "postgres";
/// The database superuser `initdb` creates, and the database the URL names.
const SUPERUSER: &str = "postgres";

/// Names the settings [`PostgresServer::run_initdb`] gives `initdb`, in the template's key:
/// change it with them.
const TEMPLATE_SETTINGS: &str = "utf8 no-locale trust wal-segsize=1";

/// How long `initdb` may take.
const INITDB_TIMEOUT: Duration = Duration::from_secs(120);
const TIMING: Timing = Timing {
    // Crash recovery included.
    ready: Duration::from_secs(60),
    stop: Duration::from_secs(20),
    poll: Duration::from_millis(20),
    max_polls: 10_000,
};

const LOG_FILE: &str = "postgres.log";
const DATA_DIR: &str = "data";
const PW_FILE: &str = "pwfile";

/// Configures a [`PostgresServer`] before starting it; see [`PostgresServer::builder`].
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct PostgresServerBuilder {
    password: Option<String>,
    settings: Vec<(String, String)>,
    /// The environment of a [`FakeClock`](crate::FakeClock) the server runs on.
    env: Vec<(OsString, OsString)>,
}

impl PostgresServerBuilder {
    /// Gives the superuser `postgres` this password and requires it (`scram-sha-256`) on every
    /// connection; [`PostgresServer::url`] then carries it. Without one, connections from
    /// loopback are trusted.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Sets a server setting on the command line (`-c name=value`), after the defaults, e.g.
    /// `.setting("synchronous_commit", "off")`.
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((name.into(), value.into()));
        self
    }

    /// Runs the server (the postmaster and every backend it forks) on `clock`, libfaketime
    /// preloaded, restarts included: `now()` follows [`FakeClock::jump`](crate::FakeClock::jump).
    /// `initdb` runs on the real clock.
    pub fn fake_clock(mut self, clock: &crate::FakeClock) -> Self {
        self.env = clock.env();
        self
    }

    /// Runs `initdb` in a fresh temporary directory, starts `postgres` on a free port on
    /// `127.0.0.1` and waits until it accepts connections.
    ///
    /// As root (where `initdb` and `postgres` refuse to run), both run as the unprivileged
    /// user `postgres` (or the one `DISTLOCK_PG_USER` names), which owns the directory.
    /// If the server exits before it is ready (typically because another process took the
    /// port), it is retried on a new port, at most 5 times.
    ///
    /// # Errors
    /// If the binaries or the unprivileged user cannot be found, `initdb` fails, or the server
    /// does not become ready; the message then includes the tail of its log.
    pub fn start(self) -> io::Result<PostgresServer> {
        let bin_dir = postgres_bin_dir()?;
        let run_as = run_as()?;
        let dir = tempfile::Builder::new()
            .prefix("lock-testkit-postgres-")
            .tempdir()?;
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))?;
        }
        let mut server = PostgresServer {
            // An immediate shutdown, as in a crash.
            process: Process::new("postgres", LOG_FILE, TIMING, Some(Signal::SIGQUIT), dir),
            port: 0,
            bin_dir,
            run_as,
            password: self.password,
            settings: self.settings,
            env: self.env,
        };
        server.initdb()?;
        launch::start_on_fresh_ports(&mut server)?;
        Ok(server)
    }
}

/// A running (or stopped) PostgreSQL server on `127.0.0.1`, in its own temporary directory.
///
/// The process is only ever signalled by its own PID, and only while it has not been reaped.
/// [`stop`](Self::stop) is an immediate shutdown (`SIGQUIT`: like a crash, the next start
/// runs crash recovery, and every committed transaction survives); dropping the value stops
/// the server the same way and deletes the directory.
///
/// Settings favour speed over durability against an operating-system crash (`fsync = off`),
/// which no test simulates; a killed server keeps every committed transaction.
#[derive(Debug)]
pub struct PostgresServer {
    /// The postmaster, in the temporary directory.
    process: Process,
    port: u16,
    bin_dir: PathBuf,
    /// The uid and gid the processes run as, when we are root.
    run_as: Option<(u32, u32)>,
    password: Option<String>,
    settings: Vec<(String, String)>,
    env: Vec<(OsString, OsString)>,
}

impl PostgresServer {
    /// Starts a server with the default configuration: trust authentication from loopback.
    ///
    /// # Errors
    /// See [`PostgresServerBuilder::start`].
    pub fn start() -> io::Result<PostgresServer> {
        Self::builder().start()
    }

    /// A builder for a server with a password or extra settings.
    pub fn builder() -> PostgresServerBuilder {
        PostgresServerBuilder::default()
    }

    /// The TCP port the server listens on (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT` as a socket address (e.g. the upstream of a
    /// [`FaultProxy`](crate::FaultProxy)).
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, self.port))
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`, with the password (percent-encoded)
    /// when one is set.
    pub fn url(&self) -> String {
        match &self.password {
            Some(pw) => self.url_with_password(pw),
            None => format!("postgres://{SUPERUSER}@127.0.0.1:{}/postgres", self.port),
        }
    }

    /// The URL with this password instead of the server's own (a wrong one, for tests).
    pub fn url_with_password(&self, password: &str) -> String {
        format!(
            "postgres://{SUPERUSER}:{}@127.0.0.1:{}/postgres",
            crate::servers::redis::percent_encode(password),
            self.port
        )
    }

    /// The directory holding the data directory (`data/`) and the log.
    pub fn dir(&self) -> &Path {
        self.process.dir()
    }

    /// The PID of the postmaster, or `None` if it is stopped or has exited.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether the server process is alive.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Stops the server at once by its PID (`SIGQUIT`, an immediate shutdown: backends end
    /// without a checkpoint, as in a crash) and reaps it; `SIGKILL` if it has not exited
    /// within 20 s. Does nothing if it is already stopped. The directory and port are kept for
    /// [`start_again`](Self::start_again).
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Stops the server cleanly (`SIGINT`, a fast shutdown: a checkpoint, then exit), bounded
    /// like [`stop`](Self::stop).
    pub fn stop_fast(&mut self) {
        self.process.stop_with(Some(Signal::SIGINT));
    }

    /// Starts the server again after [`stop`](Self::stop), on the same port with the same
    /// data. Re-binding is retried a few times (with a short backoff) since the port was only
    /// just freed.
    ///
    /// # Errors
    /// [`io::ErrorKind::AlreadyExists`] if the server is still running; otherwise if it does
    /// not become ready on its port (message includes the log tail).
    pub fn start_again(&mut self) -> io::Result<()> {
        launch::start_again(self)
    }

    /// The last ~40 lines of the server's log, for panic and error messages.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    fn command(&self, program: &str) -> io::Result<Command> {
        let log = self.process.append(LOG_FILE)?;
        let mut cmd = Command::new(self.bin_dir.join(program));
        cmd.current_dir(self.dir())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log));
        if let Some((uid, gid)) = self.run_as {
            // std drops the supplementary groups too when root changes uid.
            cmd.uid(uid).gid(gid);
        }
        Ok(cmd)
    }

    /// Creates the data directory: a copy of the machine's template cluster when the server
    /// has no password (the copy takes a quarter of `initdb`'s CPU time, and a test run starts
    /// a few hundred servers on two cores), else `initdb` itself. A template that cannot be
    /// had falls back to `initdb` too.
    fn initdb(&self) -> io::Result<()> {
        let data = self.dir().join(DATA_DIR);
        if self.password.is_none()
            && let Some(template) = self.template()
        {
            let copied = self
                .as_run_as(Command::new("cp"))
                .arg("-a")
                .arg(&template)
                .arg(&data)
                .status()?;
            if copied.success() {
                return Ok(());
            }
            // A template removed under us (a temporary-directory cleaner): start afresh.
            let _ = fs::remove_dir_all(&data);
        }
        self.run_initdb(&data)
    }

    /// The data directory of the template cluster for this server's binaries and user (an
    /// `initdb` with the settings of [`run_initdb`](Self::run_initdb), trust authentication),
    /// made by the first server that needs it: `initdb` in a directory of its own, renamed into
    /// place, so a server never sees a half-made template (of two made at once, one is
    /// renamed and the other deleted). It sits in the system's temporary directory, shared by
    /// every test process. Every copy of it has the same system identifier, which no test
    /// reads. `None` when it cannot be made.
    fn template(&self) -> Option<PathBuf> {
        let key = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::hash::DefaultHasher::new();
            self.bin_dir.hash(&mut hasher);
            let initdb = fs::metadata(self.bin_dir.join("initdb")).ok()?;
            (initdb.len(), initdb.modified().ok()).hash(&mut hasher);
            self.run_as.hash(&mut hasher);
            // The settings of `run_initdb`: a template made with others is not this one.
            TEMPLATE_SETTINGS.hash(&mut hasher);
            hasher.finish()
        };
        let home = env::temp_dir().join(format!("lock-testkit-postgres-template-{key:016x}"));
        let data = home.join(DATA_DIR);
        if data.join("PG_VERSION").is_file() {
            return Some(data);
        }
        let fresh = tempfile::Builder::new()
            .prefix("lock-testkit-postgres-template-new-")
            .tempdir()
            .ok()?;
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(fresh.path(), Some(uid), Some(gid)).ok()?;
        }
        self.run_initdb(&fresh.path().join(DATA_DIR)).ok()?;
        if fs::rename(fresh.path(), &home).is_ok() {
            // Renamed: the template is no longer the temporary directory's to delete.
            let _ = fresh.keep();
        }
        data.join("PG_VERSION").is_file().then_some(data)
    }

    /// `command` run as the unprivileged user when we are root.
    fn as_run_as(&self, mut command: Command) -> Command {
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        command
    }

    /// `initdb` of a fresh cluster in `data`.
    fn run_initdb(&self, data: &Path) -> io::Result<()> {
        let mut args: Vec<OsString> = vec![
            "-D".into(),
            data.into(),
            format!("--username={SUPERUSER}").into(),
            "--encoding=UTF8".into(),
            "--no-locale".into(),
            "--no-sync".into(),
            "--no-instructions".into(),
            // WAL segments of 1 MB instead of 16: a fresh cluster is 23 MB instead of 39, and
            // each test server copies one (a few hundred copies in a test run).
            "--wal-segsize=1".into(),
        ];
        match &self.password {
            Some(pw) => {
                let file = self.dir().join(PW_FILE);
                fs::write(&file, format!("{pw}\n"))?;
                if let Some((uid, gid)) = self.run_as {
                    std::os::unix::fs::chown(&file, Some(uid), Some(gid))?;
                }
                args.push("--auth=scram-sha-256".into());
                let mut pwfile = OsString::from("--pwfile=");
                pwfile.push(&file);
                args.push(pwfile);
            }
            None => args.push("--auth=trust".into()),
        }
        let mut child = self
            .command("initdb")?
            .args(&args)
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("spawning initdb: {e}")))?;
        match wait_exit(&mut child, INITDB_TIMEOUT, TIMING)? {
            Some(status) if status.success() => Ok(()),
            Some(status) => Err(self.failure(&format!("initdb failed ({status})"))),
            None => {
                signal::kill_and_reap(&mut child);
                Err(self.failure(&format!("initdb did not finish within {INITDB_TIMEOUT:?}")))
            }
        }
    }

    fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "-D".into(),
            self.dir().join(DATA_DIR).into(),
            "-p".into(),
            self.port.to_string().into(),
        ];
        let defaults = [
            ("listen_addresses", "127.0.0.1"),
            ("unix_socket_directories", ""),
            ("fsync", "off"),
            ("full_page_writes", "off"),
            ("shared_buffers", "16MB"),
            ("max_connections", "50"),
        ];
        let settings = defaults
            .iter()
            .map(|(k, v)| (*k, *v))
            .chain(self.settings.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        for (name, value) in settings {
            args.push("-c".into());
            args.push(format!("{name}={value}").into());
        }
        args
    }

    fn failure(&self, what: &str) -> io::Error {
        self.process.failure(what)
    }
}

impl Server for PostgresServer {
    fn process(&self) -> &Process {
        &self.process
    }

    fn port(&self) -> u16 {
        self.port
    }

    fn take_ports(&mut self) -> io::Result<()> {
        self.port = try_free_port()?;
        Ok(())
    }

    /// Spawns `postgres` on `self.port`; it is ready when our postmaster reports itself ready
    /// in `postmaster.pid` (its PID first, `ready` on the status line) and its port accepts
    /// TCP connections.
    fn launch(&mut self) -> io::Result<Launch> {
        let child = self
            .command("postgres")?
            .args(self.args())
            .envs(self.env.iter().cloned())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("spawning postgres: {e}")))?;
        let pid_file = self.dir().join(DATA_DIR).join("postmaster.pid");
        let port = self.port;
        let ready = |child: &mut std::process::Child| {
            Ok(reports_ready(&pid_file, child.id()) && probe::accepts(port))
        };
        self.process
            .launch(child, port, ready)
            .map_err(|err| self.failure(&err.to_string()))
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `postmaster.pid` names `pid` (line 1) and says `ready` (line 8, PostgreSQL ≥ 10).
fn reports_ready(pid_file: &Path, pid: u32) -> bool {
    let Ok(text) = fs::read_to_string(pid_file) else {
        return false;
    };
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines.first() == Some(&pid.to_string().as_str()) && lines.get(7) == Some(&"ready")
}

/// The directory holding `initdb` and `postgres`: `DISTLOCK_PG_BINDIR` if set, else
/// `pg_config --bindir` when `initdb` is there, else the newest `/usr/lib/postgresql/*/bin`
/// (Debian's layout), else the directory of an `initdb` on `PATH`.
///
/// # Errors
/// [`io::ErrorKind::NotFound`] with installation advice (`scripts/ensure-postgres.sh`).
pub fn postgres_bin_dir() -> io::Result<PathBuf> {
    let has_initdb = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(dir) = env::var_os(BINDIR_ENV).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        return if has_initdb(&dir) {
            Ok(dir)
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{BINDIR_ENV}={} holds no initdb and postgres; fix or unset it",
                    dir.display()
                ),
            ))
        };
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && has_initdb(&dir) {
            return Ok(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_initdb(dir))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return Ok(dir);
    }
    let on_path = env::var_os("PATH")
        .map(|p| env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    if let Some(dir) = on_path.into_iter().find(|dir| has_initdb(dir)) {
        return Ok(dir);
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "PostgreSQL's initdb and postgres were not found (pg_config --bindir, \
             /usr/lib/postgresql/*/bin, PATH): run `scripts/ensure-postgres.sh` from the \
             repository root to install them, or set {BINDIR_ENV}=/path/to/bin"
        ),
    ))
}

/// As root, the uid and gid of the unprivileged user to run the server as.
pub(crate) fn run_as() -> io::Result<Option<(u32, u32)>> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let name = env::var(USER_ENV)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_OS_USER.to_owned());
    match nix::unistd::User::from_name(&name).map_err(io::Error::from)? {
        Some(user) if !user.uid.is_root() => Ok(Some((user.uid.as_raw(), user.gid.as_raw()))),
        _ => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "initdb and postgres refuse to run as root, and there is no unprivileged user \
                 {name:?} to run them as: install PostgreSQL from the distribution's packages \
                 (`scripts/ensure-postgres.sh`, which creates the user `postgres`), or set \
                 {USER_ENV} to an existing unprivileged user"
            ),
        )),
    }
}
