//! Work driven by its caller, and finished in the background if the caller drops it.
//!
//! A backend's operation often starts I/O that must be seen through even when nobody waits for
//! it any more: a grant that may land after its caller timed out or was cancelled has to be
//! released, the stragglers of a quorum round still have to be counted and cleaned up. Running
//! every such operation in a task of its own would cost a spawn on the way of every call;
//! running it only in the caller's task would strand that work when the caller stops polling.
//! [`Detached`] does both: the caller drives the work while it waits (no task, no allocation
//! beyond the work itself), and whatever is left when the caller drops it goes on in a task.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Work that can be handed over to the background: what is left of it once its caller has
/// dropped it.
///
/// Implemented by [`Work`] (a future, the common case) and by a backend's own state when the
/// caller drives it through methods of its own (as lock-redlock's rounds do).
pub trait Detach: Send + 'static {
    /// Called once, synchronously, when the [`Detached`] holding the work is dropped before the
    /// work finished. What must be in place before the caller's drop returns (say, a
    /// registration the caller's next call must see) is done here; the future returned is what
    /// is left to run, `None` when nothing is.
    fn detach(self) -> Option<impl Future<Output = ()> + Send + 'static>
    where
        Self: Sized;
}

/// Work driven by the caller, finished in the background if dropped.
///
/// The caller polls the work while it waits for it, in its own task: a call whose work
/// completes while the caller waits spawns nothing. When the `Detached` is dropped with work
/// left (the caller timed out, was cancelled, or took an early answer and left the rest), the
/// work's [`Detach::detach`] runs in the drop, and the future it returns is spawned on the
/// current tokio runtime, where it runs to its end without anyone waiting for it.
///
/// A future is wrapped with [`Detached::future`]; the result is itself a future that yields
/// the work's output to the caller. What happens to an output the caller never received (it
/// dropped the work first) is up to the [`leftover`](Detached::leftover) hook: a backend
/// releases there a lease granted to a caller that is gone.
///
/// # Runtime
/// The rest is spawned with [`tokio::spawn`] semantics on the runtime current at the drop
/// ([`Handle::try_current`](tokio::runtime::Handle::try_current)), so it runs on the same
/// runtime as the caller. Dropped outside any runtime (one that is shutting down drops its
/// tasks' futures outside it), [`Detach::detach`] still runs, but the future it returns is
/// dropped unrun: work such as a grant nobody received then ends the way it would after a
/// crash (a lease at its TTL).
///
/// # Cancel safety
/// Cancel safe by construction: dropping a `Detached` (or a future that holds one) before it
/// completes hands the rest of the work to the background rather than abandoning it. The
/// caller does not see the work's output then; the [`leftover`](Detached::leftover) hook does.
///
/// ```
/// use std::time::Duration;
/// use lock_core::backend::Detached;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (answer, answered) = tokio::sync::oneshot::channel::<()>();
/// let (give_back, given_back) = tokio::sync::oneshot::channel();
/// let grant = Detached::future(async move {
///     drop(answered.await); // a slow server
///     "lease"
/// })
/// // The caller gave up before the grant answered: give the lease back.
/// .leftover(move |lease| async move {
///     let _ = give_back.send(lease);
/// });
/// // The caller times out and drops `grant`: the rest goes on in a task of its own.
/// assert!(tokio::time::timeout(Duration::from_millis(10), grant).await.is_err());
/// answer.send(()).expect("the grant is still running");
/// assert_eq!(given_back.await, Ok("lease"));
/// # }
/// ```
#[must_use = "work that nobody polls only runs once it is dropped"]
pub struct Detached<W: Detach> {
    /// `None` once the work has completed in the caller's task (or after the drop).
    work: Option<W>,
}

impl<W: Detach> Detached<W> {
    /// Holds `work` for the caller to drive; see [`Detached`].
    pub fn new(work: W) -> Self {
        Self { work: Some(work) }
    }

    /// The work, for the caller to drive it.
    ///
    /// # Panics
    /// When the work has completed ([`Detached::future`] only, after it yielded its output).
    pub fn work_mut(&mut self) -> &mut W {
        match self.work.as_mut() {
            Some(work) => work,
            None => panic!("`Detached` used after its work completed"),
        }
    }
}

impl<W: Detach> Drop for Detached<W> {
    fn drop(&mut self) {
        let Some(rest) = self.work.take().and_then(Detach::detach) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            drop(runtime.spawn(rest));
        }
        // Else no runtime is left to run it on: dropped (see "Runtime" above).
    }
}

impl<W: Detach> fmt::Debug for Detached<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Detached")
            .field("completed", &self.work.is_none())
            .finish_non_exhaustive()
    }
}

type BoxedFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Leftover<T> = Box<dyn FnOnce(T) -> BoxedFuture<()> + Send>;

/// A future as [`Detach`] work, with what to do with an output nobody received; built by
/// [`Detached::future`].
pub struct Work<T> {
    future: BoxedFuture<T>,
    leftover: Option<Leftover<T>>,
}

impl<T: Send + 'static> Detach for Work<T> {
    fn detach(self) -> Option<impl Future<Output = ()> + Send + 'static> {
        let Self { future, leftover } = self;
        Some(async move {
            let output = future.await;
            if let Some(leftover) = leftover {
                leftover(output).await;
            }
        })
    }
}

impl<T> fmt::Debug for Work<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Work")
            .field("leftover", &self.leftover.is_some())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Detached<Work<T>> {
    /// Wraps `future`: awaited, it yields the future's output; dropped before, the future runs
    /// on in a task of its own (see [`Detached`]) and its output goes to the
    /// [`leftover`](Self::leftover) hook, or is dropped without one.
    pub fn future(future: impl Future<Output = T> + Send + 'static) -> Self {
        Self::new(Work {
            future: Box::pin(future),
            leftover: None,
        })
    }

    /// What to do, in the background task, with the output of a future whose caller dropped
    /// it first (release what nobody received). Runs after the future completes, and only
    /// then: never when the caller received the output, nor when no runtime was left to finish
    /// the work.
    pub fn leftover<L, F>(mut self, hook: L) -> Self
    where
        L: FnOnce(T) -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        self.work_mut().leftover = Some(Box::new(move |output| Box::pin(hook(output))));
        self
    }
}

impl<T: Send + 'static> Future for Detached<Work<T>> {
    type Output = T;

    /// # Panics
    /// When polled again after it completed.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let output = std::task::ready!(self.work_mut().future.as_mut().poll(cx));
        // Completed in the caller's task: nothing left for the background.
        self.work = None;
        Poll::Ready(output)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;

    /// Counts the runs of a leftover hook.
    fn counted(
        runs: &Arc<AtomicUsize>,
    ) -> impl FnOnce(u32) -> std::future::Ready<()> + Send + use<> {
        let runs = Arc::clone(runs);
        move |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            std::future::ready(())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn dropped_before_completion_it_finishes_in_the_background_and_runs_the_leftover() {
        let (release, released) = oneshot::channel();
        let (go, wait) = oneshot::channel::<()>();
        let work = Detached::future(async move {
            drop(wait.await);
            7_u32
        })
        .leftover(move |output| async move {
            let _ = release.send(output);
        });
        // The caller stops waiting before the work can complete.
        assert!(
            tokio::time::timeout(Duration::ZERO, work).await.is_err(),
            "the work cannot complete before `go`"
        );
        go.send(()).expect("the background task holds the work");
        assert_eq!(released.await, Ok(7), "the leftover hook got the output");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn completion_delivers_the_output_to_the_caller_and_not_to_the_leftover() {
        let runs = Arc::new(AtomicUsize::new(0));
        let work = Detached::future(async {
            tokio::task::yield_now().await;
            7_u32
        })
        .leftover(counted(&runs));
        assert_eq!(work.await, 7);
        tokio::task::yield_now().await;
        assert_eq!(runs.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn work_completed_inline_spawns_nothing() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let runs = Arc::new(AtomicUsize::new(0));
        runtime.block_on(async {
            let mut work = Detached::future(std::future::ready(7_u32)).leftover(counted(&runs));
            assert_eq!((&mut work).await, 7);
            drop(work);
            assert_eq!(
                tokio::runtime::Handle::current()
                    .metrics()
                    .num_alive_tasks(),
                0
            );
        });
        assert_eq!(runs.load(Ordering::SeqCst), 0);
    }

    /// Work with a state of its own: `detach` runs in the drop, before it returns.
    struct Rounds {
        detached: Arc<AtomicUsize>,
        left: bool,
    }

    impl Detach for Rounds {
        fn detach(self) -> Option<impl Future<Output = ()> + Send + 'static> {
            self.detached.fetch_add(1, Ordering::SeqCst);
            self.left.then_some(async move {
                self.detached.fetch_add(10, Ordering::SeqCst);
            })
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn detach_runs_in_the_drop_and_its_rest_in_a_task() {
        let detached = Arc::new(AtomicUsize::new(0));
        let nothing_left = Detached::new(Rounds {
            detached: Arc::clone(&detached),
            left: false,
        });
        drop(nothing_left);
        assert_eq!(detached.load(Ordering::SeqCst), 1, "detached synchronously");
        assert_eq!(
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
            0
        );

        let some_left = Detached::new(Rounds {
            detached: Arc::clone(&detached),
            left: true,
        });
        drop(some_left);
        assert_eq!(
            detached.load(Ordering::SeqCst),
            2,
            "the rest has not run yet"
        );
        tokio::task::yield_now().await;
        assert_eq!(
            detached.load(Ordering::SeqCst),
            12,
            "the rest ran in a task"
        );
    }

    #[test]
    fn without_a_runtime_the_rest_is_dropped_unrun() {
        let runs = Arc::new(AtomicUsize::new(0));
        let work = Detached::future(std::future::pending::<u32>()).leftover(counted(&runs));
        drop(work);
        assert_eq!(runs.load(Ordering::SeqCst), 0);
    }
}
