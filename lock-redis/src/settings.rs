//! What a [`RedisLock`] is assembled from once its builder's settings are checked, their
//! defaults, and the assembly itself: connections, executor, grants and subscriber.

use std::time::Duration;

use crate::connection::conn::{Connections, Source};
use crate::connection::replication::Replication;
use crate::executor::Executor;
use crate::feeds::subscriber::{Origin, Ping, Subscriber};
use crate::feeds::tracker::Tracker;
use crate::holder::Describe;
use crate::kinds::Grants;
use crate::redis_lock::RedisLock;
use crate::safety::grace::{DEFAULT_GRACE, GraceSettings, GraceState};
use crate::units::ms;

/// How long getting a connection may take, connecting included, by default: 2 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one command may wait for its reply by default: 1 s.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(1);

/// How often the release subscriber sends `PING` on its subscribed connection by default: 5 s.
/// See [`RedisLockBuilder::subscriber_ping_interval`](crate::RedisLockBuilder::subscriber_ping_interval).
pub const DEFAULT_SUBSCRIBER_PING_INTERVAL: Duration = Duration::from_secs(5);

/// How long a lease is held before its key is watched for loss by default: 200 ms. See
/// [`RedisLockBuilder::track_losses_after`](crate::RedisLockBuilder::track_losses_after).
pub const DEFAULT_TRACK_LOSSES_AFTER: Duration = Duration::from_millis(200);

/// How long a name's fencing counter is kept after its last grant by default: 24 h.
pub const DEFAULT_FENCE_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// What a `RedisLock` is assembled from, past its pool.
pub(crate) struct Settings {
    pub(crate) prefix: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) fence_retention: Duration,
    /// Whether grants carry fencing tokens.
    pub(crate) fencing: bool,
    /// What grants say about their holder, if they describe it.
    pub(crate) holder: Option<Describe>,
    /// Where the release subscriber connects, if announcements are on.
    pub(crate) pubsub: Option<Origin>,
    /// Replicas that must confirm each grant and renewal.
    pub(crate) replication: Option<Replication>,
    /// The store grace period.
    pub(crate) grace: GraceSettings,
    /// The server's label in logs and metrics.
    pub(crate) server: String,
    /// Whether releases and extensions try native commands first.
    pub(crate) native_commands: bool,
    /// The subscriber's `PING` interval; zero: off.
    pub(crate) subscriber_ping: Duration,
    /// How long a lease is held before its key is watched for loss; `None`: never.
    pub(crate) loss_tracking: Option<Duration>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            prefix: String::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            command_timeout: DEFAULT_OPERATION_TIMEOUT,
            fence_retention: DEFAULT_FENCE_RETENTION,
            fencing: true,
            holder: None,
            pubsub: None,
            replication: None,
            grace: GraceSettings {
                grace: DEFAULT_GRACE,
                strict: false,
            },
            server: String::from("pool"),
            native_commands: true,
            subscriber_ping: DEFAULT_SUBSCRIBER_PING_INTERVAL,
            loss_tracking: Some(DEFAULT_TRACK_LOSSES_AFTER),
        }
    }
}

/// The lock over connections from `source`, with `settings`.
pub(crate) fn assemble(source: Source, settings: Settings) -> RedisLock {
    let pubsub_limit = settings.connect_timeout + settings.command_timeout;
    let ping = (!settings.subscriber_ping.is_zero()).then_some(Ping {
        interval: settings.subscriber_ping,
        timeout: settings.command_timeout,
    });
    let conns = Connections::new(
        source,
        settings.connect_timeout,
        GraceState::new(settings.grace, settings.server, &settings.prefix),
    );
    #[cfg(feature = "cluster")]
    let conns =
        conns.with_cluster_grace(settings.grace, &settings.prefix, settings.command_timeout);
    let exec = Executor::new(conns, settings.command_timeout, settings.replication)
        .with_native_commands(settings.native_commands);
    let grants = Grants::new(
        settings.fencing,
        ms(settings.fence_retention),
        settings.holder,
        exec.topology(),
    );
    let subscriber = settings
        .pubsub
        .map(|origin| Subscriber::new(origin, pubsub_limit, ping));
    // The tracker connects where the subscriber does (the URL, or Sentinel's master).
    let tracker = settings.loss_tracking.and_then(|after| {
        let origin = subscriber.as_ref()?.origin()?;
        Some(Tracker::new(
            origin,
            settings.prefix.as_str().into(),
            after,
            pubsub_limit,
        ))
    });
    RedisLock::new(exec, grants, subscriber, settings.prefix).with_tracker(tracker)
}
