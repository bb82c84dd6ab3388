//! The protected resource, on a redis-server of its own that no fault touches: a fenced
//! store that accepts a write only with a larger fencing token than every write before, and a
//! plain counter updated with a non-atomic read-modify-write, so that two holders at once show
//! as a lost update.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Script};
use serde::{Deserialize, Serialize};

/// The fenced store: a hash with the last accepted token.
pub const RESOURCE_KEY: &str = "torture:resource";
/// Every token the store accepted, in its order.
pub const LOG_KEY: &str = "torture:accepted";
/// The plain counter.
pub const COUNTER_KEY: &str = "torture:counter";

/// The resource's state at the end of a run, read straight from its server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The plain counter's value.
    pub counter: u64,
    /// Every accepted fencing token, in the order the store accepted them.
    pub accepted: Vec<u64>,
}

/// A worker's handle on the resource.
#[derive(Debug)]
pub struct Resource {
    conn: MultiplexedConnection,
    script: Script,
}

impl Resource {
    /// Connects to the resource's server.
    ///
    /// # Errors
    /// If the server cannot be reached.
    pub async fn connect(url: &str) -> RedisResult<Resource> {
        let conn = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        Ok(Resource {
            conn,
            script: Script::new(include_str!("fenced_write.lua")),
        })
    }

    /// A fenced write with `token`: `true` if the store accepted it.
    ///
    /// # Errors
    /// If the command fails.
    pub async fn write(&mut self, token: u64) -> RedisResult<bool> {
        let accepted: i64 = self
            .script
            .key(RESOURCE_KEY)
            .key(LOG_KEY)
            .arg(token)
            .invoke_async(&mut self.conn)
            .await?;
        Ok(accepted == 1)
    }

    /// Reads the counter (`GET`); the first half of the read-modify-write.
    ///
    /// # Errors
    /// If the command fails.
    pub async fn read_counter(&mut self) -> RedisResult<u64> {
        let value: Option<u64> = redis::cmd("GET")
            .arg(COUNTER_KEY)
            .query_async(&mut self.conn)
            .await?;
        Ok(value.unwrap_or(0))
    }

    /// Writes the counter (`SET`); the second half. Deliberately not `INCR`: a second holder
    /// between the read and this write loses an update.
    ///
    /// # Errors
    /// If the command fails.
    pub async fn write_counter(&mut self, value: u64) -> RedisResult<()> {
        redis::cmd("SET")
            .arg(COUNTER_KEY)
            .arg(value)
            .query_async(&mut self.conn)
            .await
    }
}

/// Reads the resource's final state (synchronously: the runner has no runtime).
///
/// # Errors
/// If the server cannot be reached or answers something unexpected.
pub fn snapshot(url: &str) -> RedisResult<Snapshot> {
    let client = redis::Client::open(url)?;
    let mut con = client.get_connection_with_timeout(Duration::from_secs(5))?;
    let counter: Option<u64> = redis::cmd("GET").arg(COUNTER_KEY).query(&mut con)?;
    let accepted: Vec<u64> = redis::cmd("LRANGE")
        .arg(LOG_KEY)
        .arg(0)
        .arg(-1)
        .query(&mut con)?;
    Ok(Snapshot {
        counter: counter.unwrap_or(0),
        accepted,
    })
}
