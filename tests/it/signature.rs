//! The function keeps its signature: visibility, attributes, generics, where-clauses,
//! `impl Trait` parameters, `mut` parameters, by-value `self` and borrowed output.

use std::fmt::Display;
use std::sync::Arc;

use distlock::{LockError, Locker, distributed_lock};

use crate::common::{Backend, each_backend};

mod inner {
    use super::*;

    /// Documented, `#[must_use]`, `pub(crate)`, generic with a where-clause.
    #[must_use = "the result says what was locked"]
    #[distributed_lock("generic:{key}", locker = locker)]
    pub(crate) async fn generic<K, V: Clone + Send>(
        locker: &Locker,
        key: K,
        value: &V,
    ) -> Result<(String, V), LockError>
    where
        K: Display + Send + Sync,
    {
        Ok((
            distlock::current_lease().expect("locked").name().to_owned(),
            value.clone(),
        ))
    }
}

#[distributed_lock("impl:{key}", locker = locker)]
async fn impl_trait_arg(
    locker: &Locker,
    key: impl Display + Send + Sync,
    mut count: u32,
) -> Result<u32, LockError> {
    count += 1;
    Ok(count)
}

#[distributed_lock("impl:{key}", locker = locker)]
async fn impl_trait_output(locker: &Locker, key: u32) -> Result<impl Display + use<>, LockError> {
    Ok(key * 2)
}

struct Store {
    locker: Locker,
    items: Vec<String>,
}

impl Store {
    #[distributed_lock("store:{index}", locker = self.locker)]
    async fn get(&self, index: usize) -> Result<&str, LockError> {
        Ok(&self.items[index])
    }

    #[distributed_lock("store:{index}", locker = self.locker)]
    async fn take(mut self, index: usize) -> Result<String, LockError> {
        Ok(self.items.swap_remove(index))
    }

    #[distributed_lock("store:all", locker = self.locker)]
    async fn push(&mut self, item: String) -> Result<usize, LockError> {
        self.items.push(item);
        Ok(self.items.len())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signatures_are_kept() {
    each_backend(|backend: Arc<Backend>| async move {
        let locker = &backend.locker;
        let (name, value) = inner::generic(locker, "k", &vec![1, 2]).await.expect("ok");
        assert_eq!((name.as_str(), value), ("generic:k", vec![1, 2]));
        assert_eq!(impl_trait_arg(locker, 5, 1).await.expect("ok"), 2);
        assert_eq!(
            impl_trait_output(locker, 21).await.expect("ok").to_string(),
            "42"
        );
        let mut store = Store {
            locker: locker.clone(),
            items: vec!["a".into(), "b".into()],
        };
        assert_eq!(store.get(1).await.expect("ok"), "b");
        assert_eq!(store.push("c".into()).await.expect("ok"), 3);
        assert_eq!(store.take(0).await.expect("ok"), "a");
    })
    .await;
}
