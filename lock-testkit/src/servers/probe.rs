//! Readiness checks for a freshly spawned server.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use crate::servers::client;

const CONNECT_TIMEOUT: Duration = Duration::from_millis(100);
/// Connect timeout of [`accepts`].
const ACCEPT_TIMEOUT: Duration = Duration::from_millis(200);
const IO_TIMEOUT: Duration = Duration::from_millis(500);
const IDENTITY_TIMEOUT: Duration = Duration::from_millis(500);
/// Reads allowed to collect one short reply line.
const MAX_READS: usize = 8;

/// Whether something accepts a TCP connection on `127.0.0.1:port` within 200 ms.
pub(crate) fn accepts(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, ACCEPT_TIMEOUT).is_ok()
}

/// Whether something answers an inline `PING` on `127.0.0.1:port` in a way
/// that proves a Redis server is up and serving: `+PONG`, or any error reply
/// such as `-NOAUTH` (password set) except `-LOADING` (still loading data).
pub(crate) fn answers_ping(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) else {
        return false;
    };
    if stream.set_read_timeout(Some(IO_TIMEOUT)).is_err()
        || stream.set_write_timeout(Some(IO_TIMEOUT)).is_err()
        || stream.write_all(b"PING\r\n").is_err()
    {
        return false;
    }
    let mut reply = Vec::with_capacity(64);
    let mut buf = [0_u8; 128];
    for _ in 0..MAX_READS {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                reply.extend_from_slice(&buf[..n]);
                if reply.windows(2).any(|w| w == b"\r\n") {
                    break;
                }
            }
        }
    }
    match reply.first() {
        Some(b'+') => true,
        Some(b'-') => !reply.starts_with(b"-LOADING"),
        _ => false,
    }
}

/// The `process_id` reported by `INFO server` at `target`, if it can be read.
/// For a TLS server this is also the readiness probe: it takes a handshake.
pub(crate) fn server_pid(target: impl redis::IntoConnectionInfo) -> Option<u32> {
    let reply = client::query(target, &["INFO", "server"], IDENTITY_TIMEOUT).ok()?;
    client::render(&reply)
        .lines()
        .find_map(|line| line.trim().strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
}
