//! Release announcements: one watch per `EtcdLock` and tokio runtime on the whole key prefix,
//! filtered to deletions, whose events bump the signal of the name deleted. A release, an
//! expiry (etcd deletes the keys of a lease that ran out) and a revoke all delete the key, so
//! waiters wake on each.
//!
//! One stream and one watch serve every name, like lock-redis's one subscriber connection per
//! runtime: waiting on 1,000 names costs one gRPC stream, and a watch is in force as soon as the
//! feed is, with no request per name. The price: every release under the prefix reaches every
//! process that waits on any name (as a Redis pattern subscription would). When the stream
//! breaks, or the client's requests move to another member (the stream's may be cut off),
//! every signal is bumped (a release may have been missed; waiters just retry) and the feed
//! reconnects with a bounded backoff.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{EventType, WatchFilterType, WatchOptions};
use lock_core::backend::{PerRuntime, ReleaseWatch, SignalTable};
use lock_core::{LockError, TimeoutPhase};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::client::{Clients, Target};
use crate::layout;

/// Backoff between reconnects of a broken feed: doubled from the first to the last.
const RECONNECT_FIRST: Duration = Duration::from_millis(50);
const RECONNECT_LAST: Duration = Duration::from_secs(1);

/// The signals of the names watched now, by key; an entry lives as long as a watch holds it.
type Signals = SignalTable<Vec<u8>>;

/// One runtime's feed: its signals, whether its watch is in force, and the handle whose drop
/// ends its task.
struct Feed {
    signals: Signals,
    in_force: watch::Receiver<bool>,
    /// Dropped with the feed (with the `EtcdLock`): the task sees its channel closed and ends.
    _stop: watch::Sender<()>,
}

/// The feeds of one `EtcdLock`.
#[derive(Default)]
pub(crate) struct Watches {
    feeds: PerRuntime<Feed>,
}

impl std::fmt::Debug for Watches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watches")
            .field("feeds", &self.feeds.len())
            .finish()
    }
}

impl Watches {
    /// A watch on `key`, once the current runtime's feed is in force.
    ///
    /// # Errors
    /// A `Command` timeout when the feed is not in force within the command timeout (the
    /// cluster is unreachable); the `Locker` then polls.
    pub(crate) async fn watch(
        &self,
        clients: &Arc<Clients>,
        target: &Arc<Target>,
        prefix: &[u8],
        key: Vec<u8>,
    ) -> Result<ReleaseWatch, LockError> {
        let (signals, mut in_force) = self.feed(clients, target, prefix);
        let watcher = signals.watch(key);
        let started = Instant::now();
        let waited = tokio::time::timeout(target.command_timeout, in_force.wait_for(|on| *on));
        match waited.await {
            Ok(Ok(_)) => Ok(watcher.into_release_watch()),
            _ => Err(LockError::Timeout {
                phase: TimeoutPhase::Command,
                elapsed: started.elapsed(),
            }),
        }
    }

    /// The current runtime's feed, started if it has none (or its task is gone with an earlier
    /// runtime, whose feed is dropped then).
    fn feed(
        &self,
        clients: &Arc<Clients>,
        target: &Arc<Target>,
        prefix: &[u8],
    ) -> (Signals, watch::Receiver<bool>) {
        let start = |runtime: &Handle| {
            let signals = Signals::new();
            let (in_force_tx, in_force) = watch::channel(false);
            let (stop, stopped) = watch::channel(());
            let task = runtime.spawn(run(
                Arc::clone(clients),
                Arc::clone(target),
                prefix.to_vec(),
                signals.clone(),
                in_force_tx,
                stopped,
            ));
            let feed = Feed {
                signals,
                in_force,
                _stop: stop,
            };
            (feed, task)
        };
        self.feeds
            .get_or_start(start, |feed| (feed.signals.clone(), feed.in_force.clone()))
    }
}

/// The feed's task: watch the prefix, bump the signals of deleted keys, reconnect when the
/// stream breaks, end when the lock is dropped.
async fn run(
    clients: Arc<Clients>,
    target: Arc<Target>,
    prefix: Vec<u8>,
    signals: Signals,
    in_force: watch::Sender<bool>,
    mut stopped: watch::Receiver<()>,
) {
    let mut backoff = RECONNECT_FIRST;
    loop {
        tokio::select! {
            _ = stopped.changed() => return,
            () = follow(&clients, &target, &prefix, &signals, &in_force) => {}
        }
        // The stream broke: a release may have gone unannounced.
        in_force.send_replace(false);
        signals.notify_all();
        tokio::select! {
            _ = stopped.changed() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(RECONNECT_LAST);
    }
}

/// One life of the stream: returns when it cannot be opened, breaks, or the client's requests
/// move to another member (the one it is on stopped answering them: its stream may stall
/// unbroken, and a member cut off from its peers hears of no release).
async fn follow(
    clients: &Clients,
    target: &Target,
    prefix: &[u8],
    signals: &Signals,
    in_force: &watch::Sender<bool>,
) {
    let Ok((mut client, mut moves)) = clients.get_with_moves(target).await else {
        return;
    };
    let options = WatchOptions::new()
        .with_prefix()
        .with_filters([WatchFilterType::NoPut]);
    let opened = tokio::time::timeout(target.command_timeout, client.watch(prefix, Some(options)));
    let Ok(Ok(mut stream)) = opened.await else {
        return;
    };
    // The stream is on the member requests went to as it opened: follow them from here.
    moves.borrow_and_update();
    loop {
        let message = tokio::select! {
            message = stream.message() => message,
            _ = moves.changed() => return,
        };
        let Ok(Some(response)) = message else {
            return;
        };
        if response.created() {
            in_force.send_replace(true);
        }
        if response.canceled() {
            return;
        }
        for event in response.events() {
            if event.event_type() != EventType::Delete {
                continue;
            }
            let Some(kv) = event.kv() else { continue };
            // A semaphore holder's key wakes the waiters of its name's lock key.
            let named = layout::name_of(prefix, kv.key()).map(|name| {
                let mut key = prefix.to_vec();
                key.extend_from_slice(name);
                key
            });
            let key = named.as_deref().unwrap_or(kv.key());
            signals.notify(key);
        }
    }
}
