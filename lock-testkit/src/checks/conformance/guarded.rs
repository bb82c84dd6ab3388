//! Guarded writes: the fence a backend's crate ships for the store it locks on (the capability
//! table's `guarded_writes`), through the same [`Fence`] on every backend. A holder paused past
//! its lease has its late write refused with [`LockError::Fenced`] once its successor wrote;
//! an equal token is accepted (one holder writes many times under one grant); every
//! successor's write applies. The rule is lock-core's [`Fence`] (Kleppmann, "How to do
//! distributed locking", 2016).
//!
//! A runner gives the suite its store's fence as [`GuardedWrites`]
//! ([`Backend::with_guarded_writes`]): a write of a value to a resource through the fence, and a
//! read of what the resource holds.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use lock_core::{Fence, Guard, LockError};

use super::{Backend, name};

/// A fenced write of a value to a resource, as a runner makes it.
type Write = Arc<dyn Fn(Fence, String) -> BoxFuture<'static, Result<(), LockError>> + Send + Sync>;
/// A read of what a resource holds (`None`: never written).
type Read = Arc<dyn Fn(String) -> BoxFuture<'static, Option<String>> + Send + Sync>;

/// A runner's way to write to its store through the backend's fence, and to read back.
#[derive(Clone)]
pub struct GuardedWrites {
    write: Write,
    read: Read,
}

impl GuardedWrites {
    /// `write(fence, value)` writes `value` to `fence.resource` through the backend's fence
    /// (`Ok` when admitted, [`LockError::Fenced`] when refused, nothing applied then);
    /// `read(resource)` answers what `resource` holds.
    pub fn new<W, WF, R, RF>(write: W, read: R) -> Self
    where
        W: Fn(Fence, String) -> WF + Send + Sync + 'static,
        WF: Future<Output = Result<(), LockError>> + Send + 'static,
        R: Fn(String) -> RF + Send + Sync + 'static,
        RF: Future<Output = Option<String>> + Send + 'static,
    {
        Self {
            write: Arc::new(move |fence, value| Box::pin(write(fence, value))),
            read: Arc::new(move |resource| Box::pin(read(resource))),
        }
    }

    async fn write(&self, fence: &Fence, value: &str) -> Result<(), LockError> {
        (self.write)(fence.clone(), value.to_owned()).await
    }

    async fn read(&self, resource: &str) -> Option<String> {
        (self.read)(resource.to_owned()).await
    }
}

impl fmt::Debug for GuardedWrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedWrites").finish_non_exhaustive()
    }
}

/// The runner's fence, which a backend that declares guarded writes must be given.
fn writes(backend: &Backend) -> &GuardedWrites {
    backend.guarded_writes().unwrap_or_else(|| {
        panic!(
            "the backend declares guarded writes: its runner gives them with \
             `Backend::with_guarded_writes`"
        )
    })
}

/// A grant of `name` on a locker of its own, for a fixed `ttl`, within the patience.
async fn hold(backend: &Backend, name: &str, ttl: std::time::Duration) -> Guard {
    let request = backend.locker().lock(name).fixed_ttl(ttl);
    backend
        .within(
            &format!("taking {name}"),
            request.wait(backend.patience).into_future(),
        )
        .await
        .unwrap_or_else(|e| panic!("take {name}: {e}"))
}

/// A holder writes, then stops (no call) past its short lease; a successor takes the name and
/// writes; the first holder's late write is refused with [`LockError::Fenced`] naming its token
/// and the successor's, and the resource keeps the successor's value.
pub async fn late_write_of_a_paused_holder_is_fenced(backend: &Backend, prefix: &str) {
    let writes = writes(backend);
    let (name, resource) = (name(prefix, "paused"), name(prefix, "paused-data"));
    let first = hold(backend, &name, backend.short_ttl).await;
    let fence = first.fence().for_resource(resource.as_str());
    writes
        .write(&fence, "first")
        .await
        .expect("the holder's write applies");
    // Paused: the first holder makes no call while its lease runs out and a successor is
    // granted (the successor's wait covers the rest of the lease).
    let successor = hold(backend, &name, backend.patience).await;
    let next = successor.fence().for_resource(resource.as_str());
    assert!(next.token > fence.token, "{next} after {fence}");
    writes
        .write(&next, "second")
        .await
        .expect("the successor's write applies");
    match writes.write(&fence, "late").await {
        Err(LockError::Fenced {
            resource: refused,
            token,
            current,
        }) => {
            assert_eq!(refused, resource, "the refusal names the resource");
            assert_eq!(token, fence.token, "the refusal names the late token");
            assert!(current >= next.token, "and the record: {current} < {next}");
        }
        other => panic!("a late write of a paused holder was not fenced: {other:?}"),
    }
    assert_eq!(
        writes.read(&resource).await.as_deref(),
        Some("second"),
        "the refused write left something behind"
    );
    successor.release().await.expect("ours");
    drop(first);
}

/// One holder writes three times under one grant, with one token: every write applies.
pub async fn equal_token_is_accepted(backend: &Backend, prefix: &str) {
    let writes = writes(backend);
    let (name, resource) = (name(prefix, "equal"), name(prefix, "equal-data"));
    let guard = hold(backend, &name, backend.patience).await;
    let fence = guard.fence().for_resource(resource.as_str());
    for value in ["one", "two", "three"] {
        writes
            .write(&fence, value)
            .await
            .unwrap_or_else(|e| panic!("the holder's write {value:?} under one grant: {e}"));
    }
    assert_eq!(writes.read(&resource).await.as_deref(), Some("three"));
    guard.release().await.expect("ours");
}

/// Holders on lockers of their own take the name one after the other, each writing once: every
/// write applies, and the resource holds the last one's; the first holder's token, after them
/// all, is refused.
pub async fn every_successors_write_applies(backend: &Backend, prefix: &str) {
    let writes = writes(backend);
    let (name, resource) = (name(prefix, "turns"), name(prefix, "turns-data"));
    let mut first = None;
    for turn in 0..4 {
        let guard = hold(backend, &name, backend.patience).await;
        let fence = guard.fence().for_resource(resource.as_str());
        writes
            .write(&fence, &format!("turn {turn}"))
            .await
            .unwrap_or_else(|e| panic!("the write of turn {turn}: {e}"));
        first.get_or_insert(fence);
        guard.release().await.expect("ours");
    }
    assert_eq!(writes.read(&resource).await.as_deref(), Some("turn 3"));
    let first = first.expect("four turns");
    assert!(
        matches!(
            writes.write(&first, "stale").await,
            Err(LockError::Fenced { .. })
        ),
        "the first holder's token was admitted after three later holders wrote"
    );
}
