//! `locker = expr`: a `Locker`, a reference, an `Arc` or a `Box` of one, from a parameter, a
//! field of one (an axum-like `State`), or `self`.

use std::sync::Arc;

use distlock::{LockError, Locker, distributed_lock};

use crate::common::{Backend, each_backend};

#[derive(Clone)]
struct AppState {
    locker: Locker,
}

struct State<S>(S);

fn backend_here() -> bool {
    distlock::current_lease().is_some()
}

#[distributed_lock("a:{id}", locker = locker)]
async fn by_reference(locker: &Locker, id: u32) -> Result<bool, LockError> {
    Ok(backend_here())
}

#[distributed_lock("a:{id}", locker = locker)]
async fn by_value(locker: Locker, id: u32) -> Result<bool, LockError> {
    Ok(backend_here())
}

#[distributed_lock("a:{id}", locker = locker)]
async fn in_an_arc(locker: Arc<Locker>, id: u32) -> Result<bool, LockError> {
    Ok(backend_here())
}

#[distributed_lock("a:{id}", locker = locker)]
async fn in_a_box(locker: Box<Locker>, id: u32) -> Result<bool, LockError> {
    Ok(backend_here())
}

#[distributed_lock("a:{id}", locker = state.locker)]
async fn from_state(State(state): State<AppState>, id: u32) -> Result<bool, LockError> {
    // `state` is still ours in the body: the locker was taken from it before.
    let _moved: AppState = state;
    Ok(backend_here())
}

#[distributed_lock("a:{id}", locker = lockers[which])]
async fn any_expression(lockers: &[Locker], which: usize, id: u32) -> Result<bool, LockError> {
    Ok(backend_here())
}

struct Service {
    locker: Locker,
}

impl Service {
    #[distributed_lock("a:{id}", locker = self.locker)]
    async fn method(&self, id: u32) -> Result<bool, LockError> {
        Ok(backend_here())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_form_of_locker_works() {
    each_backend(|backend: Arc<Backend>| async move {
        let locker = backend.locker.clone();
        assert!(by_reference(&locker, 1).await.expect("ok"));
        assert!(by_value(locker.clone(), 1).await.expect("ok"));
        assert!(in_an_arc(Arc::new(locker.clone()), 1).await.expect("ok"));
        assert!(in_a_box(Box::new(locker.clone()), 1).await.expect("ok"));
        let state = AppState {
            locker: locker.clone(),
        };
        assert!(from_state(State(state), 1).await.expect("ok"));
        assert!(
            any_expression(std::slice::from_ref(&locker), 0, 1)
                .await
                .expect("ok")
        );
        let service = Service { locker };
        assert!(service.method(1).await.expect("ok"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_named_locker_is_the_one_used() {
    let (memory, redis) = (Backend::memory(), Backend::redis());
    let release = memory.hold_elsewhere("a:9").await;
    // Held on the memory backend only: through the Redis locker, the same name is free.
    assert!(by_reference(&redis.locker, 9).await.expect("free on redis"));
    assert!(matches!(
        Service {
            locker: memory.locker.clone()
        }
        .method_with_short_wait(9)
        .await,
        Err(LockError::Timeout { .. })
    ));
    drop(release);
}

impl Service {
    #[distributed_lock("a:{id}", locker = self.locker, wait = "50ms")]
    async fn method_with_short_wait(&self, id: u32) -> Result<(), LockError> {
        Ok(())
    }
}
