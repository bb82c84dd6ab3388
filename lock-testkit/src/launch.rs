//! Starting a server process until it is ready, shared by every server the testkit runs: on
//! fresh ports when it first starts (a port found free can be taken before the child binds
//! it), and again on its own port after a stop (the port was only just freed).

use std::fmt::Write as _;
use std::io;
use std::process::ExitStatus;
use std::thread;
use std::time::Duration;

/// Fresh ports tried by a first start when the child exits early.
pub(crate) const START_ATTEMPTS: u32 = 5;
/// Attempts by a restart to re-bind the same port.
pub(crate) const RESTART_ATTEMPTS: u32 = 5;
/// Pause between re-bind attempts, multiplied by the attempt number.
pub(crate) const RESTART_BACKOFF: Duration = Duration::from_millis(200);

/// How one launch of a server process ended.
pub(crate) enum Launch {
    /// It accepts connections.
    Ready,
    /// It exited before it did.
    Exited(ExitStatus),
}

/// Calls `launch(attempt)` until it answers [`Launch::Ready`], at most `attempts` times,
/// sleeping `backoff` × the attempt number between tries. `launch` also names its try for the
/// log (`"port 6390 -> "`, or nothing).
///
/// `Ok(Err(log))` when no try was ready: one line per exit, for the caller's error message.
///
/// # Errors
/// Whatever `launch` returns, at once (spawning failed, or the server rejected its
/// configuration and trying again cannot help).
pub(crate) fn until_ready(
    attempts: u32,
    backoff: Duration,
    mut launch: impl FnMut(u32) -> io::Result<(Launch, String)>,
) -> io::Result<Result<(), String>> {
    let mut exits = String::new();
    for attempt in 1..=attempts {
        match launch(attempt)? {
            (Launch::Ready, _) => return Ok(Ok(())),
            (Launch::Exited(status), label) => {
                let _ = write!(exits, "\n  attempt {attempt}: {label}{status}");
                if attempt < attempts && !backoff.is_zero() {
                    thread::sleep(backoff * attempt);
                }
            }
        }
    }
    Ok(Err(exits))
}
