//! The server of one cost-curve point ([`crate::curves`]): a fresh throwaway server of
//! lock-testkit's per point (so its memory is that point's), its URL and PID, and the locks
//! and probe C2 uses on it. Stopped by PID by lock-testkit when dropped.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::Lock;
use lock_testkit::{EtcdCluster, EtcdNetwork, MariadbServer, PostgresServer, RedisServer};
use tokio::runtime::Runtime;

use crate::curve_plan::CurveBackend;
use crate::info::Probe;
use crate::step::block;

/// A server of one point, stopped (by PID, by lock-testkit) when dropped.
pub(crate) enum Server {
    Redis(RedisServer),
    Postgres(PostgresServer),
    Etcd(EtcdCluster),
    Mysql(MariadbServer),
}

impl Server {
    pub(crate) fn start(backend: CurveBackend) -> Result<Self, String> {
        let failed = |e: std::io::Error| format!("starting {}: {e}", backend.label());
        Ok(match backend {
            CurveBackend::Redis => Self::Redis(RedisServer::start().map_err(failed)?),
            CurveBackend::Valkey => {
                Self::Redis(RedisServer::builder().valkey().start().map_err(failed)?)
            }
            // As P1–P10's: the probe counts statements through pg_stat_statements.
            CurveBackend::Postgres => Self::Postgres(
                PostgresServer::builder()
                    .setting("shared_preload_libraries", "pg_stat_statements")
                    .setting("pg_stat_statements.track_planning", "on")
                    .start()
                    .map_err(failed)?,
            ),
            // Loopback, as E5: no network namespace to leave behind.
            CurveBackend::Etcd => Self::Etcd(
                EtcdCluster::builder()
                    .network(EtcdNetwork::Loopback)
                    .start()
                    .map_err(failed)?,
            ),
            CurveBackend::Mysql => Self::Mysql(MariadbServer::start().map_err(failed)?),
        })
    }

    pub(crate) fn url(&self) -> String {
        match self {
            Self::Redis(s) => s.url(),
            Self::Postgres(s) => s.url(),
            Self::Etcd(c) => c.member(0).direct_endpoint(),
            Self::Mysql(s) => s.url(),
        }
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        match self {
            Self::Redis(s) => s.pid(),
            Self::Postgres(s) => s.pid(),
            Self::Etcd(c) => c.member(0).pid(),
            Self::Mysql(s) => s.pid(),
        }
    }

    /// A lock on this server and a probe of its counters (C2).
    pub(crate) async fn lock_and_probe(&self) -> Result<(Arc<dyn Lock>, Probe), String> {
        let url = self.url();
        let err = |e: lock_core::LockError| e.to_string();
        Ok(match self {
            Self::Redis(_) => (
                Arc::new(lock_redis::RedisLock::from_url(&url).map_err(err)?),
                Probe::connect(std::slice::from_ref(&url))
                    .await
                    .map_err(|e| e.to_string())?,
            ),
            Self::Postgres(s) => {
                let lock = lock_postgres::PostgresLock::from_url(&url).map_err(err)?;
                lock.migrate().await.map_err(err)?;
                let probe = Probe::postgres(&url, s.pid())
                    .await
                    .map_err(|e| e.to_string())?;
                (Arc::new(lock), probe)
            }
            Self::Etcd(c) => (
                Arc::new(lock_etcd::EtcdLock::new([url.as_str()]).map_err(err)?),
                Probe::etcd(c.member(0).client_addr(), c.member(0).pid()),
            ),
            Self::Mysql(_) => (
                Arc::new(lock_mysql::MysqlLock::from_url(&url).map_err(err)?),
                Probe::client_only(),
            ),
        })
    }

    /// A second lock on this server, with connections of its own (C2's remote holder).
    pub(crate) fn other_lock(&self) -> Result<Arc<dyn Lock>, String> {
        let url = self.url();
        let err = |e: lock_core::LockError| e.to_string();
        Ok(match self {
            Self::Redis(_) => Arc::new(lock_redis::RedisLock::from_url(&url).map_err(err)?),
            Self::Postgres(_) => {
                Arc::new(lock_postgres::PostgresLock::from_url(&url).map_err(err)?)
            }
            Self::Etcd(_) => Arc::new(lock_etcd::EtcdLock::new([url.as_str()]).map_err(err)?),
            Self::Mysql(_) => Arc::new(lock_mysql::MysqlLock::from_url(&url).map_err(err)?),
        })
    }

    /// `Redis 7.0.15`, `Valkey 9.1.2`: from the server itself where it is cheap to ask.
    pub(crate) fn describe(&self, runtime: &Runtime) -> String {
        match self {
            Server::Redis(s) => block(runtime, Duration::ZERO, crate::servers::describe(&s.url()))
                .ok()
                .and_then(Result::ok)
                .unwrap_or_else(|| "Redis".to_owned()),
            Server::Postgres(_) => "PostgreSQL".to_owned(),
            Server::Etcd(_) => format!("etcd {}", lock_testkit::ETCD_VERSION),
            Server::Mysql(_) => "MariaDB".to_owned(),
        }
    }
}
