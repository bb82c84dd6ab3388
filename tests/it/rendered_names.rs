//! Lock names the macro renders at run time, over arbitrary argument values: each value
//! appears verbatim where its placeholder stood, `{{`/`}}` come out as single braces, and a
//! name the values make too long is refused with `InvalidInput`, never a panic.

use std::future::Future;

use distlock::{LockError, Locker, MAX_NAME_LEN, MemoryLock};
use proptest::prelude::*;

#[distlock::distributed_lock("order:{id}:{{literal}}", locker = locker, ttl = "5s")]
async fn plain(locker: &Locker, id: String) -> Result<String, LockError> {
    Ok(current_name())
}

struct Customer {
    id: String,
}

struct Order {
    customer: Customer,
    pair: (u32, String),
}

#[distlock::distributed_lock(
    "{{{order.customer.id}}}/{order.pair.0}:{order.pair.1}",
    locker = locker,
    ttl = "5s"
)]
async fn nested(locker: &Locker, order: &Order) -> Result<String, LockError> {
    Ok(current_name())
}

#[distlock::distributed_lock("{a}{b}", locker = locker, ttl = "5s")]
async fn adjacent(locker: &Locker, a: String, b: char) -> Result<String, LockError> {
    Ok(current_name())
}

fn current_name() -> String {
    distlock::current_lease()
        .expect("inside a locked fn")
        .name()
        .to_owned()
}

/// Runs `call` against a fresh in-memory locker on a runtime of its own.
fn locked<F, Fut>(call: F) -> Result<String, LockError>
where
    F: FnOnce(Locker) -> Fut,
    Fut: Future<Output = Result<String, LockError>>,
{
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
        .block_on(async { call(Locker::new(MemoryLock::new())).await })
}

/// The rendered name must be `expected` when that is a valid name, else `InvalidInput`.
fn judge(got: Result<String, LockError>, expected: &str) -> Result<(), TestCaseError> {
    if expected.len() <= MAX_NAME_LEN {
        prop_assert_eq!(got.expect("a valid name locks"), expected);
    } else {
        prop_assert!(
            matches!(got, Err(LockError::InvalidInput { .. })),
            "{} bytes: {:?}",
            expected.len(),
            got
        );
    }
    Ok(())
}

/// Any Unicode, braces and control characters included, up to past the name limit.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[{}:./ a-z]{0,12}",
        proptest::collection::vec(any::<char>(), 250..400).prop_map(String::from_iter),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_value_appears_verbatim(id in value()) {
        let expected = ["order:", &id, ":{literal}"].concat();
        judge(locked(|locker| async move { plain(&locker, id).await }), &expected)?;
    }

    #[test]
    fn nested_fields_and_tuple_indices_render_in_place(cid in value(), n in any::<u32>(), s in value()) {
        let expected = ["{", &cid, "}/", &n.to_string(), ":", &s].concat();
        let order = Order { customer: Customer { id: cid }, pair: (n, s) };
        judge(locked(|locker| async move { nested(&locker, &order).await }), &expected)?;
    }

    #[test]
    fn adjacent_placeholders_just_concatenate(a in value(), b in any::<char>()) {
        let expected = [a.as_str(), b.encode_utf8(&mut [0; 4])].concat();
        judge(locked(|locker| async move { adjacent(&locker, a, b).await }), &expected)?;
    }
}
