//! What the runner tells a worker process: written as JSON to a file whose path is the
//! worker's only argument.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::resource::FenceStore;

/// Which distlock backend the workers lock with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Backend {
    /// `RedisLock` on one server.
    Single {
        /// The server's URL (the worker's proxy in front of it).
        url: String,
    },
    /// `Redlock` over independent servers, one `RedisLock` each.
    Redlock {
        /// One URL per node (the worker's proxies in front of them).
        urls: Vec<String>,
    },
    /// `RedisLock` on a Redis Cluster.
    Cluster {
        /// Seed URLs of the cluster's nodes.
        urls: Vec<String>,
    },
    /// `PostgresLock` (the lease table) on one PostgreSQL.
    Postgres {
        /// The server's URL (the worker's proxy in front of it).
        url: String,
    },
    /// `MysqlLock` (the lease table) on one MariaDB / MySQL.
    Mysql {
        /// The server's URL (the worker's proxy in front of it).
        url: String,
    },
    /// `ObjectStoreLock` on one S3-compatible server (SeaweedFS).
    ObjectStore {
        /// The S3 endpoint, `http://host:port`.
        endpoint: String,
        /// The lock objects' `s3://bucket/prefix`.
        url: String,
    },
    /// `EtcdLock` on an etcd cluster.
    Etcd {
        /// Every member's client URL (`http://host:port`, the member's fault proxy).
        endpoints: Vec<String>,
    },
}

/// Which kind of lock the workers take, and what each does while it holds it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "lock", rename_all = "snake_case")]
pub enum Workload {
    /// `locker.lock`: every holder alone; the counter's read-modify-write and a fenced write.
    #[default]
    Mutex,
    /// `locker.write` on `write_percent` % of the rounds (a writer does what a mutex holder
    /// does), else `locker.read` (a reader holds and writes nothing).
    ReadWrite {
        /// The share of rounds that write, in percent.
        write_percent: u32,
    },
    /// One permit of `locker.semaphore(name, max)`: a permit holder holds and writes nothing.
    Semaphore {
        /// The semaphore's permits.
        max: u32,
    },
    /// `locker.fair`: as the mutex, granted in the order the workers asked.
    Fair,
    /// `locker.lock_all` over all but one of `names` names (`torture:lock:0`, …), the one
    /// left out drawn each round: with 3, any two rounds' sets share a name, so every pair of
    /// holders contends on one name and holds the other apart. A holder does what a mutex
    /// holder does, its fenced writes once per name under that name's token.
    Multi {
        /// The names the workers draw from.
        names: u32,
    },
}

/// A deliberate fault of the worker's own: a broken variant of the system, recorded so that
/// the checker's tests can show it fails each one (`torture --misbehave`). Never set by a
/// scenario.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Misbehave {
    /// None: the real code.
    #[default]
    None,
    /// Fencing disabled: every worker writes the log without the fence (Redis and PostgreSQL
    /// logs), so a resumed stale holder's write is accepted.
    Unfenced,
    /// A double grant: worker 0 takes another lock name and works as if it held the scenario's
    /// lock, so it holds beside the others.
    RogueGrant,
}

/// Everything a worker needs to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerConfig {
    /// The worker's number, recorded in every line of its history.
    pub index: u32,
    /// How it locks.
    pub backend: Backend,
    /// Which kind of lock it takes.
    #[serde(default)]
    pub workload: Workload,
    /// The resource's server (reached directly, never through a proxy): the counter, and the
    /// fenced log of the Redis-family scenarios.
    pub resource_url: String,
    /// Where the fenced log lives, and so which of the library's fences guards it.
    #[serde(default)]
    pub fence_store: FenceStore,
    /// Where it records its history.
    pub history: PathBuf,
    /// The lock every worker contends for.
    pub lock_name: String,
    /// The lease: granted for this long and renewed every third of it while held.
    pub ttl_ms: u64,
    /// The store grace period of its `RedisLock`s, in ms (`None`: the lease).
    #[serde(default)]
    pub grace_ms: Option<u64>,
    /// Whether its `RedisLock`s run the strict data-loss checks (`RedisLockBuilder::strict`).
    #[serde(default)]
    pub strict: bool,
    /// The shortest time a holder spends between reading and writing the counter.
    pub hold_min_ms: u64,
    /// The longest.
    pub hold_max_ms: u64,
    /// How long one acquire waits for the lock.
    pub wait_ms: u64,
    /// `RedisLock`'s command and connect timeouts (single server and cluster; Redlock nodes
    /// keep the default, above the Redlock's own node timeout).
    pub command_timeout_ms: u64,
    /// The worker stops at its next round once this file exists: the runner creates it when
    /// its fault schedule and the fault-free tail after it are done.
    pub stop_file: PathBuf,
    /// A hard limit, in ms of the history's clock (`history::now_ns`, `CLOCK_MONOTONIC`), in
    /// case the stop file never comes.
    pub deadline_unix_ms: u64,
    /// Seeds the holds' random lengths.
    pub seed: u64,
    /// The worker's deliberate fault, if any.
    #[serde(default)]
    pub misbehave: Misbehave,
}

impl WorkerConfig {
    /// The lease TTL.
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// The store grace period of the worker's `RedisLock`s: the lease unless configured.
    pub fn grace(&self) -> Duration {
        self.grace_ms.map_or(self.ttl(), Duration::from_millis)
    }

    /// The wait of one acquire.
    pub fn wait(&self) -> Duration {
        Duration::from_millis(self.wait_ms)
    }

    /// The lock name this worker takes: the scenario's, or another for a rogue worker.
    pub fn name(&self) -> String {
        if self.misbehave == Misbehave::RogueGrant && self.index == 0 {
            format!("{}:rogue", self.lock_name)
        } else {
            self.lock_name.clone()
        }
    }

    /// A multi-lock round's names, name `skip` of `names` left out: the name each lock is taken
    /// under (a rogue worker's are [`name`](Self::name)'s), and the name its records give
    /// (always the scenario's).
    pub fn multi_names(&self, names: u32, skip: u32) -> Vec<(String, String)> {
        let taken = self.name();
        (0..names)
            .filter(|&i| i != skip)
            .map(|i| (format!("{taken}:{i}"), format!("{}:{i}", self.lock_name)))
            .collect()
    }

    /// The command timeout of the workers' `RedisLock`s.
    pub fn command_timeout(&self) -> Duration {
        Duration::from_millis(self.command_timeout_ms)
    }
}
