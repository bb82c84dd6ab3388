//! The resource the lock protects: settle counts per order, kept in the backend's own store and
//! written through the library's fence with the holder's fencing token. A token smaller than
//! the largest one the order accepted is refused, an equal one accepted (one holder writes many
//! times): on Redis `distlock_fenced_set` (`RedisFences::set`), on PostgreSQL `distlock_fence`
//! first in the write's transaction. Order `id`'s settle count is the resource
//! `ledger:order:{id}` (its Redis key: `order:{id}` is the lock's own key), fenced by one lock,
//! `order:{id}`.

use distlock::redis::redis::{self, aio::MultiplexedConnection};
use distlock::redis::{RedisFences, RedisLock};
use distlock::{Fence, LockError, Op};
use lock_postgres::tokio_postgres::{self, Client, NoTls};
use tokio::sync::Mutex;

use crate::error::AppError;

/// The PostgreSQL ledger's table.
const CREATE: &str =
    "CREATE TABLE IF NOT EXISTS ledger (id bigint PRIMARY KEY, settled bigint NOT NULL)";
const UPSERT: &str = "INSERT INTO ledger (id, settled) VALUES ($1, $2) \
                      ON CONFLICT (id) DO UPDATE SET settled = excluded.settled";

/// Per order: how many times it was settled, in the store beside the lock.
pub(crate) enum Ledger {
    /// The key `ledger:order:{id}`, written with `distlock_fenced_set`.
    Redis {
        fences: RedisFences,
        conn: MultiplexedConnection,
    },
    /// The table `ledger`, each write a transaction fenced by `distlock_fence`. One client:
    /// writes take turns (an example's simplicity; use a pool in a service).
    Postgres(Mutex<Client>),
}

impl Ledger {
    /// The ledger on the Redis at `url`, written through the fences of `lock` (its connections).
    pub(crate) async fn redis(lock: &RedisLock, url: &str) -> Result<Self, crate::Error> {
        let conn = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        Ok(Self::Redis {
            fences: lock.fences(),
            conn,
        })
    }

    /// The ledger on the PostgreSQL at `url`, migrated (`distlock_fence` is installed by
    /// `PostgresLock::migrate`).
    pub(crate) async fn postgres(url: &str) -> Result<Self, crate::Error> {
        let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
        tokio::spawn(connection);
        client.batch_execute(CREATE).await?;
        Ok(Self::Postgres(Mutex::new(client)))
    }

    pub(crate) async fn settled(&self, id: u64) -> Result<u64, AppError> {
        match self {
            Self::Redis { conn, .. } => {
                let value: Option<u64> = redis::cmd("GET")
                    .arg(key(id))
                    .query_async(&mut conn.clone())
                    .await
                    .map_err(|e| backend("redis", e))?;
                Ok(value.unwrap_or(0))
            }
            Self::Postgres(client) => {
                let row = client
                    .lock()
                    .await
                    .query_opt("SELECT settled FROM ledger WHERE id = $1", &[&pg_id(id)?])
                    .await
                    .map_err(|e| backend("postgres", e))?;
                Ok(row.map_or(0, |r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)))
            }
        }
    }

    /// Writes `count` for `id` if `token` is at least every token order `id` accepted.
    pub(crate) async fn write(&self, id: u64, count: u64, token: u64) -> Result<(), AppError> {
        let fence = Fence::new(key(id), token);
        let written = match self {
            Self::Redis { fences, .. } => {
                fences.set(&fence, count.to_string().as_bytes(), None).await
            }
            Self::Postgres(client) => {
                let mut client = client.lock().await;
                let tx = client
                    .transaction()
                    .await
                    .map_err(|e| backend("postgres", e))?;
                lock_postgres::fence(&tx, &fence).await?;
                let count = i64::try_from(count).unwrap_or(i64::MAX);
                tx.execute(UPSERT, &[&pg_id(id)?, &count])
                    .await
                    .map_err(|e| backend("postgres", e))?;
                tx.commit().await.map_err(|e| backend("postgres", e))
            }
        };
        written.map_err(|error| match error {
            LockError::Fenced { token, current, .. } => AppError::StaleFence {
                fence: token,
                last: current,
            },
            other => AppError::Lock(other),
        })
    }
}

/// The order's resource: its key on Redis, its fence's name on both.
fn key(id: u64) -> String {
    format!("ledger:order:{id}")
}

fn pg_id(id: u64) -> Result<i64, AppError> {
    i64::try_from(id).map_err(|_| AppError::Lock(LockError::invalid("order id above i64::MAX")))
}

fn backend(
    backend: &'static str,
    error: impl std::error::Error + Send + Sync + 'static,
) -> LockError {
    LockError::Backend {
        backend,
        op: Op::Write,
        retryable: true,
        source: Box::new(error),
    }
}
