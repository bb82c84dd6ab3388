//! The first grant of a name is a create-if-absent (`If-None-Match: *`): two contenders that
//! both read "no object" before either wrote cannot both be granted. A [`SlowStore`] in front
//! of `object_store`'s in-memory store makes the race certain: each read reaches the store 20 ms late
//! and each write is applied 40 ms after it was sent, so the second contender, 10 ms behind,
//! reads before the first one's write lands. (The store-protocol mutant `s3-first-grant-without-if-none-match` survived the
//! conformance suite, whose contenders rarely meet at a name's very first grant; this kills it.)

use std::sync::Arc;
use std::time::Duration;

use lock_core::Token;
use lock_core::backend::{Attempt, Lock};
use lock_object_store::ObjectStoreLock;
use lock_object_store::object_store::memory::InMemory;

use crate::common::SlowStore;

/// How much later the second contender starts: after the first one's read, before its write
/// is applied (reads are answered 20 ms late, writes applied 40 ms after they were sent).
const STAGGER: Duration = Duration::from_millis(10);

#[tokio::test]
async fn two_contenders_at_a_names_first_grant_get_one_grant() {
    let store = Arc::new(SlowStore::new(
        Arc::new(InMemory::new()),
        Duration::from_millis(20),
    ));
    let ttl = Duration::from_secs(10);
    for round in 0..5 {
        let name = format!("first:{round}");
        let a = ObjectStoreLock::new(store.clone(), "locks", Duration::from_secs(5));
        let b = ObjectStoreLock::new(store.clone(), "locks", Duration::from_secs(5));
        let (ta, tb) = (
            Token::generate().expect("rng"),
            Token::generate().expect("rng"),
        );
        // The second contender reads after the first read and before the first write lands.
        let (first, second) = tokio::join!(a.try_acquire(&name, ta, ttl), async {
            tokio::time::sleep(STAGGER).await;
            b.try_acquire(&name, tb, ttl).await
        });
        let answers: Vec<Attempt> = [first, second]
            .into_iter()
            .map(|attempt| attempt.expect("the store answers"))
            .collect();
        let granted = answers
            .iter()
            .filter(|attempt| matches!(attempt, Attempt::Acquired(_)))
            .count();
        assert_eq!(
            granted, 1,
            "round {round}: {granted} contenders were granted {name:?} at once: {answers:?}"
        );
    }
}
