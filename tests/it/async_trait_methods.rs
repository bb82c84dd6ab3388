//! `#[distributed_lock]` on methods of an `#[async_trait]` impl: the attribute recognises the
//! body `#[async_trait]` generates and locks the method's own body inside it.

use std::sync::Arc;

use async_trait::async_trait;
use distlock::{LockError, Locker, distributed_lock};

use crate::common::{AppError, Backend, each_backend};

#[async_trait]
trait Payments {
    async fn settle(&self, order: u64, amount: u32) -> Result<String, AppError>;
    async fn nightly(&self, day: u32) -> Option<u32>;
    async fn by_value(self: Arc<Self>, (from, to): (u32, u32)) -> Result<String, LockError>;
}

struct Service {
    locker: Locker,
    tenant: String,
}

#[async_trait]
impl Payments for Service {
    #[distributed_lock("{self.tenant}:order:{order}", locker = self.locker, wait = "5s")]
    async fn settle(&self, order: u64, amount: u32) -> Result<String, AppError> {
        if amount == 0 {
            return Err(AppError::Invalid("zero amount".into()));
        }
        let lease = distlock::current_lease().expect("locked");
        Ok(format!("{} {}", lease.name(), self.tenant))
    }

    #[distributed_lock("{self.tenant}:nightly:{day}", locker = self.locker, skip)]
    async fn nightly(&self, day: u32) -> Option<u32> {
        Some(day)
    }

    #[distributed_lock("{self.tenant}:move:{from}-{to}", locker = self.locker)]
    async fn by_value(self: Arc<Self>, (from, to): (u32, u32)) -> Result<String, LockError> {
        Ok(distlock::current_lease().expect("locked").name().to_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn methods_of_async_trait_impls_are_locked() {
    each_backend(|backend: Arc<Backend>| async move {
        let service = Arc::new(Service {
            locker: backend.locker.clone(),
            tenant: "acme".into(),
        });
        let payments = &*service;
        assert_eq!(
            payments.settle(42, 10).await.expect("free"),
            "acme:order:42 acme"
        );
        assert!(matches!(
            payments.settle(42, 0).await,
            Err(AppError::Invalid(_))
        ));
        assert!(backend.is_free("acme:order:42").await);

        let release = backend.hold_elsewhere("acme:nightly:1").await;
        assert_eq!(payments.nightly(1).await, None, "busy: skipped");
        drop(release);
        assert_eq!(payments.nightly(2).await, Some(2));

        assert_eq!(
            Arc::clone(&service).by_value((1, 2)).await.expect("free"),
            "acme:move:1-2"
        );
    })
    .await;
}
