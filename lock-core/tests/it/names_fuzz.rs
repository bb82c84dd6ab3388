//! Any name a caller can pass, through the whole `Locker` on `MemoryLock`: a name of 1 to
//! `MAX_NAME_LEN` bytes locks, excludes a second taker, and releases; any other is refused
//! with `InvalidInput` before the backend sees it. Never a panic, whatever the characters.
//! (`check_name` alone is property-tested in `src/validate.rs`; this covers the path every
//! request takes.)

use std::sync::Arc;
use std::time::Duration;

use lock_core::{LockError, Locker, MAX_NAME_LEN, MemoryLock};
use proptest::prelude::*;

/// Any Unicode scalar values (NUL, controls, braces, astral planes), 0 to 2,048 of them —
/// up to 8 KiB, well past the limit — and names right around the limit in bytes.
fn names() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(any::<char>(), 0..2_048).prop_map(String::from_iter),
        any::<String>(),
        (1_000..1_050_usize).prop_map(|n| "x".repeat(n)),
        (510..516_usize).prop_map(|n| "é".repeat(n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_name_locks_or_is_refused_as_input(name in names()) {
        let valid = !name.is_empty() && name.len() <= MAX_NAME_LEN;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            // Two lockers on one backend: two clients of the same lock service.
            let lock = Arc::new(MemoryLock::new());
            let (first, second) = (Locker::new(Arc::clone(&lock)), Locker::new(lock));
            let request = first.lock(name.as_str()).fixed_ttl(Duration::from_secs(5));
            match request.try_acquire().await {
                Ok(Some(guard)) => {
                    prop_assert!(valid, "{} bytes accepted", name.len());
                    prop_assert_eq!(guard.name(), name.as_str());
                    let again = second.lock(name.as_str()).try_acquire().await;
                    prop_assert!(matches!(again, Ok(None)), "held: {:?}", again.map(|g| g.is_some()));
                    guard.release().await.expect("memory backend");
                    let after = second.lock(name.as_str()).try_acquire().await;
                    prop_assert!(matches!(after, Ok(Some(_))), "free again after release");
                }
                Ok(None) => prop_assert!(false, "a fresh backend reported busy"),
                Err(LockError::InvalidInput { reason }) => {
                    prop_assert!(!valid, "{} bytes refused: {}", name.len(), reason);
                }
                Err(other) => prop_assert!(false, "unexpected error: {other:?}"),
            }
            Ok(())
        })?;
    }
}
