//! The one place of shared setup for the `#[distributed_lock]` behaviour tests: every scenario
//! runs against a `MemoryLock` and against a real redis-server started for the test (stopped
//! by PID on drop).

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use distlock::backend::{Attempt, Holder, Lock};
use distlock::{Lease, LockError, Locker, MemoryLock, Token, redis::RedisLock};
use lock_testkit::RedisServer;
use tokio::time::Instant;

/// A generous bound for things that must happen "soon": only a broken lock reaches it.
pub(crate) const SOON: Duration = Duration::from_secs(10);

/// One backend under test.
pub(crate) struct Backend {
    pub(crate) locker: Locker,
    memory: Option<Arc<Stealable>>,
    server: Option<RedisServer>,
}

impl Backend {
    /// A locker over an in-process `MemoryLock`.
    pub(crate) fn memory() -> Self {
        Self::memory_with(|builder| builder)
    }

    /// A locker over `RedisLock` on a fresh redis-server.
    pub(crate) fn redis() -> Self {
        Self::redis_with(|builder| builder)
    }

    pub(crate) fn memory_with(
        configure: impl FnOnce(distlock::LockerBuilder) -> distlock::LockerBuilder,
    ) -> Self {
        let lock = Arc::new(Stealable::default());
        let locker = configure(distlock::LockerBuilder::from_arc(lock.clone())).build();
        Self {
            locker,
            memory: Some(lock),
            server: None,
        }
    }

    pub(crate) fn redis_with(
        configure: impl FnOnce(distlock::LockerBuilder) -> distlock::LockerBuilder,
    ) -> Self {
        let server = RedisServer::start().expect("start redis-server");
        let lock = RedisLock::builder()
            .url(server.url())
            .connect_timeout(Duration::from_secs(2))
            .command_timeout(Duration::from_secs(2))
            .build()
            .expect("valid URL");
        let locker = configure(Locker::builder(lock)).build();
        Self {
            locker,
            memory: None,
            server: Some(server),
        }
    }

    pub(crate) fn is_redis(&self) -> bool {
        self.server.is_some()
    }

    /// Takes the lock `name` away from its holder: the key is deleted (Redis) or every extend
    /// of it answers "not ours" (memory), so the next renewal finds the lease lost.
    pub(crate) fn steal(&self, name: &str) {
        if let Some(server) = &self.server {
            server.command(&["DEL", name]).expect("DEL");
        }
        if let Some(memory) = &self.memory {
            memory.steal(name);
        }
    }

    /// The key's remaining TTL as Redis reports it (`None` without Redis or without the key).
    pub(crate) fn redis_pttl(&self, name: &str) -> Option<Duration> {
        let server = self.server.as_ref()?;
        let pttl: i64 = server
            .command(&["PTTL", name])
            .expect("PTTL")
            .parse()
            .expect("a number");
        u64::try_from(pttl).ok().map(Duration::from_millis)
    }

    /// Whether another task can take `name` within `wait`.
    pub(crate) async fn free_within(&self, name: &str, wait: Duration) -> bool {
        let locker = self.locker.clone();
        let name = name.to_owned();
        tokio::spawn(async move {
            match locker.lock(name).wait(wait).acquire().await {
                Ok(guard) => {
                    guard.release().await.expect("release");
                    true
                }
                Err(LockError::Timeout { .. }) => false,
                Err(error) => panic!("unexpected: {error}"),
            }
        })
        .await
        .expect("no panic")
    }

    /// Whether `name` is free right now (one try, from another task).
    pub(crate) async fn is_free(&self, name: &str) -> bool {
        self.free_within(name, Duration::ZERO).await
    }

    /// Holds `name` from another task until the returned sender is dropped or sent to.
    pub(crate) async fn hold_elsewhere(&self, name: &str) -> tokio::sync::oneshot::Sender<()> {
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let (held, is_held) = tokio::sync::oneshot::channel();
        let locker = self.locker.clone();
        let name = name.to_owned();
        tokio::spawn(async move {
            let guard = locker.lock(name).acquire().await.expect("free");
            held.send(()).expect("waiting");
            let _ = released.await;
            guard.release().await.expect("release");
        });
        is_held.await.expect("held");
        release
    }
}

/// Runs `scenario` against both backends, each inside a tokio task (reentrancy is per task,
/// and a test's body is not a task).
pub(crate) async fn each_backend<F, Fut>(scenario: F)
where
    F: Fn(Arc<Backend>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    for backend in [Backend::memory(), Backend::redis()] {
        in_task(scenario(Arc::new(backend))).await;
    }
}

/// Runs `body` as a tokio task and waits for it, propagating a panic.
pub(crate) async fn in_task<Fut: Future<Output = ()> + Send + 'static>(body: Fut) {
    if let Err(error) = tokio::spawn(body).await {
        std::panic::resume_unwind(error.into_panic());
    }
}

/// Time left on the current locked function's lease, as this process sees it.
pub(crate) fn lease_left() -> Duration {
    distlock::current_lease()
        .expect("inside a locked fn")
        .valid_until()
        .saturating_duration_since(Instant::now())
}

/// `MemoryLock` with a switch per name that makes extends answer "not ours".
#[derive(Default)]
pub(crate) struct Stealable {
    inner: MemoryLock,
    stolen: Mutex<HashSet<String>>,
}

impl Stealable {
    fn steal(&self, name: &str) {
        self.stolen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned());
    }

    fn is_stolen(&self, name: &str) -> bool {
        self.stolen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(name)
    }
}

#[async_trait]
impl Lock for Stealable {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.inner.try_acquire(name, token, ttl).await
    }

    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        if self.is_stolen(lease.name()) {
            return Ok(None);
        }
        self.inner.extend(lease, ttl).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.inner.release(lease).await
    }

    /// What the store says of the holder (its TTL as the store keeps it).
    async fn describe_holder(&self, name: &str) -> Result<Option<Holder>, LockError> {
        self.inner.describe_holder(name).await
    }
}

/// An application error type, as a service would have.
#[derive(Debug)]
pub(crate) enum AppError {
    Lock(LockError),
    Invalid(#[expect(dead_code, reason = "read only through `Debug`, in failure messages")] String),
}

impl From<LockError> for AppError {
    fn from(error: LockError) -> Self {
        Self::Lock(error)
    }
}
