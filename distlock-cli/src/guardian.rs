//! The command's guardian: a small process (this binary, `distlock __guardian PARENT`) that
//! leads the command's process group and ends the whole group when `distlock` itself dies.
//!
//! `distlock run` puts the command in a process group of its own, so that a lost lease (or a
//! signal passed on) reaches everything the command started. But nothing told that group when
//! `distlock` was killed outright (`kill -9`, the OOM killer, a container runtime): the command
//! went on beating without its lock while a second `run` took the lock, and two jobs ran at
//! once. The guardian is started first, as the group's leader, and the command joins its
//! group; the guardian watches its parent and, the moment `distlock` is gone, sends SIGKILL to
//! the group (itself included). When the command ends normally, `distlock` ends the group the
//! same way before releasing the lock, so nothing the command left behind outlives the lock.
//!
//! Linux's `PR_SET_PDEATHSIG` would tell the command's first process alone, not a shell's
//! children, and needs `unsafe` between fork and exec; the guardian needs neither and works on
//! every Unix. It notices its parent's death within [`WATCH_EVERY`] (the parent changes to
//! `init` or a subreaper).

use std::process::ExitCode;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::getpgrp;
use tokio::signal::unix::{SignalKind, signal};

/// The hidden first argument that makes this binary a guardian.
pub(crate) const ARG: &str = "__guardian";

/// How often the guardian looks at its parent: the longest the command may outlive a killed
/// `distlock`, plus scheduling.
pub(crate) const WATCH_EVERY: Duration = Duration::from_millis(20);

/// Runs the guardian of the group it leads, for the `distlock` process `parent`; returns only
/// if its arguments are wrong (otherwise it ends by the group's SIGKILL, or is killed).
pub(crate) fn guard(args: &[String]) -> ExitCode {
    let Some(parent) = args.first().and_then(|p| p.parse::<u32>().ok()) else {
        eprintln!("distlock {ARG}: expected the parent's pid");
        return ExitCode::from(crate::exit::FAILURE);
    };
    // Signals passed on to the group (TERM, INT, HUP) are for the command: the guardian takes
    // them without dying, so it still guards the group while the command winds down. Only the
    // group's SIGKILL ends it. (tokio installs the handlers; nothing needs to read them.)
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let _kept = runtime.as_ref().ok().map(|runtime| {
        let _entered = runtime.enter();
        [
            SignalKind::terminate(),
            SignalKind::interrupt(),
            SignalKind::hangup(),
        ]
        .map(|kind| signal(kind).ok())
    });
    // Bounded by the parent's life: each turn either ends the group or sleeps WATCH_EVERY.
    loop {
        if std::os::unix::process::parent_id() != parent {
            let _ = killpg(getpgrp(), Signal::SIGKILL);
            return ExitCode::from(crate::exit::FAILURE);
        }
        std::thread::sleep(WATCH_EVERY);
    }
}
