//! What a Redis server says about itself, read once per new connection (`INFO server
//! replication memory persistence`): who it is (`run_id`), whether it is a master and of which
//! replication history (`master_replid`), how long it has run, whether it may evict keys and
//! whether it keeps every write on disk. The grace period (`grace.rs`) compares these facts
//! across connections; nothing here is read on the path of a lock command.

use std::time::Duration;

use redis::aio::ConnectionLike;

/// One server's facts, as its `INFO` reply gave them. A field the reply lacked (an older or a
/// restricted server) is empty or zero, which the grace rules read as "cannot tell".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ServerFacts {
    /// `run_id`: random per server process; a restart always changes it.
    pub(crate) run_id: String,
    /// `role`: `master` or `slave`.
    pub(crate) role: String,
    /// `master_replid`: the replication history's id; a promotion and a restart without
    /// persistence change it.
    pub(crate) master_replid: String,
    /// `second_repl_offset`: not `-1` once the server was promoted from a replica (its former
    /// history is kept as `master_replid2`).
    pub(crate) second_repl_offset: i64,
    /// `uptime_in_seconds`.
    pub(crate) uptime: Duration,
    /// `maxmemory`, in bytes; 0 means no limit (nothing is ever evicted).
    pub(crate) maxmemory: u64,
    /// `maxmemory_policy`, e.g. `noeviction`, `allkeys-lru`, `volatile-ttl`.
    pub(crate) maxmemory_policy: String,
    /// `aof_enabled:1`.
    pub(crate) aof_enabled: bool,
}

impl ServerFacts {
    /// Reads the `key:value` lines of an `INFO` reply; other lines (section headers, blanks)
    /// and unknown keys are skipped.
    pub(crate) fn parse(info: &str) -> Self {
        let mut facts = Self {
            second_repl_offset: -1,
            ..Self::default()
        };
        for line in info.lines() {
            let Some((key, value)) = line.trim_end().split_once(':') else {
                continue;
            };
            match key {
                "run_id" => facts.run_id = value.to_owned(),
                "role" => facts.role = value.to_owned(),
                "master_replid" => facts.master_replid = value.to_owned(),
                "second_repl_offset" => facts.second_repl_offset = value.parse().unwrap_or(-1),
                "uptime_in_seconds" => {
                    facts.uptime = Duration::from_secs(value.parse().unwrap_or(0));
                }
                "maxmemory" => facts.maxmemory = value.parse().unwrap_or(0),
                "maxmemory_policy" => facts.maxmemory_policy = value.to_owned(),
                "aof_enabled" => facts.aof_enabled = value == "1",
                _ => {}
            }
        }
        facts
    }

    /// Whether the server may evict lock keys under memory pressure: a memory limit and a
    /// policy that evicts keys (`allkeys-*` evicts any key, `volatile-*` any key with a TTL,
    /// which is every lock key; `volatile-ttl` the shortest TTLs, the locks, first).
    pub(crate) fn evicts_locks(&self) -> bool {
        self.maxmemory > 0
            && (self.maxmemory_policy.starts_with("allkeys-")
                || self.maxmemory_policy.starts_with("volatile-"))
    }

    /// Whether this is a master.
    pub(crate) fn is_master(&self) -> bool {
        self.role == "master"
    }

    /// Whether the facts say anything at all (an `INFO` without `run_id` does not).
    pub(crate) fn known(&self) -> bool {
        !self.run_id.is_empty()
    }
}

/// Reads the facts of the server at the other end of `conn` (one `INFO` round trip).
pub(crate) async fn read<C: ConnectionLike + Send>(
    conn: &mut C,
) -> redis::RedisResult<ServerFacts> {
    let info: String = info_cmd().query_async(conn).await?;
    Ok(ServerFacts::parse(&info))
}

/// The `INFO` command whose reply [`ServerFacts::parse`] reads.
pub(crate) fn info_cmd() -> redis::Cmd {
    let mut cmd = redis::cmd("INFO");
    cmd.arg("server")
        .arg("replication")
        .arg("memory")
        .arg("persistence");
    cmd
}

/// Whether the server's AOF is fsynced on every write (`CONFIG GET appendfsync` = `always`):
/// the one setting under which a restart keeps every grant. `false` when `CONFIG` is refused
/// (managed services rename or forbid it): then the server counts as one that may lose writes.
pub(crate) async fn fsyncs_every_write<C: ConnectionLike + Send>(conn: &mut C) -> bool {
    let reply: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendfsync")
        .query_async(conn)
        .await;
    matches!(reply.as_deref(), Ok([_, value]) if value == "always")
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "# Server\r\nredis_version:7.4.1\r\nrun_id:abc123\r\n\
        uptime_in_seconds:42\r\n\r\n# Replication\r\nrole:master\r\n\
        master_replid:r1\r\nsecond_repl_offset:-1\r\n\r\n# Memory\r\nmaxmemory:4194304\r\n\
        maxmemory_policy:allkeys-lru\r\n\r\n# Persistence\r\naof_enabled:0\r\n";

    #[test]
    fn parses_the_sections_it_reads() {
        let facts = ServerFacts::parse(INFO);
        assert_eq!(facts.run_id, "abc123");
        assert!(facts.is_master());
        assert_eq!(facts.master_replid, "r1");
        assert_eq!(facts.second_repl_offset, -1);
        assert_eq!(facts.uptime, Duration::from_secs(42));
        assert_eq!(facts.maxmemory, 4_194_304);
        assert!(facts.evicts_locks());
        assert!(!facts.aof_enabled);
        assert!(facts.known());
    }

    #[test]
    fn no_limit_or_noeviction_evicts_nothing() {
        let mut facts = ServerFacts::parse(INFO);
        facts.maxmemory = 0;
        assert!(!facts.evicts_locks(), "no memory limit: nothing is evicted");
        facts.maxmemory = 1;
        facts.maxmemory_policy = "noeviction".into();
        assert!(!facts.evicts_locks());
        facts.maxmemory_policy = "volatile-ttl".into();
        assert!(facts.evicts_locks(), "volatile-ttl evicts the locks first");
    }

    #[test]
    fn an_empty_reply_knows_nothing() {
        assert!(!ServerFacts::parse("").known());
    }
}
