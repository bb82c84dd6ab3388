//! The name template: parameters, field paths, `self`, tuple indices, destructured
//! parameters and escaped braces, rendered with `Display`.

use std::fmt;
use std::sync::Arc;

use distlock::{LockError, Locker, distributed_lock};

use crate::common::{Backend, each_backend};

struct Customer {
    id: CustomerId,
}

struct CustomerId(u32);

impl fmt::Display for CustomerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c-{}", self.0)
    }
}

struct Order {
    id: u64,
    customer: Customer,
    pair: (u8, &'static str),
}

/// A wrapper like axum's extractors, destructured in the parameter list.
struct Path<T>(T);

fn name_here() -> String {
    distlock::current_lease()
        .expect("inside a locked fn")
        .name()
        .to_owned()
}

#[distributed_lock("order:{order_id}", locker = locker)]
async fn plain(locker: &Locker, order_id: u64) -> Result<String, LockError> {
    Ok(name_here())
}

#[distributed_lock("tenant:{tenant}:order:{order.id}:customer:{order.customer.id}", locker = locker)]
async fn fields(locker: &Locker, tenant: &str, order: &Order) -> Result<String, LockError> {
    Ok(name_here())
}

#[distributed_lock("pair:{order.pair.0}-{order.pair.1}", locker = locker)]
async fn tuple_index(locker: &Locker, order: Order) -> Result<String, LockError> {
    Ok(name_here())
}

#[distributed_lock("path:{id}/{kind}", locker = locker)]
async fn destructured(
    locker: &Locker,
    Path(id): Path<u32>,
    (kind, _unused): (&str, u8),
) -> Result<String, LockError> {
    Ok(name_here())
}

#[distributed_lock("{{tenant}}:literal-braces:{n}", locker = locker)]
async fn braces(locker: &Locker, n: i32) -> Result<String, LockError> {
    Ok(name_here())
}

#[distributed_lock("no-placeholder", locker = locker)]
async fn fixed(locker: &Locker) -> Result<String, LockError> {
    Ok(name_here())
}

struct Shop {
    locker: Arc<Locker>,
    tenant: String,
}

impl Shop {
    #[distributed_lock("{self.tenant}:cart:{cart}", locker = self.locker)]
    async fn checkout(&self, cart: u32) -> Result<String, LockError> {
        Ok(name_here())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_rendered_from_the_parameters() {
    each_backend(|backend: Arc<Backend>| async move {
        let locker = &backend.locker;
        assert_eq!(plain(locker, 42).await.expect("ok"), "order:42");
        let order = Order {
            id: 7,
            customer: Customer { id: CustomerId(9) },
            pair: (3, "x"),
        };
        assert_eq!(
            fields(locker, "acme", &order).await.expect("ok"),
            "tenant:acme:order:7:customer:c-9"
        );
        assert_eq!(tuple_index(locker, order).await.expect("ok"), "pair:3-x");
        assert_eq!(
            destructured(locker, Path(5), ("csv", 0)).await.expect("ok"),
            "path:5/csv"
        );
        assert_eq!(
            braces(locker, -1).await.expect("ok"),
            "{tenant}:literal-braces:-1"
        );
        assert_eq!(fixed(locker).await.expect("ok"), "no-placeholder");
        let shop = Shop {
            locker: Arc::new(locker.clone()),
            tenant: "acme".into(),
        };
        assert_eq!(shop.checkout(3).await.expect("ok"), "acme:cart:3");
    })
    .await;
}

#[distributed_lock("exists:{id}", locker = backend.locker)]
async fn key_is_set(backend: &Backend, id: u32) -> Result<Option<std::time::Duration>, LockError> {
    Ok(backend.redis_pttl(&format!("exists:{id}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rendered_name_is_the_redis_key() {
    let backend = Backend::redis();
    let ttl = key_is_set(&backend, 11).await.expect("ok");
    assert!(ttl.is_some(), "the key exists while the body runs");
    assert_eq!(
        backend.redis_pttl("exists:11"),
        None,
        "and is deleted after"
    );
}
