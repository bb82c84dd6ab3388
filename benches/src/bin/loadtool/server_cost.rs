//! What the server of a renewal child costs while the child holds its leases (the cost
//! curves, C1): the server process's CPU time and memory, read from `/proc/<pid>` (the
//! process and its children: a PostgreSQL postmaster and its backends), and on Redis and
//! Valkey the server's own count of the memory its data takes (`INFO memory`'s
//! `used_memory`), which leaves out the allocator's slack that RSS includes.

use serde::{Deserialize, Serialize};

use crate::procfs;

/// The server's memory at one moment.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(crate) struct ServerMemory {
    /// Proportional resident memory of the server's processes (`Pss`), MiB.
    pub(crate) pss_mib: f64,
    /// Redis and Valkey: `used_memory` of `INFO memory`, MiB; `None` elsewhere.
    pub(crate) used_memory_mib: Option<f64>,
}

/// The server's cost over a child's window: memory before the leases were taken and while
/// they were held, and its CPU share in the window.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(crate) struct ServerCost {
    pub(crate) before: ServerMemory,
    pub(crate) held: ServerMemory,
    /// Share of one core the server's processes used in the window (`/proc/<pid>/stat`).
    pub(crate) cpu_share: f64,
}

/// Reads one server's memory and CPU time, the same way each time.
pub(crate) struct Sampler {
    pid: u32,
    /// Redis and Valkey: a connection for `INFO memory`.
    redis: Option<redis::aio::MultiplexedConnection>,
}

impl Sampler {
    /// A sampler of the server `pid`, which reads `INFO memory` at `redis_url` when it is a
    /// Redis or Valkey server; `None` without a PID.
    pub(crate) async fn new(
        pid: Option<u32>,
        redis_url: Option<&str>,
    ) -> Result<Option<Self>, String> {
        let Some(pid) = pid else { return Ok(None) };
        let redis = match redis_url {
            Some(url) => Some(
                redis::Client::open(url)
                    .map_err(|e| e.to_string())?
                    .get_multiplexed_async_connection()
                    .await
                    .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        Ok(Some(Self { pid, redis }))
    }

    /// The server's memory now.
    pub(crate) async fn memory(&mut self) -> Result<ServerMemory, String> {
        let used_memory_mib = match &mut self.redis {
            Some(conn) => {
                let text: String = redis::cmd("INFO")
                    .arg("memory")
                    .query_async(conn)
                    .await
                    .map_err(|e| e.to_string())?;
                parse_used_memory(&text).map(|bytes| bytes as f64 / 1024.0 / 1024.0)
            }
            None => None,
        };
        Ok(ServerMemory {
            pss_mib: procfs::tree_pss_mib(self.pid),
            used_memory_mib,
        })
    }

    /// The server's CPU time so far, seconds (all its processes alive now).
    pub(crate) fn cpu_seconds(&self) -> f64 {
        procfs::tree_cpu_seconds(self.pid)
    }
}

/// `used_memory:<bytes>` from the text of `INFO memory`.
fn parse_used_memory(info: &str) -> Option<u64> {
    info.lines()
        .find_map(|line| line.trim().strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_used_memory() {
        let info = "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\n";
        assert_eq!(parse_used_memory(info), Some(1_048_576));
        assert_eq!(parse_used_memory("# Memory\r\n"), None);
    }
}
