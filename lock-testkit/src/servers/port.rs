//! Free loopback ports.

use std::collections::HashSet;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Mutex, OnceLock, PoisonError};

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
/// A port is never returned twice by the same process, and `6379` is never
/// returned. The port can still be taken by another process before it is
/// used; [`RedisServer::start`](crate::RedisServer::start) retries with a new
/// port when that happens.
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
        if ports.insert(port) {
            return Ok(port);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrNotAvailable,
        format!("no new free port on 127.0.0.1 after {MAX_ATTEMPTS} attempts"),
    ))
}
