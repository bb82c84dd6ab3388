//! One shared pub/sub connection per `RedisLock` and tokio runtime that tells waiters when a
//! lock is released.
//!
//! Waiters of every name share it: a channel is subscribed while at least one watch on it lives
//! and unsubscribed when the last one is dropped. If the connection drops, a background task
//! reconnects (to the master the sentinels name now, when there are sentinels), subscribes
//! every live channel again, and bumps every signal, because a release may have been announced
//! while it was away (waiters then simply try again). On a Redis Cluster the channels are
//! sharded (`SSUBSCRIBE`, answered by the node that owns the lock's slot), over a RESP3 cluster
//! connection that follows the slots by itself.
//!
//! A connection can also die without a close: a NAT or firewall entry dropped, a peer machine
//! gone, and no FIN or RST ever arrives (wolph/portalocker#146: such a link hid wake-ups for
//! minutes). A subscriber only reads, so it would wait on such a link forever. So the task sends
//! `PING` on the subscribed connection every [`Ping::interval`] (the builder's
//! `subscriber_ping_interval`), and when no answer comes within [`Ping::timeout`] it treats the
//! connection as dropped: reconnect, resubscribe, bump every signal. (On a Redis Cluster the
//! subscriptions ride redis-rs's cluster connection, which this does not check.)
//!
//! The task and its connection live on the runtime of the waiters they serve: a task on a
//! runtime that has shut down never runs again, and one `RedisLock` may be used from several
//! runtimes, in sequence (every `#[tokio::test]` has its own) or at once. So each runtime that
//! waits gets its own feed, and a feed whose runtime is gone is replaced on the next watch.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use lock_core::backend::{PerRuntime, ReleaseWatch, SignalTable};
use lock_core::{LockError, Op, TimeoutPhase};
use redis::aio::{PubSubSink, PubSubStream};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::{BACKEND, from_redis, timeout};

/// How long to wait before connecting again after the subscriber connection failed.
const RECONNECT_AFTER: Duration = Duration::from_millis(200);

/// The subscriber's check that its connection is alive (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ping {
    /// Time between two `PING`s on the subscribed connection.
    pub(crate) interval: Duration,
    /// How long the answer may take before the connection counts as dead.
    pub(crate) timeout: Duration,
}

/// Where the subscriber connects.
pub(crate) enum Origin {
    /// One server.
    Client(redis::Client),
    /// The master the sentinels name at each (re)connect.
    #[cfg(feature = "sentinel")]
    Sentinel(redis::sentinel::SentinelClient),
    /// A Redis Cluster, by the URLs of some of its nodes.
    #[cfg(feature = "cluster")]
    Cluster(Vec<String>),
}

/// Shared by the feeds of every runtime (a sentinel client is asked with `&mut`).
pub(crate) type SharedOrigin = Arc<tokio::sync::Mutex<Origin>>;

pub(crate) struct Subscriber {
    origin: SharedOrigin,
    /// The cluster's node URLs, when it is one (its feeds build their own client).
    #[cfg(feature = "cluster")]
    cluster: Option<Vec<String>>,
    /// Bound on connecting and on each SUBSCRIBE.
    timeout: Duration,
    /// The liveness check of the subscribed connection; `None`: off.
    ping: Option<Ping>,
    feeds: PerRuntime<Feed>,
}

/// One runtime's subscriber task, and the channels its waiters watch.
struct Feed {
    channels: SignalTable<String>,
    task: mpsc::UnboundedSender<Request>,
}

enum Request {
    Subscribe(String, oneshot::Sender<Result<(), redis::RedisError>>),
    Unsubscribe(String),
}

impl Subscriber {
    pub(crate) fn new(origin: Origin, timeout: Duration, ping: Option<Ping>) -> Self {
        Self {
            #[cfg(feature = "cluster")]
            cluster: match &origin {
                Origin::Cluster(urls) => Some(urls.clone()),
                _ => None,
            },
            origin: Arc::new(tokio::sync::Mutex::new(origin)),
            timeout,
            ping,
            feeds: PerRuntime::new(),
        }
    }

    /// Where the subscriber connects, shared (the loss tracker connects there too); `None`
    /// on a Redis Cluster, whose nodes each keep their own tracking table.
    pub(crate) fn origin(&self) -> Option<SharedOrigin> {
        #[cfg(feature = "cluster")]
        if self.cluster.is_some() {
            return None;
        }
        Some(Arc::clone(&self.origin))
    }

    /// Where the subscriber connects, cluster or not: where a release feed for a watcher
    /// (`inspect/feed.rs`) subscribes too.
    pub(crate) fn connects_to(&self) -> SharedOrigin {
        Arc::clone(&self.origin)
    }

    /// The current runtime's feed, started if it has none (or its task is gone with an earlier
    /// runtime, whose feed is dropped then).
    fn feed(&self) -> (SignalTable<String>, mpsc::UnboundedSender<Request>) {
        self.feeds.get_or_start(
            |runtime| self.start(runtime),
            |feed| (feed.channels.clone(), feed.task.clone()),
        )
    }

    /// Spawns a feed's task on `runtime`.
    fn start(&self, runtime: &Handle) -> (Feed, JoinHandle<()>) {
        let (task, requests) = mpsc::unbounded_channel();
        // Weak: the table lives in the task, which ends once no sender is left.
        let unsubscribe = task.downgrade();
        let channels = SignalTable::on_last(move |channel| {
            if let Some(task) = unsubscribe.upgrade() {
                let _ = task.send(Request::Unsubscribe(channel));
            }
        });
        let feed = Feed {
            channels: channels.clone(),
            task,
        };
        #[cfg(feature = "cluster")]
        if let Some(urls) = &self.cluster {
            let run = run_cluster(urls.clone(), channels, requests, self.timeout);
            return (feed, runtime.spawn(run));
        }
        let origin = Arc::clone(&self.origin);
        let run = run(origin, channels, requests, self.timeout, self.ping);
        (feed, runtime.spawn(run))
    }

    /// Subscribes to `channel` (if not already) and returns a watch on it once the server has
    /// confirmed the subscription.
    pub(crate) async fn watch(&self, channel: String) -> Result<ReleaseWatch, LockError> {
        let (channels, task) = self.feed();
        // From here on, dropping `watcher` (also on error or cancellation) undoes the count; the
        // last watcher of the channel unsubscribes it.
        let watcher = channels.watch(channel.clone());
        let (done, confirmed) = oneshot::channel();
        let started = tokio::time::Instant::now();
        if task.send(Request::Subscribe(channel, done)).is_err() {
            return Err(stopped());
        }
        match tokio::time::timeout(self.timeout, confirmed).await {
            // The sender keeps the task alive while a watch lives, as long as the watch needs
            // its unsubscribe (it goes after the watcher: a tuple drops in order).
            Ok(Ok(Ok(()))) => Ok(ReleaseWatch::new(watcher.signal().clone(), (watcher, task))),
            Ok(Ok(Err(err))) => Err(from_redis(err, Op::Acquire, "", started.elapsed())),
            Ok(Err(_)) => Err(stopped()),
            Err(_) => Err(timeout(TimeoutPhase::Command, started.elapsed())),
        }
    }
}

fn stopped() -> LockError {
    LockError::Backend {
        backend: BACKEND,
        op: Op::Acquire,
        retryable: true,
        source: "the release subscriber stopped".into(),
    }
}

/// The subscriber task: owns the pub/sub connection, follows requests, turns messages into
/// signals, and (with `ping`) checks that the connection still answers. Ends when its
/// `RedisLock` is dropped.
async fn run(
    origin: SharedOrigin,
    channels: SignalTable<String>,
    mut requests: mpsc::UnboundedReceiver<Request>,
    limit: Duration,
    ping: Option<Ping>,
) {
    loop {
        let connected = match bounded(limit, connect(&origin, &channels)).await {
            Ok(connected) => connected,
            Err(error) => {
                tracing::debug!(%error, "release subscriber cannot connect; retrying");
                if refuse_meanwhile(&mut requests, error).await.is_break() {
                    return;
                }
                continue;
            }
        };
        if serve(connected, &channels, &mut requests, limit, ping)
            .await
            .is_break()
        {
            return;
        }
        tracing::debug!("release subscriber connection lost; reconnecting");
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}

/// While no connection is up, for [`RECONNECT_AFTER`]: fails the subscriptions asked for
/// meanwhile with `error` (their waiters poll instead). Breaks when the `RedisLock` is gone.
async fn refuse_meanwhile(
    requests: &mut mpsc::UnboundedReceiver<Request>,
    error: redis::RedisError,
) -> ControlFlow<()> {
    tokio::select! {
        request = requests.recv() => match request {
            Some(Request::Subscribe(_, done)) => { let _ = done.send(Err(error)); }
            Some(Request::Unsubscribe(_)) => {}
            None => return ControlFlow::Break(()),
        },
        () = tokio::time::sleep(RECONNECT_AFTER) => {}
    }
    ControlFlow::Continue(())
}

/// A connected subscriber: its sink, its stream and the channels it subscribed.
type Connected = (PubSubSink, PubSubStream, HashSet<String>);

/// One life of the connection: follows requests, messages and pings until the connection
/// breaks (continue: reconnect) or the `RedisLock` is gone (break).
async fn serve(
    (mut sink, mut stream, mut subscribed): Connected,
    channels: &SignalTable<String>,
    requests: &mut mpsc::UnboundedReceiver<Request>,
    limit: Duration,
    ping: Option<Ping>,
) -> ControlFlow<()> {
    // An interval too long to add to the clock means never.
    let mut next_ping = ping.and_then(|ping| Instant::now().checked_add(ping.interval));
    loop {
        tokio::select! {
            () = ping_due(next_ping) => {
                // `ping_due` never resolves without a ping.
                if let Some(ping) = ping {
                    // Messages that arrive meanwhile wait in the stream: none is lost.
                    let answer = bounded(ping.timeout, sink.ping::<redis::Value>()).await;
                    if let Err(error) = answer {
                        tracing::warn!(
                            %error,
                            timeout = ?ping.timeout,
                            "release subscriber: no answer to PING on the subscribed \
                             connection (a dead link); reconnecting and subscribing again"
                        );
                        return ControlFlow::Continue(());
                    }
                    next_ping = Instant::now().checked_add(ping.interval);
                }
            }
            request = requests.recv() => match request {
                Some(Request::Subscribe(channel, done)) => {
                    // `connect` may have subscribed it already (it was asked for meanwhile).
                    if subscribed.contains(&channel) {
                        let _ = done.send(Ok(()));
                        continue;
                    }
                    let result = bounded(limit, sink.subscribe(&channel)).await;
                    let broken = result.is_err();
                    if !broken {
                        subscribed.insert(channel);
                    }
                    let _ = done.send(result);
                    if broken { return ControlFlow::Continue(()); }
                }
                Some(Request::Unsubscribe(channel)) => {
                    subscribed.remove(&channel);
                    if bounded(limit, sink.unsubscribe(&channel)).await.is_err() {
                        return ControlFlow::Continue(());
                    }
                }
                None => return ControlFlow::Break(()),
            },
            message = stream.next() => match message {
                Some(message) => {
                    channels.notify(message.get_channel_name());
                }
                None => return ControlFlow::Continue(()), // the connection dropped
            },
        }
    }
}

/// Resolves at `at`; never, without a time (pings off).
async fn ping_due(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Runs a network step of the subscriber with a time limit (a hung server must not wedge it).
async fn bounded<T>(
    limit: Duration,
    step: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> redis::RedisResult<T> {
    tokio::time::timeout(limit, step).await.unwrap_or_else(|_| {
        Err(redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "release subscriber timed out",
        )))
    })
}

/// Connects and subscribes every channel that has watchers, then wakes all of them: releases
/// announced while no connection listened are lost, so everyone looks again.
async fn connect(
    origin: &tokio::sync::Mutex<Origin>,
    channels: &SignalTable<String>,
) -> Result<Connected, redis::RedisError> {
    let client = match &mut *origin.lock().await {
        Origin::Client(client) => client.clone(),
        #[cfg(feature = "sentinel")]
        Origin::Sentinel(sentinel) => sentinel.async_get_client().await?,
        #[cfg(feature = "cluster")]
        Origin::Cluster(_) => unreachable!("cluster subscriptions run in run_cluster"),
    };
    let (mut sink, stream) = client.get_async_pubsub().await?.split();
    let live = channels.keys();
    for channel in &live {
        sink.subscribe(channel).await?;
    }
    channels.notify_all();
    Ok((sink, stream, live.into_iter().collect()))
}

/// The subscriber task on a Redis Cluster: sharded subscriptions over a RESP3 cluster
/// connection, whose push messages arrive on a channel. redis-rs subscribes again by itself
/// after a disconnection or a slot move; every signal is bumped then, as releases may have been
/// missed.
#[cfg(feature = "cluster")]
async fn run_cluster(
    urls: Vec<String>,
    channels: SignalTable<String>,
    mut requests: mpsc::UnboundedReceiver<Request>,
    limit: Duration,
) {
    use redis::PushKind;
    let (push_tx, mut pushes) = mpsc::unbounded_channel::<redis::PushInfo>();
    let client = match redis::cluster::ClusterClientBuilder::new(urls)
        .use_protocol(redis::ProtocolVersion::RESP3)
        .push_sender(push_tx)
        .connection_timeout(limit)
        .response_timeout(limit)
        .build()
    {
        Ok(client) => client,
        Err(error) => {
            tracing::warn!(%error, "cannot build the cluster subscriber; waiters will poll");
            return;
        }
    };
    let mut conn = loop {
        match bounded(limit, client.get_async_connection()).await {
            Ok(conn) => break conn,
            Err(error) => {
                tracing::debug!(%error, "cluster subscriber cannot connect; retrying");
                if refuse_meanwhile(&mut requests, error).await.is_break() {
                    return;
                }
            }
        }
    };
    loop {
        tokio::select! {
            request = requests.recv() => match request {
                Some(Request::Subscribe(channel, done)) => {
                    let _ = done.send(bounded(limit, conn.ssubscribe(&channel)).await);
                }
                Some(Request::Unsubscribe(channel)) => {
                    if let Err(error) = bounded(limit, conn.sunsubscribe(&channel)).await {
                        tracing::debug!(%error, "SUNSUBSCRIBE failed");
                    }
                }
                None => return,
            },
            push = pushes.recv() => match push {
                Some(push) if push.kind == PushKind::SMessage => {
                    if let Some(redis::Value::BulkString(name)) = push.data.first() {
                        channels.notify(String::from_utf8_lossy(name).as_ref());
                    }
                }
                Some(push) if push.kind == PushKind::Disconnection => channels.notify_all(),
                Some(_) => {}
                None => return,
            },
        }
    }
}
