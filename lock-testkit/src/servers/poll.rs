//! Bounded waiting for a topology to reach a state.

use std::io;
use std::thread;
use std::time::{Duration, Instant};

/// Upper bound on checks, whatever the clock says.
const MAX_CHECKS: u32 = 10_000;

/// Calls `check` every `interval` until it returns `Ok`, at most until
/// `timeout` has passed and at most [`MAX_CHECKS`] times (always at least
/// once). `check` returns `Err(description of the current state)` while the
/// state is not reached; the last description is put in the timeout error.
pub(crate) fn until<T>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> io::Result<T> {
    let started = Instant::now();
    let mut last = String::from("(never checked)");
    let mut checks = 0_u32;
    while checks < MAX_CHECKS {
        checks += 1;
        match check() {
            Ok(value) => return Ok(value),
            Err(state) => last = state,
        }
        let elapsed = started.elapsed();
        if elapsed >= timeout {
            break;
        }
        thread::sleep(interval.min(timeout - elapsed));
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "timed out after {:.1?} ({checks} checks) waiting for {what}; last state: {last}",
            started.elapsed()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::time::Duration;

    use super::until;

    #[test]
    fn returns_first_success() {
        let mut n = 0;
        let got = until("n >= 3", Duration::from_secs(5), Duration::ZERO, || {
            n += 1;
            if n >= 3 {
                Ok(n)
            } else {
                Err(format!("n = {n}"))
            }
        });
        assert_eq!(got.expect("reached"), 3);
    }

    #[test]
    fn times_out_with_last_state() {
        let err = until::<()>(
            "never",
            Duration::from_millis(30),
            Duration::from_millis(5),
            || Err("still not".to_owned()),
        )
        .expect_err("cannot succeed");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(err.to_string().contains("still not"), "{err}");
    }
}
