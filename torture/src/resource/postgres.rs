//! The fenced log of the PostgreSQL scenarios: a table on a PostgreSQL of its own (no fault
//! touches it), each entry inserted in a transaction whose first statement is the fence
//! `distlock_fence(resource, token)` that `PostgresLock::migrate` installs.

use std::time::Duration;

use distlock::postgres::tokio_postgres::{self, Client, NoTls};
use distlock::postgres::{PostgresLock, fence};
use distlock::{Guard, LockError, Op};

/// The log: every accepted write's `"TOKEN WORKER"`, in commit order of its fence (the
/// record's row lock serializes fenced transactions, so `seq` follows it).
const CREATE: &str = "CREATE TABLE IF NOT EXISTS torture_accepted \
                      (seq bigserial PRIMARY KEY, entry text NOT NULL)";
const INSERT: &str = "INSERT INTO torture_accepted (entry) VALUES ($1)";
const SELECT: &str = "SELECT entry FROM torture_accepted ORDER BY seq";

/// A worker's fenced log on PostgreSQL.
pub(super) struct PostgresLog {
    client: Client,
}

impl PostgresLog {
    /// Connects to the resource's PostgreSQL (`url`).
    pub(super) async fn connect(url: &str) -> Result<PostgresLog, String> {
        Ok(PostgresLog {
            client: connect(url).await?,
        })
    }

    /// Inserts `entry` in a transaction fenced by `guard` (its lock name and token); a stale
    /// token is `LockError::Fenced` and the transaction rolls back.
    pub(super) async fn append(&mut self, guard: &Guard, entry: &str) -> Result<(), LockError> {
        let tx = self.client.transaction().await.map_err(backend)?;
        fence(&tx, &guard.fence()).await?;
        tx.execute(INSERT, &[&entry]).await.map_err(backend)?;
        tx.commit().await.map_err(backend)
    }
}

impl PostgresLog {
    /// Inserts `entry` with no fence (the broken variant `Misbehave::Unfenced`).
    pub(super) async fn append_unfenced(&mut self, entry: &str) -> Result<(), String> {
        self.client
            .execute(INSERT, &[&entry])
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// Installs the fence (the lock's migration) and creates the log table.
pub(super) async fn prepare(url: &str) -> Result<(), String> {
    // Setup, not the run: 10 s per statement, not the default 1 s, which the fence's server
    // on a libfaketime clock on a busy machine has exceeded (the clock scenarios).
    let lock = PostgresLock::builder()
        .url(url)
        .connect_timeout(Duration::from_secs(10))
        .statement_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    lock.migrate().await.map_err(|e| e.to_string())?;
    let client = connect(url).await?;
    client
        .batch_execute(CREATE)
        .await
        .map_err(|e| e.to_string())
}

/// The log's entries, read at the end of a run.
pub(super) async fn entries(url: &str) -> Result<Vec<String>, String> {
    let client = connect(url).await?;
    let rows = client.query(SELECT, &[]).await.map_err(|e| e.to_string())?;
    rows.iter()
        .map(|row| row.try_get::<_, String>(0).map_err(|e| e.to_string()))
        .collect()
}

/// A client of its own, its connection driven by a task of the current runtime.
async fn connect(url: &str) -> Result<Client, String> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| format!("the resource's PostgreSQL: {e}"))?;
    tokio::spawn(connection);
    Ok(client)
}

fn backend(e: tokio_postgres::Error) -> LockError {
    LockError::Backend {
        backend: "postgres",
        op: Op::Write,
        retryable: true,
        source: Box::new(e),
    }
}
