//! `Lock` for `Arc<T>`, `Box<T>` and `&T`: every method forwarded to the `T` they point to, so
//! a backend can be shared or borrowed where a `Lock` is wanted.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::backend::{
    Attempt, Capabilities, Handover, Holder, Inspect, Lock, LossWatch, MultiAttempt, OnLoss,
    ReleaseWatch,
};
use crate::{Kind, Lease, LockError, Token};

// Code holding an `Arc<dyn Lock>` calls `lock.as_ref().method(..)`: method lookup would pick
// these forwarding impls for the `Arc` itself, and every call would box its future twice.
macro_rules! forward_lock {
    ($($ty:ty),+) => {$(
        #[async_trait]
        impl<T: Lock + ?Sized> Lock for $ty {
            fn backend(&self) -> &'static str {
                (**self).backend()
            }
            async fn try_acquire(&self, name: &str, token: Token, ttl: Duration) -> Result<Attempt, LockError> {
                (**self).try_acquire(name, token, ttl).await
            }
            async fn try_acquire_renewed(&self, name: &str, token: Token, ttl: Duration) -> Result<Attempt, LockError> {
                (**self).try_acquire_renewed(name, token, ttl).await
            }
            async fn try_acquire_kind(&self, name: &str, kind: Kind, token: Token, ttl: Duration) -> Result<Attempt, LockError> {
                (**self).try_acquire_kind(name, kind, token, ttl).await
            }
            async fn try_acquire_read(&self, name: &str, writer_preference: bool, token: Token, ttl: Duration) -> Result<Attempt, LockError> {
                (**self).try_acquire_read(name, writer_preference, token, ttl).await
            }
            async fn try_acquire_write(&self, name: &str, writer_preference: bool, token: Token, ttl: Duration) -> Result<Attempt, LockError> {
                (**self).try_acquire_write(name, writer_preference, token, ttl).await
            }
            async fn try_acquire_semaphore(&self, name: &str, permits: u32, max: u32, token: Token, ttl: Duration) -> Result<Attempt, LockError> {
                (**self).try_acquire_semaphore(name, permits, max, token, ttl).await
            }
            async fn try_acquire_fair(&self, name: &str, queued: bool, token: Token, ttl: Duration) -> Result<Attempt, LockError> {
                (**self).try_acquire_fair(name, queued, token, ttl).await
            }
            async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
                (**self).permits_in_use(name).await
            }
            async fn try_acquire_all(&self, names: &[Arc<str>], token: Token, ttl: Duration) -> Result<MultiAttempt, LockError> {
                (**self).try_acquire_all(names, token, ttl).await
            }
            async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
                (**self).extend(lease, ttl).await
            }
            async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
                (**self).release(lease).await
            }
            async fn hand_over(&self, lease: &Lease, to: Token, ttl: Duration) -> Result<Handover, LockError> {
                (**self).hand_over(lease, to, ttl).await
            }
            async fn extend_many(&self, leases: &[(Lease, Duration)]) -> Vec<Result<Option<Instant>, LockError>> {
                (**self).extend_many(leases).await
            }
            async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
                (**self).watch(name).await
            }
            async fn watch_turn(&self, name: &str, token: &Token) -> Result<Option<ReleaseWatch>, LockError> {
                (**self).watch_turn(name, token).await
            }
            async fn ping(&self) -> Result<(), LockError> {
                (**self).ping().await
            }
            async fn describe_holder(&self, name: &str) -> Result<Option<Holder>, LockError> {
                (**self).describe_holder(name).await
            }
            async fn annotate(&self, lease: &Lease, note: &[u8]) -> Result<bool, LockError> {
                (**self).annotate(lease, note).await
            }
            fn watch_loss(&self, lease: &Lease, on_loss: OnLoss) -> Option<LossWatch> {
                (**self).watch_loss(lease, on_loss)
            }
            fn inspector(&self) -> Option<&dyn Inspect> {
                (**self).inspector()
            }
            fn capabilities(&self) -> Capabilities {
                (**self).capabilities()
            }
        }
    )+};
}

forward_lock!(Arc<T>, Box<T>, &T);
