//! Loss tracking: a holder learns at once that its key is gone (deleted by an operator's
//! `release --force`, evicted, lost in an empty restart or a failover, overwritten by another
//! client), not a third of the lease later at its next renewal.
//!
//! It uses the server's client-side caching invalidations, as rueidislock and valkeylock do
//! (redis/rueidis#924): one RESP3 connection per `RedisLock` and tokio runtime turns
//! `CLIENT TRACKING ON` (the default mode, not `BCAST`) and reads every watched key once with
//! `MGET`, which makes the server remember that this connection read it. The next write to the
//! key by anyone (a `DEL`, a `SET`, our own renewal's `PEXPIRE`, an expiry) sends one
//! `invalidate` push naming it, after which the server forgets it. The task then reads the key
//! again (tracking it again): still our token, it was our own renewal; absent or another token,
//! the lease is lost and its [`OnLoss`] called. So a watched key costs one `MGET` entry at the
//! start, one push and one read per renewal, and one push at its release; the server keeps one
//! entry per watched key in its tracking table.
//!
//! Short holds cost nothing: the `Locker` registers a lease only when its watchdog takes it in
//! (within about a second of the grant; `Lock::watch_loss`), in memory (no I/O), and its key
//! is read only once it is still held [`Tracker::after`] after that; the bulk of an
//! uncontended workload (holds under a millisecond) never reaches the tracker, nor the server. `BCAST` on the lock prefix
//! would need no read, but every tracking client would get a push for every grant and release
//! of every name by anyone (see the crate README's measurements).
//!
//! Where the server or a proxy refuses RESP3 or `CLIENT TRACKING` (an ACL, an old proxy), the
//! refusal is remembered and no lease is watched again: losses are seen at the next renewal,
//! as without tracking. After a disconnection the task reconnects and reads every watched key
//! again, so a key lost while it was away (a failover, a restart) is still reported.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use lock_core::Lease;
use lock_core::backend::{LossWatch, OnLoss, PerRuntime};
use redis::{ProtocolVersion, PushInfo, PushKind, Value};
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::feeds::subscriber::{Origin, SharedOrigin};
use crate::layout::{Keys, token_value};

/// How long to wait before connecting again after the tracking connection failed.
const RECONNECT_AFTER: Duration = Duration::from_millis(200);

/// Registrations that come due within this much of each other are read in one `MGET`, so that
/// under a high grant rate the task wakes a few times a second, not once per grant.
const BATCH_WINDOW: Duration = Duration::from_millis(50);

/// The most keys read in one `MGET`.
const MAX_READ: usize = 1024;

/// Watches the keys of held leases through server-assisted client-side caching (module docs).
pub(crate) struct Tracker {
    origin: SharedOrigin,
    /// The lock's key prefix: a watched lease's key is made from it once the lease comes due.
    prefix: Arc<str>,
    /// How long a lease is held before its key is read and tracked.
    after: Duration,
    /// Bound on connecting and on each command of the tracking connection.
    limit: Duration,
    /// Set once the server refused RESP3 or `CLIENT TRACKING`: nothing is watched any more.
    refused: Arc<AtomicBool>,
    feeds: PerRuntime<Feed>,
}

/// One runtime's tracking task and the registrations waiting for it.
#[derive(Clone)]
struct Feed {
    pending: Arc<Pending>,
    /// Wakes the task when a registration lands in an empty queue; closed when the
    /// `RedisLock` is dropped, which ends the task.
    wake: mpsc::UnboundedSender<()>,
}

/// Registrations not yet read, in the order of their due times (one delay for all).
#[derive(Default)]
struct Pending {
    queue: Mutex<VecDeque<(Instant, Weak<Watched>)>>,
}

/// One held lease, kept alive by its [`LossWatch`]: dropped with it, the task forgets it. The
/// lease (a shared name and a token), not its key and token value: those are made only for the
/// few leases still held when they come due, not on every grant (~500 instructions a cycle;
/// scripts/client-cost.sh).
struct Watched {
    lease: Lease,
    on_loss: OnLoss,
}

impl Tracker {
    /// A tracker connecting where `origin` says; leases held `after` are watched.
    pub(crate) fn new(
        origin: SharedOrigin,
        prefix: Arc<str>,
        after: Duration,
        limit: Duration,
    ) -> Self {
        Self {
            origin,
            prefix,
            after,
            limit,
            refused: Arc::new(AtomicBool::new(false)),
            feeds: PerRuntime::new(),
        }
    }

    /// Registers `lease` (a mutex's or a fair lock's): `on_loss` is called once its key, read
    /// [`Tracker::after`] from now, is seen absent or holding another token. No I/O here.
    /// `None` once the server refused tracking.
    pub(crate) fn watch(&self, lease: &Lease, on_loss: OnLoss) -> Option<LossWatch> {
        if self.refused.load(Ordering::Acquire) || Handle::try_current().is_err() {
            return None;
        }
        let feed = self
            .feeds
            .get_or_start(|runtime| self.start(runtime), Feed::clone);
        let watched = Arc::new(Watched {
            lease: lease.clone(),
            on_loss,
        });
        let due = Instant::now() + self.after;
        let was_empty = {
            let mut queue = feed
                .pending
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let was_empty = queue.is_empty();
            queue.push_back((due, Arc::downgrade(&watched)));
            was_empty
        };
        // A queue with entries has the task's timer armed already (every later entry is due
        // later): only the first one wakes it.
        if was_empty {
            let _ = feed.wake.send(());
        }
        Some(LossWatch::new(watched))
    }

    /// Spawns a runtime's tracking task.
    fn start(&self, runtime: &Handle) -> (Feed, JoinHandle<()>) {
        let (wake, woken) = mpsc::unbounded_channel();
        let feed = Feed {
            pending: Arc::default(),
            wake,
        };
        let task = Task {
            origin: Arc::clone(&self.origin),
            prefix: Arc::clone(&self.prefix),
            limit: self.limit,
            refused: Arc::clone(&self.refused),
            pending: Arc::clone(&feed.pending),
            after: self.after,
            tracked: HashMap::new(),
        };
        (feed, runtime.spawn(task.run(woken)))
    }
}

/// What went wrong on the tracking connection.
enum Failure {
    /// The server refused RESP3 or tracking: never try again.
    Refused(redis::RedisError),
    /// The connection failed: connect again.
    Broken(redis::RedisError),
}

impl From<redis::RedisError> for Failure {
    fn from(error: redis::RedisError) -> Self {
        // A reply from the server (an unknown command, an ACL refusal, `HELLO 3` not
        // understood) will be the same next time; anything on the way may pass.
        if error.kind() == redis::ErrorKind::Io || error.is_timeout() || error.is_io_error() {
            Failure::Broken(error)
        } else {
            Failure::Refused(error)
        }
    }
}

/// The tracking task's state: the keys it has read, with the leases watching each.
struct Task {
    origin: SharedOrigin,
    /// The lock's key prefix, which a due lease's key is made with.
    prefix: Arc<str>,
    limit: Duration,
    refused: Arc<AtomicBool>,
    pending: Arc<Pending>,
    /// The tracker's delay: zero reads each lease as soon as it is granted, unbatched.
    after: Duration,
    tracked: HashMap<String, Vec<Weak<Watched>>>,
}

type Pushes = mpsc::UnboundedReceiver<PushInfo>;

impl Task {
    /// Connects, serves, reconnects; ends when the `RedisLock` is gone or the server refused.
    async fn run(mut self, mut woken: mpsc::UnboundedReceiver<()>) {
        loop {
            let result = match self.connect().await {
                Ok((conn, pushes)) => self.serve(conn, pushes, &mut woken).await,
                Err(failure) => Err(failure),
            };
            match result {
                Ok(()) => return,
                Err(Failure::Refused(error)) => {
                    tracing::info!(%error, "the server refused CLIENT TRACKING: lost leases are seen at their next renewal");
                    self.refused.store(true, Ordering::Release);
                    return;
                }
                Err(Failure::Broken(error)) => {
                    tracing::debug!(%error, "the tracking connection failed; reconnecting");
                }
            }
            tokio::select! {
                () = tokio::time::sleep(RECONNECT_AFTER) => {}
                woke = woken.recv() => if woke.is_none() { return },
            }
        }
    }

    /// A RESP3 connection with tracking on, and every key watched so far read again (a key
    /// lost while no connection listened is reported now).
    async fn connect(&mut self) -> Result<(redis::aio::MultiplexedConnection, Pushes), Failure> {
        let client = match &mut *self.origin.lock().await {
            Origin::Client(client) => client.clone(),
            #[cfg(feature = "sentinel")]
            Origin::Sentinel(sentinel) => sentinel.async_get_client().await?,
            #[cfg(feature = "cluster")]
            Origin::Cluster(_) => unreachable!("no tracker is built for a cluster"),
        };
        let info = client.get_connection_info().clone();
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client = redis::Client::open(info.set_redis_settings(settings))?;
        let (push_tx, pushes) = mpsc::unbounded_channel();
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.limit))
            .set_response_timeout(Some(self.limit))
            .set_push_sender(push_tx);
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        redis::cmd("CLIENT")
            .arg("TRACKING")
            .arg("ON")
            .query_async::<()>(&mut conn)
            .await?;
        let keys: Vec<String> = self.tracked.keys().cloned().collect();
        self.check(&mut conn, keys).await?;
        Ok((conn, pushes))
    }

    /// One life of the connection: reads keys as their leases come due, and again on every
    /// invalidation. `Ok` when the `RedisLock` is gone.
    async fn serve(
        &mut self,
        mut conn: redis::aio::MultiplexedConnection,
        mut pushes: Pushes,
        woken: &mut mpsc::UnboundedReceiver<()>,
    ) -> Result<(), Failure> {
        loop {
            let next = self.next_due();
            tokio::select! {
                () = sleep_until(next) => {
                    let keys = self.take_due();
                    self.check(&mut conn, keys).await?;
                }
                woke = woken.recv() => if woke.is_none() { return Ok(()) },
                push = pushes.recv() => {
                    let Some(push) = push else { return Ok(()) };
                    // Every push already here is taken with it: a batch of renewals sends one
                    // invalidation per key, and one `MGET` reads them all.
                    let mut keys = Vec::new();
                    let mut next = Some(push);
                    while let Some(push) = next {
                        match push.kind {
                            PushKind::Invalidate => keys.extend(self.invalidated(&push.data)),
                            PushKind::Disconnection => return Err(disconnected()),
                            _ => {}
                        }
                        next = pushes.try_recv().ok();
                    }
                    keys.sort_unstable();
                    keys.dedup();
                    self.check(&mut conn, keys).await?;
                }
            }
        }
    }

    /// When the first pending registration is due, no earlier than a batch window from now;
    /// `None` while nothing is pending.
    fn next_due(&self) -> Option<Instant> {
        let queue = self
            .pending
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (due, _) = queue.front()?;
        // Without a delay every lease is read as soon as it is granted (what the delay saves).
        if self.after.is_zero() {
            return Some(*due);
        }
        Some((*due).max(Instant::now() + BATCH_WINDOW))
    }

    /// Moves the registrations due by now (and still held) into the tracked table; returns
    /// their keys, to be read.
    fn take_due(&mut self) -> Vec<String> {
        let now = Instant::now() + BATCH_WINDOW;
        let mut due = Vec::new();
        {
            let mut queue = self
                .pending
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            while queue.front().is_some_and(|(at, _)| *at <= now) {
                if let Some((_, watched)) = queue.pop_front() {
                    due.push(watched);
                }
            }
        }
        let mut keys = Vec::new();
        for weak in due {
            // Released before it came due: nothing to watch.
            let Some(watched) = weak.upgrade() else {
                continue;
            };
            let key = Keys::new(&self.prefix, watched.lease.name()).into_key();
            if let Some(watching) = self.tracked.get_mut(&key) {
                watching.push(weak);
                continue;
            }
            keys.push(key.clone());
            self.tracked.insert(key, vec![weak]);
        }
        keys
    }

    /// The watched keys an invalidation names (every watched key when it names none: the
    /// server flushed its table, e.g. after `FLUSHALL`).
    fn invalidated(&self, data: &[Value]) -> Vec<String> {
        match data.first() {
            Some(Value::Array(keys)) => keys
                .iter()
                .filter_map(|key| match key {
                    Value::BulkString(key) => std::str::from_utf8(key).ok(),
                    _ => None,
                })
                .filter(|key| self.tracked.contains_key(*key))
                .map(str::to_owned)
                .collect(),
            _ => self.tracked.keys().cloned().collect(),
        }
    }

    /// Reads `keys` (tracking them again) and reports every watching lease whose token is no
    /// longer there; forgets keys no lease watches any more.
    async fn check(
        &mut self,
        conn: &mut redis::aio::MultiplexedConnection,
        mut keys: Vec<String>,
    ) -> Result<(), Failure> {
        // Keys whose leases all ended need no read: the server forgets them at their next
        // write, and so do we, now.
        keys.retain(|key| match self.tracked.get_mut(key) {
            Some(watching) => {
                watching.retain(|weak| weak.strong_count() > 0);
                if watching.is_empty() {
                    self.tracked.remove(key);
                    false
                } else {
                    true
                }
            }
            None => false,
        });
        for chunk in keys.chunks(MAX_READ) {
            let values: Vec<Option<Vec<u8>>> =
                redis::cmd("MGET").arg(chunk).query_async(conn).await?;
            for (key, value) in chunk.iter().zip(values) {
                self.settle(key, value.as_deref());
            }
        }
        Ok(())
    }

    /// Calls the loss of every lease watching `key` whose token `value` is not; keeps the rest.
    fn settle(&mut self, key: &str, value: Option<&[u8]>) {
        let Some(watching) = self.tracked.get_mut(key) else {
            return;
        };
        watching.retain(|weak| {
            let Some(watched) = weak.upgrade() else {
                return false;
            };
            let ours = value == Some(token_value(watched.lease.token()).as_str().as_bytes());
            if !ours {
                (watched.on_loss)();
            }
            ours
        });
        if watching.is_empty() {
            self.tracked.remove(key);
        }
    }
}

/// The failure a `Disconnection` push stands for.
fn disconnected() -> Failure {
    Failure::Broken(redis::RedisError::from(std::io::Error::from(
        std::io::ErrorKind::ConnectionReset,
    )))
}

/// Resolves at `at`; never without a time.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
