//! Replication roles, as reported by `ROLE` and `INFO replication`.

use std::io;
use std::time::Duration;

use crate::RedisServer;

/// The replication role of a data node, as it reports it (`ROLE`) right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A master (primary): accepts writes.
    Master,
    /// A replica of another node.
    Replica,
}

/// What `ROLE` says, in more detail than [`Role`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RoleReport {
    Master,
    /// A replica of the master on `127.0.0.1:master_port` (as configured,
    /// whether or not the link is up).
    Replica {
        master_port: u16,
    },
    Sentinel,
}

impl RoleReport {
    pub(crate) fn role(&self) -> Option<Role> {
        match self {
            RoleReport::Master => Some(Role::Master),
            RoleReport::Replica { .. } => Some(Role::Replica),
            RoleReport::Sentinel => None,
        }
    }
}

/// Asks `server` for its `ROLE`.
pub(crate) fn role_report(server: &RedisServer, timeout: Duration) -> io::Result<RoleReport> {
    let text = server.command_with_timeout(&["ROLE"], timeout)?;
    parse_role(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "unexpected ROLE reply from port {}: {text:?}",
                server.port()
            ),
        )
    })
}

/// Like [`role_report`], reduced to a [`Role`]; a sentinel is an error.
pub(crate) fn role(server: &RedisServer, timeout: Duration) -> io::Result<Role> {
    role_report(server, timeout)?.role().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("port {} is a sentinel, not a data node", server.port()),
        )
    })
}

/// Parses a flattened `ROLE` reply (one element per line).
fn parse_role(text: &str) -> Option<RoleReport> {
    let mut lines = text.lines().map(str::trim);
    match lines.next()? {
        "master" => Some(RoleReport::Master),
        "slave" | "replica" => {
            let _host = lines.next()?;
            let master_port = lines.next()?.parse().ok()?;
            Some(RoleReport::Replica { master_port })
        }
        "sentinel" => Some(RoleReport::Sentinel),
        _ => None,
    }
}

/// The value of `field` in an `INFO`-style `field:value` text.
pub(crate) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        line.trim()
            .strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
    })
}

/// `Ok` if `server` is a replica whose link to its master is up and not in
/// the middle of a full sync; otherwise the reason.
pub(crate) fn replica_in_sync(server: &RedisServer, timeout: Duration) -> Result<(), String> {
    let info = server
        .command_with_timeout(&["INFO", "replication"], timeout)
        .map_err(|e| format!("port {}: INFO replication: {e}", server.port()))?;
    let link = info_field(&info, "master_link_status").unwrap_or("?");
    let syncing = info_field(&info, "master_sync_in_progress").unwrap_or("?");
    if link == "up" && syncing == "0" {
        Ok(())
    } else {
        Err(format!(
            "replica on port {}: master_link_status:{link} master_sync_in_progress:{syncing}",
            server.port()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{RoleReport, info_field, parse_role};

    #[test]
    fn parses_roles() {
        assert_eq!(
            parse_role("master\n3129\n127.0.0.1\n9001\n3129"),
            Some(RoleReport::Master)
        );
        assert_eq!(parse_role("master\n0"), Some(RoleReport::Master));
        assert_eq!(
            parse_role("slave\n127.0.0.1\n9000\nconnected\n3167"),
            Some(RoleReport::Replica { master_port: 9000 })
        );
        assert_eq!(parse_role("sentinel\nmymaster"), Some(RoleReport::Sentinel));
        assert_eq!(parse_role("bogus"), None);
        assert_eq!(parse_role(""), None);
    }

    #[test]
    fn reads_info_fields() {
        let info = "# Replication\r\nrole:slave\r\nmaster_link_status:up\r\n";
        assert_eq!(info_field(info, "role"), Some("slave"));
        assert_eq!(info_field(info, "master_link_status"), Some("up"));
        assert_eq!(info_field(info, "master_link"), None);
        assert_eq!(info_field(info, "missing"), None);
    }
}
