//! `#[distributed_lock]` together with `#[tracing::instrument]`, in either order: the lock is
//! taken inside the function's span.

use std::sync::Arc;

use distlock::{LockError, Locker, distributed_lock};

use crate::common::{Backend, each_backend};

#[tracing::instrument(skip(locker))]
#[distributed_lock("traced:{id}", locker = locker)]
async fn instrument_outside(locker: &Locker, id: u32) -> Result<String, LockError> {
    tracing::info!("working");
    Ok(distlock::current_lease().expect("locked").name().to_owned())
}

#[distributed_lock("traced:{id}", locker = locker, skip)]
#[tracing::instrument(skip(locker), ret)]
async fn instrument_inside(locker: &Locker, id: u32) -> Option<u32> {
    Some(id)
}

struct Jobs {
    locker: Locker,
}

impl Jobs {
    #[tracing::instrument(skip(self), fields(tenant = "acme"))]
    #[distributed_lock("traced:job:{id}", locker = self.locker)]
    async fn run(&self, id: u32) -> Result<u32, LockError> {
        Ok(id)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_orders_work() {
    each_backend(|backend: Arc<Backend>| async move {
        let locker = &backend.locker;
        assert_eq!(instrument_outside(locker, 1).await.expect("ok"), "traced:1");
        assert_eq!(instrument_inside(locker, 2).await, Some(2));
        let jobs = Jobs {
            locker: locker.clone(),
        };
        assert_eq!(jobs.run(3).await.expect("ok"), 3);
        let release = backend.hold_elsewhere("traced:2").await;
        assert_eq!(instrument_inside(locker, 2).await, None);
        drop(release);
    })
    .await;
}
