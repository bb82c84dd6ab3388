//! Where the election runs: Redis, PostgreSQL or etcd. The parent starts a throwaway server
//! for the chosen backend unless given its URL (as the demo does), and each replica builds its
//! `Locker` from the backend and URL it is handed; the election code is the same on all three.

use clap::ValueEnum;
use distlock::Locker;
use distlock::redis::RedisLock;
// `distlock::postgres::PostgresLock` and `distlock::etcd::EtcdLock` with the `postgres` and
// `etcd` features; the crates themselves here (dev-dependencies), so that the example runs on
// every backend with the default features, as the demo does.
use lock_etcd::EtcdLock;
use lock_postgres::PostgresLock;
use lock_testkit::{EtcdCluster, EtcdNetwork, PostgresServer};

use crate::Error;

/// The store the election runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    /// `RedisLock`, on the Redis of the fenced resource.
    Redis,
    /// `PostgresLock` (a lease table; releases announced with LISTEN/NOTIFY).
    Postgres,
    /// `EtcdLock` (a key on a lease of its own; releases announced through a watch).
    Etcd,
}

impl Backend {
    /// The name on the command line.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Redis => "redis",
            Self::Postgres => "postgres",
            Self::Etcd => "etcd",
        }
    }

    /// The shortest lease the backend keeps as asked, in milliseconds: etcd counts leases in
    /// whole seconds and raises them to its minimum (2 s with its default timing), so a shorter
    /// lease would end on the client long before the server lets go.
    pub(crate) fn min_lease_ms(self) -> u64 {
        match self {
            Self::Redis | Self::Postgres => 1,
            Self::Etcd => 2_000,
        }
    }
}

/// The lock server of a run: a throwaway one (stopped when this is dropped), or the one the
/// command line named. Redis, which also keeps the fenced resource, is started by the parent
/// itself.
pub(crate) struct LockServer {
    backend: Backend,
    /// PostgreSQL's URL, or etcd's endpoints comma separated; `None` on Redis.
    url: Option<String>,
    /// The throwaway PostgreSQL, if one was started.
    postgres: Option<PostgresServer>,
    /// The throwaway etcd, if one was started.
    etcd: Option<EtcdCluster>,
}

impl LockServer {
    /// Starts the server `backend` needs unless `url` names one; on PostgreSQL, creates the
    /// lease table if it is missing.
    pub(crate) fn start(backend: Backend, url: Option<&str>) -> Result<Self, Error> {
        let mut server = Self {
            backend,
            url: url.map(str::to_owned),
            postgres: None,
            etcd: None,
        };
        match (backend, url) {
            (Backend::Redis, _) => server.url = None,
            (Backend::Postgres, None) => {
                let started = PostgresServer::start().map_err(|e| {
                    format!(
                        "cannot start a throwaway PostgreSQL: {e}\nInstall PostgreSQL (>= 12) \
                         with `bash scripts/ensure-postgres.sh`, or use a running server with \
                         --postgres-url."
                    )
                })?;
                server.url = Some(started.url());
                server.postgres = Some(started);
            }
            (Backend::Etcd, None) => {
                // On a loopback port: never partitioned, so no privilege and no namespace.
                let started = EtcdCluster::builder()
                    .network(EtcdNetwork::Loopback)
                    .start()
                    .map_err(|e| {
                        format!(
                            "cannot start a throwaway etcd: {e}\nInstall etcd with \
                         `bash scripts/ensure-etcd.sh`, or use a running cluster with --etcd-url."
                        )
                    })?;
                server.url = Some(started.endpoints().join(","));
                server.etcd = Some(started);
            }
            (Backend::Postgres | Backend::Etcd, Some(_)) => {}
        }
        if let (Backend::Postgres, Some(url)) = (backend, &server.url) {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(PostgresLock::from_url(url)?.migrate())?;
        }
        Ok(server)
    }

    /// The URL the replicas lock with: PostgreSQL's, or etcd's endpoints comma separated;
    /// `None` on Redis (the resource's).
    pub(crate) fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// How the header names it: where, and whether it was started for this run.
    pub(crate) fn describe(&self, redis_url: &str) -> String {
        let origin = if self.postgres.is_some() || self.etcd.is_some() {
            "throwaway"
        } else {
            "given"
        };
        match self.backend {
            Backend::Redis => format!("RedisLock on {redis_url}, the resource's Redis"),
            Backend::Postgres => format!("PostgresLock on a {origin} PostgreSQL"),
            Backend::Etcd => format!(
                "EtcdLock on {} ({origin} etcd)",
                self.url.as_deref().unwrap_or_default()
            ),
        }
    }
}

/// A replica's `Locker` on `backend`: on Redis, `resource`'s own lock (the fenced writes then
/// share the lock's connections), elsewhere the lock of `url`.
pub(crate) fn locker(
    backend: Backend,
    url: Option<&str>,
    resource: RedisLock,
) -> Result<Locker, Error> {
    let url = || url.ok_or_else(|| format!("--backend {} needs --lock-url", backend.as_str()));
    Ok(match backend {
        Backend::Redis => Locker::new(resource),
        Backend::Postgres => Locker::new(PostgresLock::from_url(url()?)?),
        Backend::Etcd => Locker::new(EtcdLock::new(url()?.split(',').map(str::trim))?),
    })
}
