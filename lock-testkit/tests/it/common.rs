//! Shared by the modules: checks on servers that are meant to be gone.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// Whether nothing accepts a connection on loopback `port` within 200 ms: the server that
/// listened there is stopped (or never started).
pub(crate) fn refuses(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err()
}
