//! How a runner's generated test runs one module's checks: several at a time over one backend,
//! each on names of its own, every failure reported under its check's name.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

use futures::{FutureExt, StreamExt};

use super::Module;

/// One check of a module, ready to run: its name and its future.
pub type Check<'a> = (&'static str, Pin<Box<dyn Future<Output = ()> + Send + 'a>>);

/// How many checks of one module run at once over its backend. The module's test then lasts
/// about its checks' total time over this, and one server (a PostgreSQL, a Redis Cluster of
/// six nodes) serves them all instead of one each; more at once would crowd a PostgreSQL's
/// connections (every check's lockers have a pool and a listening connection each).
pub const CHECKS_AT_ONCE: usize = 4;

/// Where to choose checks by name: `DISTLOCK_CHECK=fencing cargo nextest run -E
/// 'test(conformance::redis::mutex)'` runs only the mutex checks whose name contains
/// `fencing`.
pub const CHECK_FILTER_ENV: &str = "DISTLOCK_CHECK";

/// Runs `checks` of `module`, [`CHECKS_AT_ONCE`] at a time, each to its end whatever the
/// others do (a panic is caught and kept), then panics naming every check that failed and why.
/// Only the checks whose name contains `$DISTLOCK_CHECK` run when it is set.
///
/// What the tests that [`conformance_tests!`](crate::conformance_tests) writes call.
///
/// # Panics
/// When a check panicked, or when the filter left no check to run.
pub async fn run_checks(module: Module, checks: Vec<Check<'_>>) {
    let filter = std::env::var(CHECK_FILTER_ENV).ok();
    let chosen: Vec<Check<'_>> = checks
        .into_iter()
        .filter(|(name, _)| filter.as_deref().is_none_or(|part| name.contains(part)))
        .collect();
    assert!(
        !chosen.is_empty(),
        "no {module:?} check's name contains {CHECK_FILTER_ENV}={filter:?}"
    );
    let total = chosen.len();
    let failures: Vec<String> = futures::stream::iter(chosen)
        .map(|(name, check)| async move {
            let outcome = AssertUnwindSafe(check).catch_unwind().await;
            outcome
                .err()
                .map(|panic| format!("{name}: {}", message(&*panic)))
        })
        .buffer_unordered(CHECKS_AT_ONCE)
        .filter_map(|failure| async move { failure })
        .collect()
        .await;
    assert!(
        failures.is_empty(),
        "{} of {total} {module:?} checks failed:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

/// A panic's message, when it is a string.
fn message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(a panic without a message)")
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use std::panic::AssertUnwindSafe;

    use futures::FutureExt;

    use super::{Check, Module, run_checks};

    #[tokio::test]
    #[should_panic(expected = "1 of 3 Mutex checks failed:\n  second: boom")]
    async fn a_failing_check_is_named_and_the_others_still_run_to_their_end() {
        static FINISHED: AtomicUsize = AtomicUsize::new(0);
        let ok = || {
            Box::pin(async {
                tokio::task::yield_now().await;
                FINISHED.fetch_add(1, Ordering::SeqCst);
            })
        };
        let checks: Vec<Check<'_>> = vec![
            ("first", ok()),
            ("second", Box::pin(async { panic!("boom") })),
            ("third", ok()),
        ];
        let outcome = AssertUnwindSafe(run_checks(Module::Mutex, checks))
            .catch_unwind()
            .await;
        assert_eq!(
            FINISHED.load(Ordering::SeqCst),
            2,
            "both passing checks ran"
        );
        std::panic::resume_unwind(outcome.expect_err("a check failed"));
    }
}
