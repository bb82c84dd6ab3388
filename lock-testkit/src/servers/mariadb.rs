//! [`MariadbServer`]: one throwaway MariaDB (or MySQL) server (`mariadb-install-db` in a
//! temporary directory) and its `mariadbd` process on a free loopback port, its socket in the
//! directory. A system server on 3306 is never used.

use std::env;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::servers::launch::{self, Launch, Process, Server, Timing, wait_exit};
use crate::servers::port::try_free_port;
use crate::servers::probe;
use crate::signal;

/// The user the tests connect as (created with a password on the first start), and its
/// database.
const USER: &str = "distlock";
const DATABASE: &str = "distlock";
/// The user's password when the builder sets none.
const DEFAULT_PASSWORD: &str = "distlock-test";

const INSTALL_TIMEOUT: Duration = Duration::from_secs(120);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const TIMING: Timing = Timing {
    // InnoDB's crash recovery included.
    ready: Duration::from_secs(60),
    stop: Duration::from_secs(20),
    poll: Duration::from_millis(20),
    max_polls: 10_000,
};

const LOG_FILE: &str = "mariadb.log";
const DATA_DIR: &str = "data";
const SOCKET: &str = "mysqld.sock";
const PID_FILE: &str = "mysqld.pid";
const TMP_DIR: &str = "tmp";

/// Configures a [`MariadbServer`] before starting it; see [`MariadbServer::builder`].
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct MariadbServerBuilder {
    password: Option<String>,
    settings: Vec<(String, String)>,
}

impl MariadbServerBuilder {
    /// The password of the user `distlock` the URL names (default `distlock-test`).
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Sets a server option on the command line (`--name=value`), after the defaults, e.g.
    /// `.setting("wait-timeout", "2")`.
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((name.into(), value.into()));
        self
    }

    /// Makes a data directory in a fresh temporary directory (a copy of a template made once
    /// per machine by `mariadb-install-db`), starts `mariadbd` on a free
    /// port on `127.0.0.1` (as root: with `--user=root`), waits until it accepts connections,
    /// then creates the user `distlock` (with its password) and its database `distlock`
    /// through the root account on the socket.
    ///
    /// # Errors
    /// If the binaries cannot be found (`scripts/ensure-mariadb.sh` installs them), the
    /// install fails, or the server does not become ready; the message then includes the
    /// tail of its log.
    pub fn start(self) -> io::Result<MariadbServer> {
        let bins = MariadbBinaries::find()?;
        let dir = tempfile::Builder::new()
            .prefix("lock-testkit-mariadb-")
            .tempdir()?;
        let mut server = MariadbServer {
            // SIGKILL at once: a crash (InnoDB recovers every committed transaction).
            process: Process::new("mariadbd", LOG_FILE, TIMING, None, dir),
            port: 0,
            bins,
            password: self.password.unwrap_or_else(|| DEFAULT_PASSWORD.to_owned()),
            settings: self.settings,
        };
        server.make_data_dir()?;
        launch::start_on_fresh_ports(&mut server)?;
        server.sql_as_root(&format!(
            "CREATE USER '{USER}'@'%' IDENTIFIED BY '{pw}'; \
             CREATE USER '{USER}'@'localhost' IDENTIFIED BY '{pw}'; \
             CREATE DATABASE {DATABASE}; \
             GRANT ALL ON *.* TO '{USER}'@'%'; GRANT ALL ON *.* TO '{USER}'@'localhost';",
            pw = server.password.replace('\'', "''")
        ))?;
        Ok(server)
    }
}

/// The binaries of the server, its installer and its client.
#[derive(Debug, Clone)]
struct MariadbBinaries {
    server: PathBuf,
    install: PathBuf,
    client: PathBuf,
}

impl MariadbBinaries {
    fn find() -> io::Result<Self> {
        let found = |names: &[&str]| -> Option<PathBuf> {
            let mut dirs: Vec<PathBuf> = env::var_os("PATH")
                .map(|p| env::split_paths(&p).collect())
                .unwrap_or_default();
            dirs.extend(["/usr/sbin", "/usr/bin", "/usr/local/bin"].map(PathBuf::from));
            names
                .iter()
                .flat_map(|name| dirs.iter().map(move |dir| dir.join(name)))
                .find(|path| path.is_file())
        };
        match (
            found(&["mariadbd", "mysqld"]),
            found(&["mariadb-install-db", "mysql_install_db"]),
            found(&["mariadb", "mysql"]),
        ) {
            (Some(server), Some(install), Some(client)) => Ok(Self {
                server,
                install,
                client,
            }),
            _ => Err(io::Error::new(
                io::ErrorKind::NotFound,
                "MariaDB's mariadbd, mariadb-install-db and mariadb were not found (PATH, \
                 /usr/sbin, /usr/bin): run `scripts/ensure-mariadb.sh` from the repository \
                 root to install them",
            )),
        }
    }
}

/// A running (or stopped) MariaDB server on `127.0.0.1`, in its own temporary directory.
///
/// The process is only ever signalled by its own PID. [`stop`](Self::stop) kills it at once
/// (`SIGKILL`, a crash: the next start runs InnoDB's recovery, and every committed
/// transaction survives); dropping the value does the same and deletes the directory.
#[derive(Debug)]
pub struct MariadbServer {
    process: Process,
    port: u16,
    bins: MariadbBinaries,
    password: String,
    settings: Vec<(String, String)>,
}

impl MariadbServer {
    /// Starts a server with the default configuration.
    ///
    /// # Errors
    /// See [`MariadbServerBuilder::start`].
    pub fn start() -> io::Result<MariadbServer> {
        Self::builder().start()
    }

    /// A builder for a server with another password or extra options.
    pub fn builder() -> MariadbServerBuilder {
        MariadbServerBuilder::default()
    }

    /// The TCP port the server listens on (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT` as a socket address.
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, self.port))
    }

    /// `mysql://distlock:PASSWORD@127.0.0.1:PORT/distlock` (the password percent-encoded).
    pub fn url(&self) -> String {
        self.url_with_password(&self.password)
    }

    /// The URL with this password instead of the server's own (a wrong one, for tests).
    pub fn url_with_password(&self, password: &str) -> String {
        format!(
            "mysql://{USER}:{}@127.0.0.1:{}/{DATABASE}",
            crate::servers::redis::percent_encode(password),
            self.port
        )
    }

    /// The directory holding the data directory (`data/`), the socket and the log.
    pub fn dir(&self) -> &Path {
        self.process.dir()
    }

    /// The PID of the server, or `None` if it is stopped or has exited.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether the server process is alive.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Kills the server at once by its PID (`SIGKILL`, a crash) and reaps it. Does nothing if
    /// it is already stopped. The directory and port are kept for
    /// [`start_again`](Self::start_again).
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Starts the server again after [`stop`](Self::stop), on the same port with the same
    /// data (InnoDB recovers what was committed).
    ///
    /// # Errors
    /// [`io::ErrorKind::AlreadyExists`] if the server is still running; otherwise if it does
    /// not become ready on its port (message includes the log tail).
    pub fn start_again(&mut self) -> io::Result<()> {
        launch::start_again(self)
    }

    /// Runs `sql` (one or more statements) as the server's root account through its socket
    /// with the `mariadb` client, e.g. `KILL CONNECTION 42`; returns what it printed (tab
    /// separated, no headers).
    ///
    /// # Errors
    /// If the client cannot run or the server refuses the SQL (the message has its answer).
    pub fn sql_as_root(&self, sql: &str) -> io::Result<String> {
        let mut child = Command::new(&self.bins.client)
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.dir().join(SOCKET).display()))
            .args(["--user=root", "--batch", "--skip-column-names", "-e", sql])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        if wait_exit(&mut child, CLIENT_TIMEOUT, TIMING)?.is_none() {
            signal::kill_and_reap(&mut child);
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the mariadb client did not finish within {CLIENT_TIMEOUT:?}"),
            ));
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "mariadb -e {sql:?} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The last ~40 lines of the server's log, for panic and error messages.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    /// `--user=root` when we are root (mariadbd refuses root otherwise).
    fn user_arg() -> Option<&'static str> {
        nix::unistd::geteuid().is_root().then_some("--user=root")
    }

    /// Creates the data directory: a copy of the machine's template (an install made once by
    /// the first server that needs it, renamed into place so no server sees half of one; the
    /// copy costs a fraction of an install), else an install of its own.
    fn make_data_dir(&self) -> io::Result<()> {
        let data = self.dir().join(DATA_DIR);
        std::fs::create_dir_all(self.dir().join(TMP_DIR))?;
        if let Some(template) = self.template() {
            let copied = Command::new("cp")
                .arg("-a")
                .arg(&template)
                .arg(&data)
                .status()?;
            if copied.success() {
                return Ok(());
            }
            let _ = std::fs::remove_dir_all(&data);
        }
        self.install(self.dir(), &data)
    }

    /// The template data directory for this server binary, in the system's temporary
    /// directory (shared by every test process); `None` when it cannot be made.
    fn template(&self) -> Option<PathBuf> {
        let key = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::hash::DefaultHasher::new();
            self.bins.server.hash(&mut hasher);
            let meta = std::fs::metadata(&self.bins.server).ok()?;
            (meta.len(), meta.modified().ok()).hash(&mut hasher);
            Self::user_arg().hash(&mut hasher);
            hasher.finish()
        };
        let home = env::temp_dir().join(format!("lock-testkit-mariadb-template-{key:016x}"));
        let data = home.join(DATA_DIR);
        if data.join("mysql").is_dir() {
            return Some(data);
        }
        let fresh = tempfile::Builder::new()
            .prefix("lock-testkit-mariadb-template-new-")
            .tempdir()
            .ok()?;
        std::fs::create_dir_all(fresh.path().join(TMP_DIR)).ok()?;
        self.install(fresh.path(), &fresh.path().join(DATA_DIR))
            .ok()?;
        if std::fs::rename(fresh.path(), &home).is_ok() {
            let _ = fresh.keep(); // renamed: no longer the temporary directory's to delete
        }
        data.join("mysql").is_dir().then_some(data)
    }

    /// `mariadb-install-db` into `data`, its temporary files in `home`'s `tmp/` (concurrent
    /// installs sharing `/tmp` collide on their temporary tables).
    fn install(&self, home: &Path, data: &Path) -> io::Result<()> {
        let log = self.process.append(LOG_FILE)?;
        let mut cmd = Command::new(&self.bins.install);
        cmd.current_dir(home)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", home.join(TMP_DIR).display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ])
            .args(Self::user_arg())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log));
        let mut child = cmd
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("spawning mariadb-install-db: {e}")))?;
        match wait_exit(&mut child, INSTALL_TIMEOUT, TIMING)? {
            Some(status) if status.success() => Ok(()),
            Some(status) => Err(self.failure(&format!("mariadb-install-db failed ({status})"))),
            None => {
                signal::kill_and_reap(&mut child);
                Err(self.failure("mariadb-install-db did not finish in time"))
            }
        }
    }

    fn args(&self) -> Vec<OsString> {
        let dir = self.dir();
        let mut args: Vec<OsString> = vec![
            "--no-defaults".into(),
            format!("--datadir={}", dir.join(DATA_DIR).display()).into(),
            format!("--port={}", self.port).into(),
            format!("--socket={}", dir.join(SOCKET).display()).into(),
            format!("--pid-file={}", dir.join(PID_FILE).display()).into(),
            format!("--log-error={}", dir.join(LOG_FILE).display()).into(),
            format!("--tmpdir={}", dir.join(TMP_DIR).display()).into(),
        ];
        args.extend(Self::user_arg().map(OsString::from));
        let defaults = [
            ("bind-address", "127.0.0.1"),
            ("skip-name-resolve", "1"),
            ("skip-log-bin", "1"),
            ("innodb-buffer-pool-size", "16M"),
            ("innodb-log-file-size", "8M"),
            // Committed transactions reach the OS at commit: a killed server keeps them.
            ("innodb-flush-log-at-trx-commit", "2"),
            ("max-connections", "300"),
        ];
        let settings = defaults
            .iter()
            .map(|(k, v)| (*k, *v))
            .chain(self.settings.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        for (name, value) in settings {
            args.push(format!("--{name}={value}").into());
        }
        args
    }

    fn failure(&self, what: &str) -> io::Error {
        self.process.failure(what)
    }
}

impl Server for MariadbServer {
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

    /// Spawns `mariadbd` on `self.port`; it is ready when its port and its socket accept
    /// connections (it listens once InnoDB has recovered).
    fn launch(&mut self) -> io::Result<Launch> {
        let log = self.process.append(LOG_FILE)?;
        let child = Command::new(&self.bins.server)
            .current_dir(self.dir())
            .args(self.args())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("spawning mariadbd: {e}")))?;
        let port = self.port;
        // Both listeners: the TCP port can accept before the socket does (the root account's
        // statements go through the socket), and a connect to the socket then fails with
        // ECONNREFUSED.
        let socket = self.dir().join(SOCKET);
        self.process
            .launch(child, port, |_| {
                Ok(
                    probe::accepts(port)
                        && std::os::unix::net::UnixStream::connect(&socket).is_ok(),
                )
            })
            .map_err(|err| self.failure(&err.to_string()))
    }
}

impl Drop for MariadbServer {
    fn drop(&mut self) {
        self.stop();
    }
}
