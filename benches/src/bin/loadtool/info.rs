//! What the server saw: `INFO commandstats` (every command it ran, those called from inside Lua
//! scripts included), `INFO cpu`, and the pub/sub probes of S6. Measured through a separate
//! probe connection whose own commands are left out of the counts.
//!
//! For PostgreSQL (P1, P3, P5) the same figures come from `pg_stat_statements` (every statement
//! by its normalised text: calls, and planning + execution time with `track_planning` on; the
//! probe's own queries left out) and the
//! CPU time of the server's processes from `/proc`.
//!
//! For etcd (E1, E2, E3, E5) the counts are gRPC messages the server received, by method
//! (`grpc_server_msg_received_total` on the member's `/metrics`: for a unary call one message, for
//! a stream one per message, so a lease keep-alive counts once per renewal), and the CPU time of
//! the member's process from `/proc`.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use serde::Serialize;
use tokio::time::Instant;

use crate::procfs;

/// Commands only the probe sends; never counted as the cost of a lock.
const PROBE_COMMANDS: [&str; 4] = ["info", "pubsub|numsub", "client|list", "config|get"];

/// Connections for looking at the servers of a scenario: the first answers the pub/sub
/// questions; counters are summed over all of them.
pub(crate) struct Probe {
    conns: Vec<MultiplexedConnection>,
    postgres: Option<PgProbe>,
    etcd: Option<EtcdProbe>,
}

/// Where an etcd member serves `/metrics` (its client port), and its process.
struct EtcdProbe {
    addr: std::net::SocketAddr,
    server_pid: Option<u32>,
}

/// The counter of the gRPC messages an etcd member received, by service and method.
const ETCD_MESSAGES: &str = "grpc_server_msg_received_total{";

/// How long reading an etcd member's `/metrics` may take.
const ETCD_METRICS_TIMEOUT: Duration = Duration::from_secs(5);

/// A probe connection to a PostgreSQL server, and the server's postmaster (for its CPU time).
struct PgProbe {
    client: tokio_postgres::Client,
    server_pid: Option<u32>,
}

/// How much of a statement's normalised text names it in the counts.
const STATEMENT_LABEL_CHARS: usize = 40;

/// The probe's own queries, left out of the counts (they all name the view).
const PG_PROBE_QUERY: &str = "\
SELECT query, calls, total_exec_time + total_plan_time FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%pg_stat_statements%'";

/// The server's counters and this process's CPU time at one moment.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    /// Per command: (calls, µs the server spent in it).
    stats: BTreeMap<String, (u64, u64)>,
    server_cpu: f64,
    client_cpu: Duration,
    at: Instant,
}

/// What happened between two snapshots; deltas of several windows add up.
#[derive(Debug, Clone, Default)]
pub(crate) struct Delta {
    /// Per command: (calls, µs), probe commands left out.
    stats: BTreeMap<String, (u64, u64)>,
    client_cpu_s: f64,
    server_cpu_s: f64,
    wall_s: f64,
}

/// What happened between two snapshots, divided by a number of operations.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Cost {
    /// Server commands per operation (all probed servers), every command counted, those
    /// inside scripts too.
    pub(crate) commands_per_op: f64,
    /// The same, by command (`evalsha`, `set`, `time`, ...).
    pub(crate) commands: BTreeMap<String, f64>,
    /// Server time per operation spent executing each command, µs (`INFO commandstats`
    /// `usec`; a script's time includes the commands it calls, which are also listed).
    pub(crate) command_us: BTreeMap<String, f64>,
    /// CPU time of this process (all threads) per operation, µs.
    pub(crate) client_cpu_us_per_op: f64,
    /// CPU time of redis-server (all probed servers) per operation, µs.
    pub(crate) server_cpu_us_per_op: f64,
    /// Share of one core this process used over the window.
    pub(crate) client_cpu_share: f64,
    /// Share of one core redis-server (all probed servers) used over the window.
    pub(crate) server_cpu_share: f64,
}

impl Probe {
    /// A probe of the servers at `urls` (at least one).
    pub(crate) async fn connect(urls: &[String]) -> redis::RedisResult<Self> {
        let mut conns = Vec::with_capacity(urls.len());
        for url in urls {
            conns.push(
                redis::Client::open(url.as_str())?
                    .get_multiplexed_async_connection()
                    .await?,
            );
        }
        if conns.is_empty() {
            return Err(redis::RedisError::from(std::io::Error::other(
                "no server to probe",
            )));
        }
        Ok(Self {
            conns,
            postgres: None,
            etcd: None,
        })
    }

    /// A probe of the PostgreSQL server at `url` (started with `pg_stat_statements` in
    /// `shared_preload_libraries`), whose postmaster is `server_pid` (its CPU time and its
    /// backends' are the server's); creates the extension if it is missing.
    pub(crate) async fn postgres(
        url: &str,
        server_pid: Option<u32>,
    ) -> Result<Self, tokio_postgres::Error> {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
            .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .await?;
        Ok(Self {
            conns: Vec::new(),
            postgres: Some(PgProbe { client, server_pid }),
            etcd: None,
        })
    }

    /// A probe that counts nothing on the server (MariaDB's parts): client CPU only.
    pub(crate) fn client_only() -> Self {
        Self {
            conns: Vec::new(),
            postgres: None,
            etcd: None,
        }
    }

    /// A probe of the etcd member whose client address (serving `/metrics`) is `addr` and
    /// whose process is `server_pid`.
    pub(crate) fn etcd(addr: std::net::SocketAddr, server_pid: Option<u32>) -> Self {
        Self {
            conns: Vec::new(),
            postgres: None,
            etcd: Some(EtcdProbe { addr, server_pid }),
        }
    }

    /// The etcd member's message counters now, by method (`txn`, `leasegrant`, ...).
    async fn etcd_snapshot(etcd: &EtcdProbe) -> std::io::Result<Snapshot> {
        let text = tokio::time::timeout(ETCD_METRICS_TIMEOUT, http_get(etcd.addr, "/metrics"))
            .await
            .map_err(|_| std::io::Error::other("etcd's /metrics did not answer"))??;
        Ok(Snapshot {
            stats: parse_etcd_messages(&text),
            server_cpu: etcd.server_pid.map_or(0.0, procfs::tree_cpu_seconds),
            client_cpu: procfs::cpu_time(),
            at: Instant::now(),
        })
    }

    /// `server_version` of the PostgreSQL server, if this probes one.
    pub(crate) async fn postgres_version(&self) -> Result<Option<String>, tokio_postgres::Error> {
        let Some(pg) = &self.postgres else {
            return Ok(None);
        };
        let row = pg.client.query_one("SHOW server_version", &[]).await?;
        Ok(Some(row.get(0)))
    }

    /// The PostgreSQL server's statement counters now, labelled.
    async fn postgres_snapshot(pg: &PgProbe) -> Result<Snapshot, tokio_postgres::Error> {
        let mut stats: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for row in pg.client.query(PG_PROBE_QUERY, &[]).await? {
            let (query, calls, ms): (String, i64, f64) = (row.get(0), row.get(1), row.get(2));
            let entry = stats.entry(statement_label(&query)).or_insert((0, 0));
            entry.0 += u64::try_from(calls).unwrap_or(0);
            let us = Duration::try_from_secs_f64(ms / 1e3).map_or(0, |d| d.as_micros());
            entry.1 += u64::try_from(us).unwrap_or(u64::MAX);
        }
        Ok(Snapshot {
            stats,
            server_cpu: pg.server_pid.map_or(0.0, procfs::tree_cpu_seconds),
            client_cpu: procfs::cpu_time(),
            at: Instant::now(),
        })
    }

    fn first(&mut self) -> &mut MultiplexedConnection {
        &mut self.conns[0]
    }

    /// The servers' counters now, summed.
    pub(crate) async fn snapshot(&mut self) -> redis::RedisResult<Snapshot> {
        if let Some(etcd) = &self.etcd {
            return Self::etcd_snapshot(etcd)
                .await
                .map_err(redis::RedisError::from);
        }
        if let Some(pg) = &self.postgres {
            return Self::postgres_snapshot(pg)
                .await
                .map_err(|e| redis::RedisError::from(std::io::Error::other(e.to_string())));
        }
        let mut stats: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let mut server_cpu = 0.0;
        for conn in &mut self.conns {
            let text: String = redis::cmd("INFO")
                .arg("commandstats")
                .arg("cpu")
                .query_async(conn)
                .await?;
            for (name, (calls, usec)) in parse_commandstats(&text) {
                let entry = stats.entry(name).or_insert((0, 0));
                entry.0 += calls;
                entry.1 += usec;
            }
            server_cpu += parse_server_cpu(&text);
        }
        Ok(Snapshot {
            stats,
            server_cpu,
            client_cpu: procfs::cpu_time(),
            at: Instant::now(),
        })
    }

    /// `redis_version` from `INFO server`.
    pub(crate) async fn version(&mut self) -> redis::RedisResult<String> {
        let text: String = redis::cmd("INFO")
            .arg("server")
            .query_async(self.first())
            .await?;
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("unknown")
            .trim()
            .to_owned())
    }

    /// How many clients are subscribed to `channel` (`PUBSUB NUMSUB`).
    pub(crate) async fn numsub(&mut self, channel: &str) -> redis::RedisResult<u64> {
        let reply: (String, u64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query_async(self.first())
            .await?;
        Ok(reply.1)
    }

    /// How many connections are in pub/sub mode (`CLIENT LIST TYPE pubsub`).
    pub(crate) async fn pubsub_clients(&mut self) -> redis::RedisResult<usize> {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("pubsub")
            .query_async(self.first())
            .await?;
        Ok(list.lines().filter(|l| !l.trim().is_empty()).count())
    }
}

impl Snapshot {
    /// What happened between `self` and the later snapshot `after`.
    pub(crate) fn until(&self, after: &Snapshot) -> Delta {
        let mut stats = BTreeMap::new();
        for (name, &(calls, usec)) in &after.stats {
            if PROBE_COMMANDS.contains(&name.as_str()) {
                continue;
            }
            let (calls0, usec0) = self.stats.get(name).copied().unwrap_or((0, 0));
            let delta = (calls.saturating_sub(calls0), usec.saturating_sub(usec0));
            if delta.0 > 0 {
                stats.insert(name.clone(), delta);
            }
        }
        Delta {
            stats,
            client_cpu_s: after
                .client_cpu
                .saturating_sub(self.client_cpu)
                .as_secs_f64(),
            server_cpu_s: (after.server_cpu - self.server_cpu).max(0.0),
            wall_s: after.at.duration_since(self.at).as_secs_f64(),
        }
    }

    /// The cost of `ops` operations between `self` and the later snapshot `after`.
    pub(crate) fn cost_until(&self, after: &Snapshot, ops: u64) -> Cost {
        self.until(after).cost(ops)
    }

    /// Calls of `command` between `self` and `after`.
    pub(crate) fn calls_until(&self, after: &Snapshot, command: &str) -> u64 {
        self.until(after).calls(command)
    }
}

impl Delta {
    /// Adds another window.
    pub(crate) fn add(&mut self, other: &Delta) {
        for (name, &(calls, usec)) in &other.stats {
            let entry = self.stats.entry(name.clone()).or_insert((0, 0));
            entry.0 += calls;
            entry.1 += usec;
        }
        self.client_cpu_s += other.client_cpu_s;
        self.server_cpu_s += other.server_cpu_s;
        self.wall_s += other.wall_s;
    }

    /// Calls of every command (every statement), the probe's left out.
    pub(crate) fn total_calls(&self) -> u64 {
        self.stats.values().map(|s| s.0).sum()
    }

    /// Calls of `command`.
    pub(crate) fn calls(&self, command: &str) -> u64 {
        self.stats.get(command).map_or(0, |s| s.0)
    }

    /// Share of one core the probed servers used over the window.
    pub(crate) fn server_cpu_share(&self) -> f64 {
        self.server_cpu_s / self.wall_s.max(1e-9)
    }

    /// Divided by `ops` operations.
    pub(crate) fn cost(&self, ops: u64) -> Cost {
        let ops_f = ops.max(1) as f64;
        let wall = self.wall_s.max(1e-9);
        let total = self.total_calls();
        Cost {
            commands_per_op: total as f64 / ops_f,
            commands: self
                .stats
                .iter()
                .map(|(name, s)| (name.clone(), s.0 as f64 / ops_f))
                .collect(),
            command_us: self
                .stats
                .iter()
                .map(|(name, s)| (name.clone(), s.1 as f64 / ops_f))
                .collect(),
            client_cpu_us_per_op: self.client_cpu_s * 1e6 / ops_f,
            server_cpu_us_per_op: self.server_cpu_s * 1e6 / ops_f,
            client_cpu_share: self.client_cpu_s / wall,
            server_cpu_share: self.server_cpu_s / wall,
        }
    }
}

/// A statement's name in the counts: its normalised text, whitespace collapsed, cut short.
fn statement_label(query: &str) -> String {
    let text = query.split_whitespace().collect::<Vec<_>>().join(" ");
    text.chars().take(STATEMENT_LABEL_CHARS).collect()
}

/// `cmdstat_<name>:calls=<n>,usec=<µs>,...` lines into a map name → (calls, µs).
fn parse_commandstats(text: &str) -> BTreeMap<String, (u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("cmdstat_")?;
            let (name, fields) = rest.split_once(':')?;
            let field = |key: &str| -> Option<u64> {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix(key))?
                    .parse()
                    .ok()
            };
            Some((
                name.to_owned(),
                (field("calls=")?, field("usec=").unwrap_or(0)),
            ))
        })
        .collect()
}

/// `used_cpu_user + used_cpu_sys` of the server, seconds.
fn parse_server_cpu(text: &str) -> f64 {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    field("used_cpu_user:") + field("used_cpu_sys:")
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "# Commandstats\r\n\
        cmdstat_set:calls=620,usec=569,usec_per_call=0.92,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_evalsha:calls=320,usec=683,usec_per_call=2.13,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=9,usec=1,usec_per_call=0.1,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_script|load:calls=1,usec=47,usec_per_call=47.00,rejected_calls=0,failed_calls=0\r\n\
        \r\n# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\n\
        used_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\n";

    #[test]
    fn parses_info() {
        let calls = parse_commandstats(INFO);
        assert_eq!(calls.get("set"), Some(&(620, 569)));
        assert_eq!(calls.get("script|load"), Some(&(1, 47)));
        assert!((parse_server_cpu(INFO) - 3.75).abs() < 1e-9);
    }

    #[test]
    fn labels_statements_by_their_start() {
        assert_eq!(
            statement_label(
                "WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock($1) AS got)\n  SELECT"
            ),
            "WITH l AS MATERIALIZED (SELECT pg_try_ad"
        );
        assert_eq!(statement_label("SELECT 1"), "SELECT 1");
    }

    #[test]
    fn cost_leaves_out_the_probe() {
        let at = Instant::now();
        let before = Snapshot {
            stats: parse_commandstats(INFO),
            server_cpu: 1.0,
            client_cpu: Duration::from_millis(100),
            at,
        };
        let mut stats = before.stats.clone();
        for (name, usec) in [("set", 10), ("evalsha", 40)] {
            let entry = stats.entry(name.into()).or_default();
            entry.0 += 20;
            entry.1 += usec;
        }
        stats.entry("info".into()).or_default().0 += 1;
        let after = Snapshot {
            stats,
            server_cpu: 1.5,
            client_cpu: Duration::from_millis(300),
            at: at + Duration::from_secs(1),
        };
        let cost = before.cost_until(&after, 10);
        assert!((cost.commands_per_op - 4.0).abs() < 1e-9);
        assert!((cost.commands["set"] - 2.0).abs() < 1e-9);
        assert!(!cost.commands.contains_key("info"));
        assert!((cost.server_cpu_us_per_op - 50_000.0).abs() < 1e-6);
        assert!((cost.client_cpu_share - 0.2).abs() < 1e-9);
        assert!((cost.command_us["evalsha"] - 4.0).abs() < 1e-9);
        assert_eq!(before.calls_until(&after, "evalsha"), 20);
        let mut twice = before.until(&after);
        twice.add(&before.until(&after));
        assert_eq!(twice.calls("set"), 40);
        assert!((twice.cost(20).commands_per_op - 4.0).abs() < 1e-9);
    }
}

/// `GET path` from `127.0.0.1:port` over HTTP/1.0 (the connection closes after the answer);
/// the body.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("not an HTTP answer"))?;
    if !(head.starts_with("HTTP/1.") && head.split_whitespace().nth(1) == Some("200")) {
        return Err(std::io::Error::other(format!(
            "GET {path}: {}",
            head.lines().next().unwrap_or_default()
        )));
    }
    Ok(body.to_owned())
}

/// `grpc_server_msg_received_total` by method, lower case (`txn`, `leasekeepalive`, ...), from
/// a Prometheus text exposition; the µs column stays 0 (etcd's basic metrics have no per-call
/// time).
fn parse_etcd_messages(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut stats = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(ETCD_MESSAGES) else {
            continue;
        };
        let Some((labels, value)) = rest.split_once("} ") else {
            continue;
        };
        let method = labels
            .split(',')
            .find_map(|l| l.strip_prefix("grpc_method=\""))
            .map(|m| m.trim_end_matches('"').to_lowercase());
        // A counter: a whole number, printed without a fraction below 1e15 (larger ones,
        // in exponent form, do not occur in a run).
        let count = value.trim().parse::<u64>().ok();
        if let (Some(method), Some(count)) = (method, count) {
            stats.entry(method).or_insert((0, 0)).0 += count;
        }
    }
    stats
}

#[cfg(test)]
mod etcd_tests {
    use super::parse_etcd_messages;

    #[test]
    fn etcd_messages_by_method() {
        let text = "# TYPE grpc_server_msg_received_total counter\n\
            grpc_server_msg_received_total{grpc_method=\"Txn\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 12\n\
            grpc_server_msg_received_total{grpc_method=\"LeaseKeepAlive\",grpc_service=\"etcdserverpb.Lease\",grpc_type=\"bidi_stream\"} 7\n\
            grpc_server_msg_sent_total{grpc_method=\"Txn\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 12\n";
        let stats = parse_etcd_messages(text);
        assert_eq!(stats.get("txn"), Some(&(12, 0)));
        assert_eq!(stats.get("leasekeepalive"), Some(&(7, 0)));
        assert_eq!(stats.len(), 2);
    }
}
