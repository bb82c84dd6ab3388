//! One listening connection per `PostgresLock` and tokio runtime that tells waiters when a lock
//! is released.
//!
//! Every release runs `pg_notify('distlock_released', name)` in its own statement (a fair
//! lock's tells the queue's new head alone: `pg_notify('distlock_turn', token)`), so the
//! announcement is delivered when (and only if) the release commits. The listener's connection
//! asks `version()` (a look-alike database without `NOTIFY` stops the feed: waiters then poll)
//! and runs `LISTEN` on both channels once and hands each notification to the signal of its name,
//! if any waiter of this process watches it: one channel for all names, no `LISTEN` per name.
//! If the connection drops, a background task connects again, listens again and bumps every
//! signal, because a release may have been announced while it was away (waiters then simply try
//! again).
//!
//! The task and its connection live on the runtime of the waiters they serve: a task on a
//! runtime that has shut down never runs again, and one `PostgresLock` may be used from several
//! runtimes, in sequence (every `#[tokio::test]` has its own) or at once. So each runtime that
//! waits gets its own feed, and a feed whose runtime is gone is replaced on the next watch.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use lock_core::backend::{PerRuntime, ReleaseWatch, SignalTable};
use lock_core::{LockError, Op, TimeoutPhase};
use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::error::{BACKEND, retryable, timeout};
use crate::lookalike::Lookalike;
use crate::sql::{CHANNEL, LISTEN, TURN_CHANNEL, VERSION};

/// How long to wait before connecting again after the listening connection failed.
const RECONNECT_AFTER: Duration = Duration::from_millis(200);

pub(crate) struct Listener {
    config: tokio_postgres::Config,
    /// Bound on connecting plus `LISTEN`.
    limit: Duration,
    feeds: PerRuntime<Feed>,
    /// Set once a feed found a [`Lookalike`] without `LISTEN`/`NOTIFY`: from then on waiters
    /// get no watch (they poll) and no feed is started.
    no_notify: Arc<AtomicBool>,
}

/// One runtime's listening task, and the names its waiters watch.
struct Feed {
    names: SignalTable<String>,
    state: watch::Receiver<State>,
    /// Dropped with the `PostgresLock`: the task then ends.
    _stop: oneshot::Sender<()>,
}

/// Where the listening connection stands.
#[derive(Clone)]
enum State {
    /// Not (yet, or no longer) listening; a connect is under way.
    Connecting,
    /// `LISTEN` is in force.
    Listening,
    /// The last connect failed; the task tries again shortly.
    Failed(Failure),
    /// The server is a look-alike without `LISTEN`/`NOTIFY`; the task has ended.
    NoNotify,
}

#[derive(Clone)]
enum Failure {
    Timeout,
    Error {
        retryable: bool,
        source: Arc<tokio_postgres::Error>,
    },
}

impl Failure {
    fn to_error(&self, elapsed: Duration) -> LockError {
        match self {
            Self::Timeout => timeout(TimeoutPhase::Connect, elapsed),
            Self::Error { retryable, source } => LockError::Backend {
                backend: BACKEND,
                op: Op::Connect,
                retryable: *retryable,
                source: Box::new(Arc::clone(source)),
            },
        }
    }
}

impl Listener {
    /// The client configuration it listens with (a watcher's feed connects with it too).
    pub(crate) fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    pub(crate) fn new(config: tokio_postgres::Config, limit: Duration) -> Self {
        Self {
            config,
            limit,
            feeds: PerRuntime::new(),
            no_notify: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The current runtime's feed, started if it has none (or its task is gone with an earlier
    /// runtime, whose feed is dropped then).
    fn feed(&self) -> (SignalTable<String>, watch::Receiver<State>) {
        self.feeds.get_or_start(
            |runtime| self.start(runtime),
            |feed| (feed.names.clone(), feed.state.clone()),
        )
    }

    /// Spawns a feed's task on `runtime`.
    fn start(&self, runtime: &Handle) -> (Feed, JoinHandle<()>) {
        let names = SignalTable::new();
        let (state_tx, state) = watch::channel(State::Connecting);
        let (stop, stopped) = oneshot::channel();
        let task = runtime.spawn(run(
            self.config.clone(),
            names.clone(),
            state_tx,
            stopped,
            self.limit,
            Arc::clone(&self.no_notify),
        ));
        let feed = Feed {
            names,
            state,
            _stop: stop,
        };
        (feed, task)
    }

    /// Registers the fair waiter `token` (its hex form, the payload of its turn) and returns
    /// its watch, as [`Listener::watch`] does for a name.
    pub(crate) async fn watch_turn(&self, token: &str) -> Result<Option<ReleaseWatch>, LockError> {
        self.watch(&turn_key(token)).await
    }

    /// Registers a waiter of `name` and returns its watch once the feed listens; `None` on a
    /// server without `LISTEN`/`NOTIFY` (the waiter polls).
    pub(crate) async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        if self.no_notify.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let (names, mut state) = self.feed();
        // From here on, dropping `watcher` (also on error or cancellation) undoes the count.
        let watcher = names.watch(name.to_owned());
        let started = tokio::time::Instant::now();
        let settled = tokio::time::timeout(self.limit, async {
            state
                .wait_for(|s| !matches!(s, State::Connecting))
                .await
                .map(|s| s.clone())
        })
        .await;
        match settled {
            Ok(Ok(State::Listening)) => Ok(Some(watcher.into_release_watch())),
            Ok(Ok(State::NoNotify)) => Ok(None),
            Ok(Ok(State::Failed(failure))) => Err(failure.to_error(started.elapsed())),
            Ok(Ok(State::Connecting)) | Ok(Err(_)) => Err(LockError::Backend {
                backend: BACKEND,
                op: Op::Connect,
                retryable: true,
                source: "the release listener stopped".into(),
            }),
            Err(_) => Err(timeout(TimeoutPhase::Connect, started.elapsed())),
        }
    }
}

type Messages = Pin<Box<dyn Stream<Item = Result<AsyncMessage, tokio_postgres::Error>> + Send>>;

/// The listening task: owns the connection and turns notifications into signals. Ends when its
/// `PostgresLock` is dropped (or its runtime shuts down).
async fn run(
    config: tokio_postgres::Config,
    names: SignalTable<String>,
    state: watch::Sender<State>,
    mut stop: oneshot::Receiver<()>,
    limit: Duration,
    no_notify: Arc<AtomicBool>,
) {
    loop {
        let connected = tokio::select! {
            _ = &mut stop => return,
            connected = tokio::time::timeout(limit, connect(&config, &names)) => connected,
        };
        match connected {
            Ok(Ok(Connected::NoNotify(server))) => {
                tracing::warn!(
                    %server,
                    "the server has no LISTEN/NOTIFY: lock waiters poll with their backoff"
                );
                no_notify.store(true, Ordering::Relaxed);
                state.send_replace(State::NoNotify);
                return;
            }
            Ok(Ok(Connected::Listening(client, mut messages))) => {
                state.send_replace(State::Listening);
                // Releases announced while nobody listened are lost: everyone looks again.
                names.notify_all();
                loop {
                    tokio::select! {
                        _ = &mut stop => return,
                        message = messages.next() => match message {
                            Some(Ok(message)) => dispatch(&names, &message),
                            Some(Err(error)) => {
                                tracing::debug!(%error, "release listener connection failed");
                                break;
                            }
                            None => break,
                        },
                    }
                }
                drop(client);
                state.send_replace(State::Connecting);
                tracing::debug!("release listener connection lost; reconnecting");
            }
            Ok(Err(error)) => {
                tracing::debug!(%error, "release listener cannot connect; retrying");
                state.send_replace(State::Failed(Failure::Error {
                    retryable: retryable(&error),
                    source: Arc::new(error),
                }));
            }
            Err(_) => {
                tracing::debug!("release listener timed out connecting; retrying");
                state.send_replace(State::Failed(Failure::Timeout));
            }
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(RECONNECT_AFTER) => {}
        }
    }
}

/// What a connect came to.
enum Connected {
    /// `LISTEN` is in force on this connection.
    Listening(tokio_postgres::Client, Messages),
    /// The server is a look-alike without `LISTEN`/`NOTIFY`.
    NoNotify(Lookalike),
}

/// Connects, asks `version()` (a look-alike has no `LISTEN`) and runs `LISTEN`, driving the
/// connection meanwhile (notifications that arrive before `LISTEN` completes are dispatched
/// too).
async fn connect(
    config: &tokio_postgres::Config,
    names: &SignalTable<String>,
) -> Result<Connected, tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let mut messages: Messages = Box::pin(futures::stream::poll_fn(move |cx| {
        connection.poll_message(cx)
    }));
    let version = driving(client.query_one(VERSION, &[]), &mut messages, names).await?;
    if let Some(server) = Lookalike::detect(version.try_get(0)?) {
        return Ok(Connected::NoNotify(server));
    }
    driving(client.batch_execute(LISTEN), &mut messages, names).await?;
    Ok(Connected::Listening(client, messages))
}

/// Awaits `request` while driving the connection's `messages` (dispatching notifications).
async fn driving<T>(
    request: impl Future<Output = Result<T, tokio_postgres::Error>>,
    messages: &mut Messages,
    names: &SignalTable<String>,
) -> Result<T, tokio_postgres::Error> {
    tokio::pin!(request);
    loop {
        tokio::select! {
            answer = &mut request => break answer,
            message = messages.next() => match message {
                Some(Ok(message)) => dispatch(names, &message),
                Some(Err(error)) => break Err(error),
                // The connection ended: `request` fails with the reason.
                None => break (&mut request).await,
            },
        }
    }
}

/// How the listener files a turn: this, then the waiter's token. A NUL never starts a lock name
/// that came through PostgreSQL (`text` cannot hold one), so turns and names never collide.
const TURN_KEY_PREFIX: char = '\0';

/// The key the turn of the fair waiter `token` is filed under.
fn turn_key(token: &str) -> String {
    let mut key = String::with_capacity(token.len() + 1);
    key.push(TURN_KEY_PREFIX);
    key.push_str(token);
    key
}

/// Hands a notification to the signal it is for: a release to the watchers of the name in its
/// payload, a fair turn to the watcher of the token in its payload (filed under [`turn_key`]).
fn dispatch(names: &SignalTable<String>, message: &AsyncMessage) {
    let AsyncMessage::Notification(note) = message else {
        return;
    };
    if note.channel() == CHANNEL {
        names.notify(note.payload());
    } else if note.channel() == TURN_CHANNEL {
        names.notify(&turn_key(note.payload()));
    }
}
