//! The protected resource: a fenced log, written through the fence of the library's own backend
//! for the scenario's lock (so the suite tests the fence users get, not one of its own), and a
//! plain counter updated with a non-atomic read-modify-write, so that two holders at once show
//! as a lost update.
//!
//! | lock | fenced log | fence |
//! |---|---|---|
//! | Redis, Valkey, Redlock, Cluster | a list on the resource's own `redis-server` | `RedisFences::run` of a [`FencedScript`](distlock::redis::FencedScript) (`redis.rs`) |
//! | PostgreSQL | a table on a PostgreSQL of its own | `distlock_fence` in the insert's transaction (`postgres.rs`) |
//! | MySQL / MariaDB | a table on a MariaDB of its own | `CALL distlock_fence` in the insert's transaction (`mysql.rs`) |
//! | etcd | keys on the lock's own etcd cluster | `EtcdLock::held_commit` (`etcd.rs`) |
//! | object storage | one object on the lock's own SeaweedFS | `lock_object_store::fenced_put` (`object_store.rs`) |
//!
//! The counter always lives on the resource's `redis-server`, which no fault touches. Each log
//! entry names its token and its writer: the fence accepts an equal token (one holder writes
//! many times), so the checker tells a holder's repeated write from a second holder's.

mod etcd;
mod mysql;
mod object_store;
mod postgres;
mod redis;

use std::time::Duration;

use ::redis::aio::MultiplexedConnection;
use distlock::Guard;
use distlock::etcd::EtcdLock;
use serde::{Deserialize, Serialize};

pub use object_store::s3_lock;

/// The plain counter, on the resource's `redis-server`.
pub const COUNTER_KEY: &str = "torture:counter";

/// Where the fenced log lives, and so which fence guards it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "store", rename_all = "snake_case")]
pub enum FenceStore {
    /// A list on the resource's `redis-server`, behind lock-redis's `FencedScript`.
    #[default]
    Redis,
    /// A table on a PostgreSQL of its own, behind `distlock_fence`.
    Postgres {
        /// The resource PostgreSQL's URL (reached directly).
        url: String,
    },
    /// A table on a MariaDB of its own, behind MySQL's `distlock_fence`.
    Mysql {
        /// The resource MariaDB's URL (reached directly).
        url: String,
    },
    /// One object on the lock's S3 server, written by `fenced_put`.
    ObjectStore {
        /// The S3 endpoint, `http://host:port`.
        endpoint: String,
        /// The locks' `s3://bucket/prefix` (the log is an object in the same bucket).
        url: String,
    },
    /// Keys on the lock's etcd cluster, written by `EtcdLock::held_commit`.
    Etcd {
        /// Every member's client URL.
        endpoints: Vec<String>,
    },
}

/// One write the fenced log accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    /// Its fencing token.
    pub token: u64,
    /// The worker that wrote it.
    pub worker: u32,
    /// The lock it was written under, for a multi-lock's names (each fenced apart); `None`:
    /// the run's one lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
}

impl Accepted {
    /// The log entry's text: `"TOKEN WORKER"`, or `"TOKEN WORKER LOCK"` under a named lock.
    fn entry(&self) -> String {
        match &self.lock {
            Some(lock) => format!("{} {} {lock}", self.token, self.worker),
            None => format!("{} {}", self.token, self.worker),
        }
    }

    /// Parses [`entry`](Self::entry)'s text.
    fn parse(text: &str) -> Result<Accepted, String> {
        let mut parts = text.split_whitespace();
        let number = |part: Option<&str>| part.and_then(|p| p.parse::<u64>().ok());
        match (
            number(parts.next()),
            number(parts.next()),
            parts.next(),
            parts.next(),
        ) {
            (Some(token), Some(worker), lock, None) => Ok(Accepted {
                token,
                worker: u32::try_from(worker).map_err(|e| e.to_string())?,
                lock: lock.map(str::to_owned),
            }),
            _ => Err(format!(
                "a fenced log entry that is not \"TOKEN WORKER [LOCK]\": {text:?}"
            )),
        }
    }
}

/// The resource's state at the end of a run, read straight from its stores.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The plain counter's value.
    pub counter: u64,
    /// Every write the fenced log accepted, in the order it accepted them.
    pub accepted: Vec<Accepted>,
    /// Whether the log's writes were guarded commits (etcd's), which are refused whenever the
    /// writer no longer holds the lock, rather than only below the largest token accepted.
    #[serde(default)]
    pub guarded: bool,
}

/// A worker's fenced log, on its store.
enum Log {
    Redis(redis::RedisLog),
    Postgres(postgres::PostgresLog),
    Mysql(mysql::MysqlLog),
    Etcd(etcd::EtcdLog),
    ObjectStore(object_store::ObjectLog),
}

/// A worker's handle on the resource.
pub struct Resource {
    counter: MultiplexedConnection,
    log: Log,
    worker: u32,
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource")
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

impl Resource {
    /// Connects worker `worker` to the counter on `url` and to the fenced log on `store`;
    /// `etcd` is the worker's own lock, whose guards an etcd log's writes name.
    ///
    /// # Errors
    /// If a store cannot be reached or set up, or an etcd log has no etcd lock.
    pub async fn connect(
        url: &str,
        store: &FenceStore,
        worker: u32,
        etcd: Option<EtcdLock>,
    ) -> Result<Resource, String> {
        let counter = ::redis::Client::open(url)
            .map_err(|e| e.to_string())?
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| format!("the counter's redis-server: {e}"))?;
        let log = match store {
            FenceStore::Redis => Log::Redis(redis::RedisLog::connect(url)?),
            FenceStore::Postgres { url } => {
                Log::Postgres(postgres::PostgresLog::connect(url).await?)
            }
            FenceStore::Mysql { url } => Log::Mysql(mysql::MysqlLog::connect(url).await?),
            FenceStore::ObjectStore { endpoint, url } => {
                Log::ObjectStore(object_store::ObjectLog::connect(endpoint, url)?)
            }
            FenceStore::Etcd { .. } => Log::Etcd(etcd::EtcdLog::new(
                etcd.ok_or("an etcd fenced log without an etcd lock")?,
            )),
        };
        Ok(Resource {
            counter,
            log,
            worker,
        })
    }

    /// A fenced write under `guard`, appending its token and this worker (and `lock`, a
    /// multi-lock's name the guard holds; `None`: the run's one lock) to the log: `true` if the
    /// fence accepted it, `false` if it refused it as stale (`LockError::Fenced`). Each lock
    /// is fenced apart: tokens of different names do not compare. `unfenced` appends without
    /// the fence (the broken variant `Misbehave::Unfenced`).
    ///
    /// # Errors
    /// Any other failure, as text; an etcd log cannot be written unfenced.
    pub async fn write(
        &mut self,
        guard: &Guard,
        lock: Option<&str>,
        unfenced: bool,
    ) -> Result<bool, String> {
        let entry = Accepted {
            token: guard.fencing_token(),
            worker: self.worker,
            lock: lock.map(str::to_owned),
        }
        .entry();
        if unfenced {
            return self.write_unfenced(&entry).await.map(|()| true);
        }
        let written = match &mut self.log {
            Log::Redis(log) => {
                let fence = guard.fence().for_resource(redis::fenced_key(lock));
                log.append(&fence, &entry).await
            }
            // The fence of the guard's own name: one record per name already.
            Log::Postgres(log) => log.append(guard, &entry).await,
            Log::Mysql(log) => log.append(guard, &entry).await,
            Log::Etcd(log) => log.append(guard, &entry).await,
            Log::ObjectStore(log) => {
                let fence = guard.fence().for_resource(object_store::log_path(lock));
                log.append(&fence, &entry).await
            }
        };
        match written {
            Ok(()) => Ok(true),
            Err(distlock::LockError::Fenced { .. }) => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Appends `entry` to the log with no fence at all.
    async fn write_unfenced(&mut self, entry: &str) -> Result<(), String> {
        match &mut self.log {
            // The log is on the counter's server.
            Log::Redis(_) => ::redis::cmd("RPUSH")
                .arg(redis::LOG_KEY)
                .arg(entry)
                .query_async::<()>(&mut self.counter)
                .await
                .map_err(|e| e.to_string()),
            Log::Postgres(log) => log.append_unfenced(entry).await,
            Log::Mysql(log) => log.append_unfenced(entry).await,
            Log::Etcd(_) => Err("an etcd log is not written unfenced".to_owned()),
            Log::ObjectStore(_) => Err("an object log is not written unfenced".to_owned()),
        }
    }

    /// Reads the counter (`GET`); the first half of the read-modify-write.
    ///
    /// # Errors
    /// If the command fails.
    pub async fn read_counter(&mut self) -> Result<u64, String> {
        let value: Option<u64> = ::redis::cmd("GET")
            .arg(COUNTER_KEY)
            .query_async(&mut self.counter)
            .await
            .map_err(|e| e.to_string())?;
        Ok(value.unwrap_or(0))
    }

    /// Writes the counter (`SET`); the second half. Deliberately not `INCR`: a second holder
    /// between the read and this write loses an update.
    ///
    /// # Errors
    /// If the command fails.
    pub async fn write_counter(&mut self, value: u64) -> Result<(), String> {
        ::redis::cmd("SET")
            .arg(COUNTER_KEY)
            .arg(value)
            .query_async(&mut self.counter)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The fenced resource of `lock` beside `base`, the run's one lock's: `base` itself, or
/// `base:LOCK` for a multi-lock's name (each name fenced apart: tokens of different names do
/// not compare).
fn resource_of(base: &str, lock: Option<&str>) -> String {
    match lock {
        Some(lock) => format!("{base}:{lock}"),
        None => base.to_owned(),
    }
}

/// Reads the resource's final state: the counter from `url`, the log from `store`
/// (synchronously: the runner has no runtime).
///
/// # Errors
/// If a store cannot be reached or answers something unexpected.
pub fn snapshot(url: &str, store: &FenceStore) -> Result<Snapshot, String> {
    let client = ::redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    let counter: Option<u64> = ::redis::cmd("GET")
        .arg(COUNTER_KEY)
        .query(&mut con)
        .map_err(|e| e.to_string())?;
    let entries = match store {
        FenceStore::Redis => redis::entries(&mut con)?,
        FenceStore::Postgres { url } => block_on(postgres::entries(url))?,
        FenceStore::Mysql { url } => block_on(mysql::entries(url))?,
        FenceStore::Etcd { endpoints } => block_on(etcd::entries(endpoints))?,
        FenceStore::ObjectStore { endpoint, url } => {
            block_on(object_store::entries(endpoint, url))?
        }
    };
    Ok(Snapshot {
        counter: counter.unwrap_or(0),
        accepted: entries
            .iter()
            .map(|e| Accepted::parse(e))
            .collect::<Result<_, _>>()?,
        guarded: matches!(store, FenceStore::Etcd { .. }),
    })
}

/// Prepares `store` for a run (the PostgreSQL or MariaDB log's migration and table).
///
/// # Errors
/// If the store cannot be reached or set up.
pub fn prepare(store: &FenceStore) -> Result<(), String> {
    match store {
        FenceStore::Postgres { url } => block_on(postgres::prepare(url)),
        FenceStore::Mysql { url } => block_on(mysql::prepare(url)),
        FenceStore::Redis | FenceStore::Etcd { .. } | FenceStore::ObjectStore { .. } => Ok(()),
    }
}

/// Runs `work` on a runtime of its own, for at most 20 s.
fn block_on<T>(work: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), work)
            .await
            .map_err(|_| "the resource's store did not answer within 20 s".to_owned())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_carry_token_worker_and_lock() {
        let a = Accepted {
            token: 1_764_000_000_000_000,
            worker: 2,
            lock: None,
        };
        assert_eq!(Accepted::parse(&a.entry()), Ok(a));
        let named = Accepted {
            token: 7,
            worker: 1,
            lock: Some("torture:lock:2".into()),
        };
        assert_eq!(Accepted::parse(&named.entry()), Ok(named));
        assert!(Accepted::parse("12").is_err());
        assert!(Accepted::parse("12 x").is_err());
        assert!(Accepted::parse("12 1 a b").is_err());
    }
}
