//! Release announcements counted for a watcher (`distlock watch`'s RELEASES/S): one connection
//! of its own that `LISTEN`s on the lock's channels. Every release of the lease table is
//! announced there by the kinds' own statements: `pg_notify(CHANNEL, name)` for a mutex, a
//! read-write lock and a semaphore (and a fair lock nobody queues for), and
//! `pg_notify(TURN_CHANNEL, token)` to the new head of a fair lock's queue, which is counted
//! for the name whose queue that token is in. Advisory locks announce nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use lock_core::backend::ReleaseFeed;
use lock_core::{LockError, Op, TimeoutPhase};
use tokio::time::Instant;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{AsyncMessage, Client, NoTls};

use crate::error::{from_pg, timeout};
use crate::sql::{LISTEN, TURN_CHANNEL};

/// Announcements since the last take: `(turn channel?, payload)` to how many.
type Counts = Arc<Mutex<HashMap<(bool, String), u64>>>;

/// At most this many fair waiters' tokens are remembered (to count a turn for their name).
const MAX_TOKENS: usize = 100_000;

/// The fair waiters of the names `$1`, to count the turn announced to each for its name.
/// Answers nothing (an error the feed ignores) on a schema without the fair queue.
const QUEUED: &str = "SELECT token, name FROM distlock_fair_queue WHERE name = ANY ($1)";

/// The listening connection and what it counted.
pub(super) struct PostgresReleaseFeed {
    client: Client,
    counts: Counts,
    /// Fair waiters' tokens seen in the followed names' queues, to their lock's name.
    turns: HashMap<String, String>,
    statement_timeout: Duration,
}

impl PostgresReleaseFeed {
    /// Connects with `config` (within `connect_timeout`) and listens on both channels (within
    /// `statement_timeout`).
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when connecting or `LISTEN` fails.
    pub(super) async fn start(
        config: &tokio_postgres::Config,
        connect_timeout: Duration,
        statement_timeout: Duration,
    ) -> Result<Self, LockError> {
        let started = Instant::now();
        let (client, mut connection) = tokio::time::timeout(connect_timeout, config.connect(NoTls))
            .await
            .map_err(|_| timeout(TimeoutPhase::Connect, started.elapsed()))?
            .map_err(|e| from_pg(e, Op::Connect))?;
        let counts = Counts::default();
        let counted = counts.clone();
        // The connection's messages: notifications counted; it ends with the connection (the
        // feed dropped, or the server gone).
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(n)) => {
                        let turn = n.channel() == TURN_CHANNEL;
                        *counted
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .entry((turn, n.payload().to_owned()))
                            .or_default() += 1;
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%error, "the connection counting releases ended");
                        break;
                    }
                }
            }
        });
        let started = Instant::now();
        tokio::time::timeout(statement_timeout, client.batch_execute(LISTEN))
            .await
            .map_err(|_| timeout(TimeoutPhase::Command, started.elapsed()))?
            .map_err(|e| from_pg(e, Op::Connect))?;
        Ok(Self {
            client,
            counts,
            turns: HashMap::new(),
            statement_timeout,
        })
    }
}

#[async_trait]
impl ReleaseFeed for PostgresReleaseFeed {
    /// Remembers the fair waiters' tokens of `names` (their turn is announced by token), read
    /// on the feed's own connection. None of the store's waiters are this feed's: listeners
    /// are not counted as waiters on PostgreSQL.
    async fn follow(&mut self, names: &[&str]) -> HashMap<String, u64> {
        if self.turns.len() > MAX_TOKENS {
            self.turns.clear();
        }
        let names: Vec<&str> = names.to_vec();
        let params: [(&(dyn ToSql + Sync), Type); 1] = [(&names, Type::TEXT_ARRAY)];
        let read = self.client.query_typed(QUEUED, &params);
        // A turn not matched to its name is not counted: nothing else depends on it.
        if let Ok(Ok(rows)) = tokio::time::timeout(self.statement_timeout, read).await {
            for row in rows {
                if let (Ok(token), Ok(name)) = (row.try_get(0), row.try_get(1)) {
                    self.turns.insert(token, name);
                }
            }
        }
        HashMap::new()
    }

    fn take_counts(&mut self) -> HashMap<String, u64> {
        let counts =
            std::mem::take(&mut *self.counts.lock().unwrap_or_else(PoisonError::into_inner));
        let mut by_name: HashMap<String, u64> = HashMap::new();
        for ((turn, payload), n) in counts {
            let name = if turn {
                match self.turns.get(&payload) {
                    Some(name) => name.clone(),
                    None => continue,
                }
            } else {
                payload
            };
            *by_name.entry(name).or_default() += n;
        }
        by_name
    }
}

impl std::fmt::Debug for PostgresReleaseFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresReleaseFeed")
            .field("turns", &self.turns.len())
            .finish_non_exhaustive()
    }
}
