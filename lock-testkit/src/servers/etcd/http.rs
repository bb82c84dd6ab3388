//! The few HTTP calls the kit makes to an etcd member's client port (its JSON gateway): health
//! and status. Plain HTTP/1.0 over a std `TcpStream`, bounded by timeouts, so the kit needs no
//! gRPC client and works from synchronous code.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Connect, read and write timeout of one call.
const TIMEOUT: Duration = Duration::from_millis(1_000);
/// Upper bound on a reply's size.
const MAX_REPLY: u64 = 64 * 1024;

/// What `/v3/maintenance/status` says about one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Status {
    /// The answering member's id.
    pub(crate) member_id: u64,
    /// The id of the member it takes for the leader (0: none).
    pub(crate) leader: u64,
    /// Its Raft term.
    pub(crate) raft_term: u64,
}

/// Whether the member at `addr` says it is healthy (`GET /health` answers `"health":"true"`:
/// it has a leader and a quorum read succeeds).
pub(crate) fn healthy(addr: SocketAddr) -> bool {
    request(addr, "GET /health HTTP/1.0\r\n\r\n")
        .map(|body| body.contains("\"health\":\"true\""))
        .unwrap_or(false)
}

/// The member's own status (`POST /v3/maintenance/status`).
///
/// # Errors
/// When it does not answer within the timeouts, or its answer lacks the fields.
pub(crate) fn status(addr: SocketAddr) -> io::Result<Status> {
    let body = request(
        addr,
        "POST /v3/maintenance/status HTTP/1.0\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\n\r\n{}",
    )?;
    let json: serde_json::Value = serde_json::from_str(&body)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e}: {body}")))?;
    // The gateway renders 64-bit integers as strings.
    let number = |value: &serde_json::Value| -> Option<u64> {
        value
            .as_str()
            .and_then(|s| s.parse().ok())
            .or_else(|| value.as_u64())
    };
    let field = |value: Option<&serde_json::Value>, name: &str| {
        value.and_then(number).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("no {name} in the status answer: {body}"),
            )
        })
    };
    let header = json.get("header");
    Ok(Status {
        member_id: field(header.and_then(|h| h.get("member_id")), "header.member_id")?,
        leader: json.get("leader").and_then(number).unwrap_or(0),
        raft_term: field(header.and_then(|h| h.get("raft_term")), "header.raft_term")?,
    })
}

/// Sends `request` to `addr` and returns the body of a `200` answer.
fn request(addr: SocketAddr, request: &str) -> io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    stream.write_all(request.as_bytes())?;
    let mut reply = String::new();
    stream.take(MAX_REPLY).read_to_string(&mut reply)?;
    let (head, body) = reply.split_once("\r\n\r\n").ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("no HTTP answer: {reply}"),
        )
    })?;
    let status_line = head.lines().next().unwrap_or_default();
    if status_line.split_whitespace().nth(1) != Some("200") {
        return Err(io::Error::other(format!("{status_line}: {body}")));
    }
    Ok(body.to_owned())
}
