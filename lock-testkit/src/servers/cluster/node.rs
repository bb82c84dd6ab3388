//! [`ClusterNode`], and reading `CLUSTER NODES`.

use std::io;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

use crate::RedisServer;
use crate::servers::role::{self, Role};

/// Timeout of the queries made by [`ClusterNode`]'s methods.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// One node of a [`RedisCluster`](super::RedisCluster): its
/// [`RedisServer`] and its cluster node id.
///
/// The node id is fixed when the cluster is created (it is kept in the
/// node's `nodes.conf`, so it survives a restart). The role and the slots
/// change with failovers and migrations, so they are queried each time.
#[derive(Debug)]
pub struct ClusterNode {
    pub(super) server: RedisServer,
    pub(super) id: String,
}

impl ClusterNode {
    /// The node's server process.
    pub fn server(&self) -> &RedisServer {
        &self.server
    }

    /// The node's server process, e.g. to [`stop`](RedisServer::stop) or
    /// [`pause`](RedisServer::pause) it.
    pub fn server_mut(&mut self) -> &mut RedisServer {
        &mut self.server
    }

    /// The node's client port on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        self.server.port()
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The node's cluster id (`CLUSTER MYID`), 40 hex characters.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether the process is running and not paused, i.e. expected to
    /// take part in the cluster.
    pub fn is_live(&self) -> bool {
        self.server.is_running() && !self.server.is_paused()
    }

    /// The node's role right now, from `ROLE`.
    ///
    /// # Errors
    ///
    /// If the node does not answer (stopped, paused) or answers oddly.
    pub fn role(&self) -> io::Result<Role> {
        role::role(&self.server, QUERY_TIMEOUT)
    }

    /// The slot ranges the node itself claims right now (its own line of
    /// `CLUSTER NODES`); empty for a replica. Slots being migrated still
    /// belong to their source until the migration is finished.
    ///
    /// # Errors
    ///
    /// If the node does not answer.
    pub fn slots(&self) -> io::Result<Vec<RangeInclusive<u16>>> {
        Ok(self.myself()?.slots)
    }

    /// Sends one command to this node; see [`RedisServer::command`].
    ///
    /// # Errors
    ///
    /// As for [`RedisServer::command`] (including `MOVED`/`ASK` redirections,
    /// which are returned as errors: this is not a cluster client).
    pub fn command(&self, args: &[&str]) -> io::Result<String> {
        self.server.command(args)
    }

    /// This node's view of the cluster (`CLUSTER NODES`).
    pub(super) fn view(&self, timeout: Duration) -> io::Result<Vec<NodeLine>> {
        let text = self
            .server
            .command_with_timeout(&["CLUSTER", "NODES"], timeout)?;
        Ok(parse_nodes(&text))
    }

    /// This node's own line of `CLUSTER NODES`.
    pub(super) fn myself_within(&self, timeout: Duration) -> io::Result<NodeLine> {
        self.view(timeout)?
            .into_iter()
            .find(NodeLine::is_myself)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("CLUSTER NODES on port {} has no `myself` line", self.port()),
                )
            })
    }

    fn myself(&self) -> io::Result<NodeLine> {
        self.myself_within(QUERY_TIMEOUT)
    }
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NodeLine {
    pub(super) id: String,
    pub(super) port: u16,
    pub(super) flags: Vec<String>,
    /// The id of its master, for a replica.
    pub(super) master_id: Option<String>,
    pub(super) config_epoch: u64,
    pub(super) connected: bool,
    pub(super) slots: Vec<RangeInclusive<u16>>,
    /// Slots with a `[slot->-id]` (migrating) or `[slot-<-id]` (importing)
    /// marker; only ever on the `myself` line.
    pub(super) open_slots: Vec<u16>,
}

impl NodeLine {
    pub(super) fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    pub(super) fn is_myself(&self) -> bool {
        self.has_flag("myself")
    }

    pub(super) fn is_master(&self) -> bool {
        self.has_flag("master")
    }

    pub(super) fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|r| r.contains(&slot))
    }

    /// Why this node is not healthy in this view, if it is not.
    pub(super) fn trouble(&self) -> Option<String> {
        let bad: Vec<&str> = self
            .flags
            .iter()
            .map(String::as_str)
            .filter(|f| matches!(*f, "fail" | "fail?" | "handshake" | "noaddr"))
            .collect();
        if !bad.is_empty() {
            Some(format!("flagged {}", bad.join(",")))
        } else if !self.connected && !self.is_myself() {
            Some("link disconnected".to_owned())
        } else {
            None
        }
    }
}

/// Parses the text of `CLUSTER NODES`, skipping lines it cannot read.
pub(super) fn parse_nodes(text: &str) -> Vec<NodeLine> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<NodeLine> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return None;
    }
    // `ip:port@cport[,hostname]`
    let addr = fields[1].split(',').next()?;
    let port = addr.split('@').next()?.rsplit(':').next()?.parse().ok()?;
    let mut slots = Vec::new();
    let mut open_slots = Vec::new();
    for field in &fields[8..] {
        if let Some(marker) = field.strip_prefix('[') {
            let slot: Option<u16> = marker.split('-').next().and_then(|s| s.parse().ok());
            open_slots.extend(slot);
        } else if let Some((start, end)) = field.split_once('-') {
            slots.push(start.parse().ok()?..=end.parse().ok()?);
        } else {
            let slot = field.parse().ok()?;
            slots.push(slot..=slot);
        }
    }
    Some(NodeLine {
        id: fields[0].to_owned(),
        port,
        flags: fields[2].split(',').map(str::to_owned).collect(),
        master_id: Some(fields[3]).filter(|m| *m != "-").map(str::to_owned),
        config_epoch: fields[6].parse().ok()?,
        connected: fields[7] == "connected",
        slots,
        open_slots,
    })
}

#[cfg(test)]
mod tests {
    use super::parse_nodes;

    const SAMPLE: &str = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host1 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 master - 0 1426238318243 3 connected 10923-16383 [42->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]
6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@31005 slave,fail 67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 0 1426238316232 5 disconnected
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 7 [9-<-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]
";

    #[test]
    fn parses_cluster_nodes() {
        let nodes = parse_nodes(SAMPLE);
        assert_eq!(nodes.len(), 5);
        let replica = &nodes[0];
        assert_eq!(replica.port, 30004);
        assert!(!replica.is_master());
        assert_eq!(
            replica.master_id.as_deref(),
            Some("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca")
        );
        assert_eq!(replica.trouble(), None);
        assert_eq!(nodes[1].slots, vec![5461..=10922]);
        assert!(nodes[1].owns(5461) && nodes[1].owns(10922) && !nodes[1].owns(10923));
        assert_eq!(nodes[2].open_slots, vec![42]);
        assert_eq!(nodes[2].config_epoch, 3);
        assert!(nodes[3].trouble().is_some());
        let me = &nodes[4];
        assert!(me.is_myself() && me.is_master());
        assert_eq!(me.master_id, None);
        assert_eq!(me.slots, vec![0..=5460, 7..=7]);
        assert_eq!(me.open_slots, vec![9]);
    }
}
