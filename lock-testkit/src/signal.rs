//! Signalling a child process by its PID.

use std::io;
use std::process::Child;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Sends `signal` to the single process `pid` (never a process group).
pub(crate) fn send(pid: u32, signal: Signal) -> io::Result<()> {
    let raw = i32::try_from(pid)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("bad pid {pid}")))?;
    kill(Pid::from_raw(raw), signal).map_err(io::Error::from)
}

/// Whether `child` is still running. A child that has exited is reaped here,
/// so its PID is never signalled afterwards.
pub(crate) fn is_alive(child: &mut Child) -> bool {
    matches!(child.try_wait(), Ok(None))
}

/// Sends `signal` to `child` if it is still running (not yet reaped, so the
/// PID cannot have been reused).
pub(crate) fn signal_child(child: &mut Child, signal: Signal) -> io::Result<()> {
    if is_alive(child) {
        send(child.id(), signal)
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("process {} has already exited", child.id()),
        ))
    }
}

/// `SIGKILL`s `child` by PID (if still running) and waits for it. Never panics.
pub(crate) fn kill_and_reap(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    // SIGCONT first is unnecessary: SIGKILL also ends a stopped process.
    let _ = send(child.id(), Signal::SIGKILL);
    let _ = child.wait();
}
