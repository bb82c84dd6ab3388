//! Free loopback ports.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Mutex, OnceLock, PoisonError};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// Ports never handed out, even if free: the developer's own Redis.
const NEVER: [u16; 1] = [6379];

/// How many times the OS is asked for a port before giving up.
const MAX_ATTEMPTS: usize = 64;

/// Ports already handed out by this process, so that two servers started
/// concurrently in one test binary never race for the same port.
fn handed_out() -> &'static Mutex<HashSet<u16>> {
    static PORTS: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    PORTS.get_or_init(|| Mutex::new(HashSet::new()))
}

/// A currently free TCP port on `127.0.0.1`.
///
/// Binds `127.0.0.1:0`, reads the port the OS chose and closes the listener.
/// A port is never returned twice by the same process, nor one that another
/// live process got from here (a claim held until the process exits, so a
/// server stopped and started again keeps its port), and `6379` is never
/// returned. The port can still be taken by a process that does not use this
/// function before it is used; [`RedisServer::start`](crate::RedisServer::start)
/// retries with a new port when that happens.
///
/// # Panics
///
/// If no port can be obtained (binding `127.0.0.1:0` keeps failing).
pub fn free_port() -> u16 {
    match try_free_port() {
        Ok(port) => port,
        Err(err) => panic!("no free port on 127.0.0.1: {err}"),
    }
}

/// Fallible version of [`free_port`].
pub(crate) fn try_free_port() -> io::Result<u16> {
    for _ in 0..MAX_ATTEMPTS {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        if NEVER.contains(&port) {
            continue;
        }
        let mut ports = handed_out().lock().unwrap_or_else(PoisonError::into_inner);
        if !ports.contains(&port) && claim(port)? {
            ports.insert(port);
            return Ok(port);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrNotAvailable,
        format!("no new free port on 127.0.0.1 after {MAX_ATTEMPTS} attempts"),
    ))
}

/// Claims `port` for this process until it exits, across the test processes of the machine:
/// an exclusive `flock` on `$TMPDIR/distlock-ports/<port>`, held open for the process's life
/// (the kernel drops it when the process ends, however it ends). `false` when another live
/// process holds it.
///
/// Why: a test that kills a server and starts it again on the same port (a Redis restarted
/// empty, an etcd member killed) leaves that port free meanwhile, and nextest runs other test
/// processes beside it whose servers asked the OS for a free port. One of them got it: the
/// first test's clients then spoke to another test's etcd, and its restarted member could not
/// come back (seen at ten tests at a time as a cluster without a leader and a foreign fenced
/// log). The OS still chooses the port; this only keeps one a live process has used.
fn claim(port: u16) -> io::Result<bool> {
    static CLAIMS: Mutex<Vec<Flock<File>>> = Mutex::new(Vec::new());
    let dir = std::env::temp_dir().join("distlock-ports");
    fs::create_dir_all(&dir)?;
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(port.to_string()))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(claim) => {
            CLAIMS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(claim);
            Ok(true)
        }
        Err((_, Errno::EWOULDBLOCK)) => Ok(false),
        Err((_, errno)) => Err(io::Error::from(errno)),
    }
}

#[cfg(test)]
mod tests {
    use super::{claim, try_free_port};

    #[test]
    fn a_port_handed_out_stays_claimed_against_other_claims() {
        let port = try_free_port().expect("a free port");
        // A second claim opens the file anew, as another process would: refused while this
        // process lives.
        assert!(
            !claim(port).expect("the claim directory"),
            "port {port} claimed twice"
        );
    }
}
