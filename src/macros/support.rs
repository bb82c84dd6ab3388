//! What the expansion of `#[distributed_lock]` calls. Not a public API: it changes with the
//! macro, which always names it through `::distlock::__private`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lock_core::{
    Guard, LeaseWatch, LockError, LockRequest, Locker, MIN_TTL, MultiRequest, TimeoutPhase,
};
use tokio::time::Instant;

use super::current::CURRENT;
use super::default_locker::default_locker;

/// What one `#[distributed_lock]` locks: its `read`, `write`, `permits` and `max` options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// No kind option: the exclusive lock ([`Locker::lock`]).
    Mutex,
    /// `read`: a read share ([`Locker::read`]).
    Read,
    /// `write`: the write lock ([`Locker::write`]).
    Write,
    /// `fair`: the exclusive lock in the order callers asked ([`Locker::fair`]).
    Fair,
    /// `max = n` (and `permits = k`): `permits` of the `max` permits ([`Locker::semaphore`]).
    Semaphore {
        /// The permits a call takes at once (1 to `max`).
        permits: u32,
        /// The permits the semaphore has.
        max: u32,
    },
}

impl LockKind {
    /// The request for the lock `name` of this kind.
    fn request(self, locker: &Locker, name: Arc<str>) -> LockRequest {
        match self {
            Self::Mutex => locker.lock(name),
            Self::Read => locker.read(name),
            Self::Write => locker.write(name),
            Self::Fair => locker.fair(name),
            Self::Semaphore { permits, max } => locker.semaphore(name, max).permits(permits),
        }
    }
}

/// The options of one `#[distributed_lock]`, checked at compile time (for a list of templates
/// the kind is always [`LockKind::Mutex`]).
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The metrics label: the `name` option, else the template (the templates joined with `+`).
    pub label: &'static str,
    /// What is locked: the mutex, a side of a read-write lock, or semaphore permits.
    pub kind: LockKind,
    /// A fixed lease; `None` for a renewed one.
    pub ttl: Option<Duration>,
    /// The wait; `None` for the locker's default.
    pub wait: Option<Duration>,
    /// Stop renewing this long after the grant.
    pub max_hold: Option<Duration>,
    /// Keep the lock at least this long after the grant (fixed leases only).
    pub min_hold: Option<Duration>,
    /// Keep the name this long after a lease that ended by expiry (`LockRequest::lock_delay`).
    pub lock_delay: Option<Duration>,
    /// Whether a refusal skips the body (logged here) rather than being returned as an error.
    pub skip: bool,
    /// Whether the lock is tied to the process's stop signal (`LockRequest::stop_on`).
    pub stop_on_shutdown: bool,
}

/// Runs `work` under the lock `name`: through `locker`, or the default locker when `None`.
///
/// # Errors
/// Those of [`LockRequest::run`], and [`LockError::InvalidInput`] when no locker was given and
/// no default is installed.
///
/// # Cancel safety
/// Cancel safe: dropped, the work is dropped and the lock released in the background.
pub async fn run<T, F, Fut>(
    locker: Option<Locker>,
    name: String,
    spec: Spec,
    work: F,
) -> Result<T, LockError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let name: Arc<str> = name.into();
    let result = locked(locker, Arc::clone(&name), &spec, work).await;
    if let (true, Err(error)) = (spec.skip, &result) {
        report_skipped(&spec, &name, error);
    }
    result
}

async fn locked<T, F, Fut>(
    locker: Option<Locker>,
    name: Arc<str>,
    spec: &Spec,
    work: F,
) -> Result<T, LockError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let locker = match locker {
        Some(locker) => locker,
        None => default_locker()?,
    };
    let mut request = spec.kind.request(&locker, name).label(spec.label);
    if let Some(ttl) = spec.ttl {
        request = request.fixed_ttl(ttl);
    }
    if let Some(wait) = spec.wait {
        // A zero wait (`skip`, `wait = "0s"`) is one try: lock-core records no waiting
        // writer for it.
        request = request.wait(wait);
    }
    if let Some(max_hold) = spec.max_hold {
        request = request.max_hold(max_hold);
    }
    if let Some(delay) = spec.lock_delay {
        request = request.lock_delay(delay);
    }
    if spec.stop_on_shutdown {
        request = request.stop_on(crate::shutdown());
    }
    match spec.min_hold {
        None => {
            request
                .run(|lease| CURRENT.scope(Arc::from([lease]), work()))
                .await
        }
        Some(min_hold) => run_holding(request, min_hold, work).await,
    }
}

/// Runs `work` holding every lock of `names` at once (a multi-lock, [`Locker::lock_all`]):
/// through `locker`, or the default locker when `None`. `names` are the rendered templates in
/// the order written; the body's [`current_leases`](crate::current_leases) follow that order.
///
/// # Errors
/// Those of [`MultiRequest::run`], and [`LockError::InvalidInput`] when no locker was given and
/// no default is installed.
///
/// # Cancel safety
/// Cancel safe: dropped, the work is dropped and the locks released in the background.
pub async fn run_all<T, F, Fut>(
    locker: Option<Locker>,
    names: Vec<String>,
    spec: Spec,
    work: F,
) -> Result<T, LockError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    debug_assert_eq!(
        spec.kind,
        LockKind::Mutex,
        "a multi-lock takes mutexes only"
    );
    let names: Vec<Arc<str>> = names.into_iter().map(Arc::from).collect();
    let result = locked_all(locker, &names, &spec, work).await;
    if let (true, Err(error)) = (spec.skip, &result) {
        report_skipped(&spec, &names.join(", "), error);
    }
    result
}

async fn locked_all<T, F, Fut>(
    locker: Option<Locker>,
    names: &[Arc<str>],
    spec: &Spec,
    work: F,
) -> Result<T, LockError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let locker = match locker {
        Some(locker) => locker,
        None => default_locker()?,
    };
    let mut request = locker.lock_all(names.iter().cloned()).label(spec.label);
    if let Some(ttl) = spec.ttl {
        request = request.fixed_ttl(ttl);
    }
    if let Some(wait) = spec.wait {
        request = request.wait(wait);
    }
    if let Some(max_hold) = spec.max_hold {
        request = request.max_hold(max_hold);
    }
    if let Some(delay) = spec.lock_delay {
        request = request.lock_delay(delay);
    }
    if spec.stop_on_shutdown {
        request = request.stop_on(crate::shutdown());
    }
    match spec.min_hold {
        None => {
            request
                .run(|leases| CURRENT.scope(in_template_order(names, &leases), work()))
                .await
        }
        Some(min_hold) => run_all_holding(request, names, min_hold, work).await,
    }
}

/// The leases of a multi-lock (one per distinct name, sorted) rearranged to follow the
/// templates: one per rendered name, a repeated name's lease at each of its places.
fn in_template_order(names: &[Arc<str>], leases: &[LeaseWatch]) -> Arc<[LeaseWatch]> {
    names
        .iter()
        .filter_map(|name| leases.iter().find(|lease| lease.name() == &**name).cloned())
        .collect()
}

/// [`MultiRequest::run`], except that on a normal finish every lock is kept until `min_hold`
/// after the grant instead of being released.
async fn run_all_holding<T, F, Fut>(
    request: MultiRequest,
    names: &[Arc<str>],
    min_hold: Duration,
    work: F,
) -> Result<T, LockError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let guard = request.acquire().await?;
    let keep_until = Instant::now() + min_hold;
    let lost = guard.lost();
    let leases: Vec<LeaseWatch> = guard.guards().iter().map(Guard::lease_watch).collect();
    let work = CURRENT.scope(in_template_order(names, &leases), work());
    tokio::select! {
        biased;
        name = lost => {
            drop(guard);
            Err(LockError::Lost { name })
        }
        out = work => {
            // Each lease is shortened to end at the same instant; the first failure is
            // reported after all of them were handled.
            let mut result = Ok(());
            for guard in guard.into_guards() {
                let kept = keep(guard, keep_until).await;
                if result.is_ok() {
                    result = kept;
                }
            }
            result.map(|()| out)
        }
    }
}

/// [`LockRequest::run`], except that on a normal finish the lock is kept until `min_hold`
/// after the grant instead of being released.
async fn run_holding<T, F, Fut>(
    request: LockRequest,
    min_hold: Duration,
    work: F,
) -> Result<T, LockError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let guard = request.acquire().await?;
    let keep_until = Instant::now() + min_hold;
    let lost = guard.lost();
    let work = CURRENT.scope(Arc::from([guard.lease_watch()]), work());
    tokio::select! {
        biased;
        () = lost => {
            let name = guard.name().to_owned();
            drop(guard);
            Err(LockError::Lost { name })
        }
        out = work => keep(guard, keep_until).await.map(|()| out),
    }
}

/// Shortens the lease to end at `until` and leaves it to expire there; releases it when that is
/// already past. A nested guard is left to the outer call. Like [`LockRequest::run`], a lease
/// found no longer ours is [`LockError::NotOwned`]; other failures are logged.
async fn keep(mut guard: Guard, until: Instant) -> Result<(), LockError> {
    if guard.is_nested() {
        return Ok(());
    }
    let left = until.saturating_duration_since(Instant::now());
    let left = Duration::from_millis(u64::try_from(left.as_millis()).unwrap_or(u64::MAX));
    if left >= MIN_TTL {
        match guard.extend(left).await {
            Ok(()) => {
                let _lease = guard.leak();
                return Ok(());
            }
            Err(error @ LockError::NotOwned { .. }) => return Err(error),
            Err(error) => tracing::warn!(
                name = guard.name(),
                %error,
                "could not keep the lock for its min_hold; releasing it"
            ),
        }
    }
    match guard.release().await {
        Err(error @ LockError::NotOwned { .. }) => Err(error),
        Err(error) => {
            tracing::warn!(%error, "release after the work failed; the lock expires at the end of its lease");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

fn report_skipped(spec: &Spec, name: &str, error: &LockError) {
    match error {
        LockError::Timeout {
            phase: TimeoutPhase::Wait,
            ..
        }
        | LockError::Busy { .. } => {
            tracing::debug!(
                lock = spec.label,
                name,
                "the lock is held elsewhere: skipped"
            );
        }
        LockError::Lost { .. } => tracing::warn!(
            lock = spec.label,
            name,
            %error,
            "the lease was lost: the body was cancelled"
        ),
        LockError::Stopped { .. } => tracing::info!(
            lock = spec.label,
            name,
            "the process is stopping: the body was cancelled and the lock released"
        ),
        _ => tracing::error!(
            lock = spec.label,
            name,
            %error,
            "the lock could not be taken: skipped"
        ),
    }
}

/// What `locker = ..` accepts.
#[diagnostic::on_unimplemented(
    message = "`locker = ..` must be a `distlock::Locker`, a reference to one, or an `Arc` or `Box` of one; `{Self}` is none of these",
    label = "not a `Locker`"
)]
pub trait AsLocker {
    /// The locker.
    fn as_locker(&self) -> &Locker;
}

impl AsLocker for Locker {
    fn as_locker(&self) -> &Locker {
        self
    }
}

impl<T: AsLocker + ?Sized> AsLocker for &T {
    fn as_locker(&self) -> &Locker {
        (**self).as_locker()
    }
}

impl<T: AsLocker + ?Sized> AsLocker for &mut T {
    fn as_locker(&self) -> &Locker {
        (**self).as_locker()
    }
}

impl<T: AsLocker + ?Sized> AsLocker for Arc<T> {
    fn as_locker(&self) -> &Locker {
        (**self).as_locker()
    }
}

impl<T: AsLocker + ?Sized> AsLocker for Box<T> {
    fn as_locker(&self) -> &Locker {
        (**self).as_locker()
    }
}

/// The locker `locker = ..` names (a clone: one `Arc`).
pub fn locker<L: AsLocker + ?Sized>(locker: &L) -> Locker {
    locker.as_locker().clone()
}

/// The output of a function that returns lock failures as errors.
#[diagnostic::on_unimplemented(
    message = "`#[distributed_lock]` needs a function returning `Result<_, E>` with `E: From<distlock::LockError>`, not `{Self}`",
    label = "lock failures are returned through this type",
    note = "or add `skip`, for a function returning `()` or `Option<_>` whose body is skipped when the lock is busy"
)]
pub trait LockResult {
    /// The error, converted.
    fn from_lock_error(error: LockError) -> Self;
}

impl<T, E: From<LockError>> LockResult for Result<T, E> {
    fn from_lock_error(error: LockError) -> Self {
        Err(E::from(error))
    }
}

/// The output of a `skip` function whose body did not run.
#[diagnostic::on_unimplemented(
    message = "`#[distributed_lock(.., skip)]` needs a function returning `()` or `Option<_>`, not `{Self}`",
    label = "cannot say that the body was skipped",
    note = "without `skip`, lock failures are returned as errors: return `Result<_, E>` with `E: From<distlock::LockError>`"
)]
pub trait Skippable {
    /// The value that says "skipped".
    fn skipped() -> Self;
}

impl Skippable for () {
    fn skipped() -> Self {}
}

impl<T> Skippable for Option<T> {
    fn skipped() -> Self {
        None
    }
}
