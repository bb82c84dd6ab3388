//! In-process nodes for the quorum tests: `MemoryLock`s that can be made slow or failing.
//! Time is tokio's paused clock in those tests, so every delay is exact and nothing flakes.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Lock, ReleaseSignal, ReleaseWatch};
use lock_core::{Lease, LockError, MemoryLock, Op, Token};
use lock_redlock::Redlock;
use tokio::time::{Instant, sleep};

/// How a [`Scripted`] node behaves, for every operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Behavior {
    /// Like `MemoryLock`.
    #[default]
    Normal,
    /// Sleeps, then applies the operation (a request slow to arrive).
    DelayBefore(Duration),
    /// Applies the operation, then sleeps before answering (a reply slow to come back).
    DelayAfter(Duration),
    /// Only acquires: sleeps, then applies (extend and release are prompt). A request stuck
    /// on its way while later ones on other connections overtake it.
    SlowAcquire(Duration),
    /// Answers with a backend error without applying anything.
    Fail { retryable: bool },
    /// Sleeps, then answers with a retryable backend error without applying anything (a node
    /// that is down: the connection attempt takes a while to be refused).
    FailAfter(Duration),
    /// Refuses the input.
    Invalid,
    /// Answers every acquire busy without applying it (extend and release are normal): a node
    /// that grants nothing for now, as a `RedisLock` in its grace period after data loss.
    RefuseAcquire,
}

/// A `MemoryLock` with a scripted behaviour and call counters.
#[derive(Debug, Default)]
pub struct Scripted {
    pub inner: MemoryLock,
    behavior: Mutex<Behavior>,
    pub acquires: AtomicU32,
    pub extends: AtomicU32,
    pub releases: AtomicU32,
    /// When set, `watch` subscribes to this signal (bump it to announce a release).
    pub announcer: Mutex<Option<ReleaseSignal>>,
}

impl Scripted {
    pub fn new(behavior: Behavior) -> Arc<Self> {
        Arc::new(Self {
            behavior: Mutex::new(behavior),
            ..Self::default()
        })
    }

    /// Makes `watch` answer with a subscription to the returned signal.
    pub fn announce(&self) -> ReleaseSignal {
        let signal = ReleaseSignal::new();
        *self
            .announcer
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(signal.clone());
        signal
    }

    pub fn set(&self, behavior: Behavior) {
        *self.behavior.lock().unwrap_or_else(PoisonError::into_inner) = behavior;
    }

    fn behavior(&self) -> Behavior {
        *self.behavior.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Locks held on this node right now.
    pub fn held(&self) -> usize {
        self.inner.held_count()
    }

    pub fn calls(&self) -> (u32, u32, u32) {
        (
            self.acquires.load(Ordering::SeqCst),
            self.extends.load(Ordering::SeqCst),
            self.releases.load(Ordering::SeqCst),
        )
    }

    async fn run<T>(
        &self,
        op: Op,
        apply: impl Future<Output = Result<T, LockError>>,
    ) -> Result<T, LockError> {
        match self.behavior() {
            Behavior::SlowAcquire(d) if op == Op::Acquire => {
                sleep(d).await;
                apply.await
            }
            Behavior::Normal | Behavior::SlowAcquire(_) | Behavior::RefuseAcquire => apply.await,
            Behavior::DelayBefore(d) => {
                sleep(d).await;
                apply.await
            }
            Behavior::DelayAfter(d) => {
                let answer = apply.await;
                sleep(d).await;
                answer
            }
            Behavior::Fail { retryable } => Err(failure(op, retryable)),
            Behavior::FailAfter(d) => {
                sleep(d).await;
                Err(failure(op, true))
            }
            Behavior::Invalid => Err(LockError::invalid("scripted: bad name")),
        }
    }
}

fn failure(op: Op, retryable: bool) -> LockError {
    LockError::Backend {
        backend: "scripted",
        op,
        retryable,
        source: "scripted failure".into(),
    }
}

#[async_trait]
impl Lock for Scripted {
    fn backend(&self) -> &'static str {
        "scripted"
    }

    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.acquires.fetch_add(1, Ordering::SeqCst);
        if self.behavior() == Behavior::RefuseAcquire {
            return Ok(Attempt::Busy {
                holder_ttl: None,
                announces: false,
            });
        }
        self.run(Op::Acquire, self.inner.try_acquire(name, token, ttl))
            .await
    }

    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.extends.fetch_add(1, Ordering::SeqCst);
        self.run(Op::Extend, self.inner.extend(lease, ttl)).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        self.run(Op::Release, self.inner.release(lease)).await
    }

    async fn watch(&self, _name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        let signal = self
            .announcer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.run(Op::Connect, async move {
            Ok(signal.map(|s| ReleaseWatch::new(s, ())))
        })
        .await
    }
}

/// `n` normal nodes.
pub fn nodes(n: usize) -> Vec<Arc<Scripted>> {
    (0..n).map(|_| Scripted::new(Behavior::Normal)).collect()
}

/// Nodes with the given behaviours.
pub fn scripted(behaviors: &[Behavior]) -> Vec<Arc<Scripted>> {
    behaviors.iter().map(|b| Scripted::new(*b)).collect()
}

/// A Redlock over `nodes` with the default settings.
pub fn redlock(nodes: &[Arc<Scripted>]) -> Redlock {
    builder(nodes).build().expect("valid Redlock")
}

/// A builder over `nodes`, to adjust before building.
pub fn builder(nodes: &[Arc<Scripted>]) -> lock_redlock::RedlockBuilder {
    nodes.iter().fold(Redlock::builder(), |b, n| {
        b.node_arc(Arc::clone(n) as Arc<dyn Lock>)
    })
}

/// Locks held on each node.
pub fn held(nodes: &[Arc<Scripted>]) -> Vec<usize> {
    nodes.iter().map(|n| n.held()).collect()
}

/// Takes `name` on one node directly, for another holder, for `ttl`.
pub async fn hold_directly(node: &Scripted, name: &str, ttl: Duration) {
    let token = Token::generate().expect("rng");
    let attempt = node
        .inner
        .try_acquire(name, token, ttl)
        .await
        .expect("memory");
    assert!(matches!(attempt, Attempt::Acquired(_)), "{attempt:?}");
}

/// Lets every background round run to its end (the paused clock jumps over the sleeps).
pub async fn settle() {
    sleep(Duration::from_secs(5)).await;
}

/// The `QuorumNotReached` inside a Redlock error, if that is what it is.
pub fn quorum_error(error: &LockError) -> Option<&lock_redlock::QuorumNotReached> {
    std::error::Error::source(error)?.downcast_ref()
}

pub const MS: Duration = Duration::from_millis(1);

/// Elapsed since `t`, on tokio's clock.
pub fn since(t: Instant) -> Duration {
    Instant::now() - t
}
