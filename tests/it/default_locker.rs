//! Without `locker = ..`, the process-wide default (`distlock::set_default_locker`); a clear
//! `InvalidInput` error when none is installed. One test, in a process of its own: the default
//! is process-wide, and `runtimes` installs one for good in this binary's process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use distlock::{LockError, distributed_lock};

use crate::common::{AppError, Backend, in_task};

/// Set for the child process that runs [`in_a_process_of_its_own`].
const CHILD: &str = "DISTLOCK_TEST_DEFAULT_LOCKER_CHILD";

#[distributed_lock("default:{id}")]
async fn uses_the_default(id: u32) -> Result<String, AppError> {
    Ok(distlock::current_lease().expect("locked").name().to_owned())
}

#[distributed_lock("default:{id}", skip)]
async fn skips_without_a_default(id: u32, ran: &AtomicBool) {
    ran.store(true, Ordering::SeqCst);
}

/// Runs the checks below in a fresh process of this test binary, where no default locker was
/// ever installed (`run_test_in_processes` fails unless the child ran its body and passed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_locker_is_used_and_its_absence_is_an_error() {
    lock_testkit::run_test_in_processes(
        &lock_testkit::child_test!(in_a_process_of_its_own),
        &[(CHILD, "1".to_owned())],
        1,
        Duration::from_secs(60),
    )
    .await
    .expect("the default locker's checks pass in a process of their own");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run in a process of its own by the_default_locker_is_used_and_its_absence_is_an_error"]
async fn in_a_process_of_its_own() {
    if std::env::var_os(CHILD).is_none() {
        return; // run by hand (`--include-ignored`) next to tests that install a default
    }
    in_task(async {
        assert!(distlock::take_default_locker().is_none());
        let error = uses_the_default(1).await.expect_err("no default");
        let AppError::Lock(error @ LockError::InvalidInput { .. }) = error else {
            panic!("unexpected: {error:?}");
        };
        assert!(!error.is_retryable());
        let message = error.to_string();
        assert!(message.contains("set_default_locker"), "{message}");
        assert!(message.contains("locker = "), "{message}");

        let ran = AtomicBool::new(false);
        skips_without_a_default(1, &ran).await;
        assert!(!ran.load(Ordering::SeqCst), "skipped (and logged)");

        for backend in [Backend::memory(), Backend::redis()] {
            let replaced = distlock::set_default_locker(backend.locker.clone());
            assert_eq!(uses_the_default(2).await.expect("ok"), "default:2");
            skips_without_a_default(2, &ran).await;
            assert!(ran.swap(false, Ordering::SeqCst));
            let release = backend.hold_elsewhere("default:3").await;
            skips_without_a_default(3, &ran).await;
            assert!(
                !ran.load(Ordering::SeqCst),
                "busy on the default locker: skipped"
            );
            drop(release);
            drop(replaced);
        }
        assert!(distlock::take_default_locker().is_some());
        assert!(distlock::default_locker().is_err());
    })
    .await;
}
