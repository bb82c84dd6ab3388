//! Release announcements on PostgreSQL counted for `watch`: one connection of its own that
//! `LISTEN`s on lock-postgres's channels. Every release of the lease table is announced there
//! by the library's own statements: `pg_notify('distlock_released', name)` for a mutex, a
//! read-write lock and a semaphore (and a fair lock nobody queues for), and
//! `pg_notify('distlock_turn', token)` to the new head of a fair lock's queue, which is
//! counted for the name whose queue that token was seen in. Advisory locks announce nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::StreamExt;
use lock_postgres::tokio_postgres::{AsyncMessage, Client, NoTls};

use super::Releases;
use super::postgres_target::PostgresTarget;
use crate::exit::Failure;
use crate::inspect::LockInfo;

/// Announcements since the last refresh: `(turn channel?, payload)` to how many.
type Counts = Arc<Mutex<HashMap<(bool, String), u64>>>;

/// At most this many fair waiters' tokens are remembered (to count a turn for their name).
const MAX_TOKENS: usize = 100_000;

/// The listening connection and what it counted.
pub(crate) struct PostgresReleases {
    /// Kept so the connection stays open (dropping the client ends it).
    _client: Client,
    counts: Counts,
    /// Fair waiters' tokens seen in the listings, to their lock's name.
    turns: HashMap<String, String>,
}

impl PostgresReleases {
    /// Connects (within the connect timeout) and listens on both channels (within the command
    /// timeout).
    ///
    /// # Errors
    /// A backend failure when connecting or `LISTEN` fails.
    pub(crate) async fn start(target: &PostgresTarget) -> Result<Self, Failure> {
        let connected = tokio::time::timeout(target.connect_timeout, target.config.connect(NoTls))
            .await
            .map_err(|_| {
                Failure::new(
                    crate::exit::BACKEND,
                    format!(
                        "PostgreSQL at {}, connecting to listen: no connection within {}",
                        target.node,
                        humantime::format_duration(target.connect_timeout)
                    ),
                )
            })?;
        let (client, mut connection) =
            connected.map_err(|e| target.failure("connecting to listen", &e))?;
        let counts = Counts::default();
        let counted = counts.clone();
        // The connection's messages: notifications counted; it ends with the connection.
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(n)) => {
                        let turn = n.channel() == lock_postgres::TURN_CHANNEL;
                        *counted
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .entry((turn, n.payload().to_owned()))
                            .or_default() += 1;
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(
                            error = %crate::exit::one_line(&error),
                            "the connection counting releases ended"
                        );
                        break;
                    }
                }
            }
        });
        let listen = format!(
            "LISTEN {}; LISTEN {}",
            lock_postgres::CHANNEL,
            lock_postgres::TURN_CHANNEL
        );
        target
            .bounded("listening for releases", client.batch_execute(&listen))
            .await?;
        Ok(Self {
            _client: client,
            counts,
            turns: HashMap::new(),
        })
    }
}

#[async_trait]
impl Releases for PostgresReleases {
    /// Remembers the fair waiters' tokens (their turn is announced by token). Nothing to take
    /// out of the waiters: listeners are never counted as waiters on PostgreSQL.
    async fn follow(&mut self, locks: &mut [LockInfo]) {
        if self.turns.len() > MAX_TOKENS {
            self.turns.clear();
        }
        for lock in locks.iter() {
            for token in &lock.fair_queue {
                self.turns.insert(token.clone(), lock.name.clone());
            }
        }
    }

    fn take_rates(&mut self, seconds: f64) -> HashMap<String, f64> {
        let counts =
            std::mem::take(&mut *self.counts.lock().unwrap_or_else(PoisonError::into_inner));
        let mut rates: HashMap<String, f64> = HashMap::new();
        for ((turn, payload), n) in counts {
            let name = if turn {
                match self.turns.get(&payload) {
                    Some(name) => name.clone(),
                    None => continue,
                }
            } else {
                payload
            };
            *rates.entry(name).or_default() += n as f64 / seconds;
        }
        rates
    }
}
