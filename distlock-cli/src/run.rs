//! `distlock run`: a command under a lock, like `consul lock`, through the library's `Locker`
//! (waiting, renewal and loss detection are the library's).

use std::os::unix::process::ExitStatusExt;
use std::process::{ExitCode, ExitStatus};
use std::time::Duration;

use lock_core::{LockError, TimeoutPhase};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Child;
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::RunArgs;
use crate::exit::{BUSY, CANNOT_EXECUTE, FAILURE, Failure, LOST, NOT_FOUND};
use crate::store::{Store, describe_grant, locker};

/// How the command ended.
pub(crate) enum End {
    /// It exited by itself (or by a signal passed on); its group was ended after it.
    Exited(ExitStatus),
    /// The lease was lost: the command was stopped (SIGTERM, SIGKILL after the grace).
    Lost,
}

/// The signals distlock passes on to the command (SIGTERM, SIGINT, SIGHUP), listened to
/// once for the whole of `run`.
pub(crate) struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Starts listening.
    pub(crate) fn listen() -> Result<Self, Failure> {
        Ok(Self {
            term: listen(SignalKind::terminate())?,
            int: listen(SignalKind::interrupt())?,
            hup: listen(SignalKind::hangup())?,
        })
    }

    /// The next of them to arrive.
    pub(crate) async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.hup.recv() => Signal::SIGHUP,
        }
    }
}

/// Acquires `args.name`, runs the command while renewing, and answers the exit code. (`run
/// --leader` goes to `leader::run` instead; `main` picks.)
pub(crate) async fn run(store: &dyn Store, args: RunArgs) -> Result<ExitCode, Failure> {
    let wait = args.wait_limit().unwrap_or(Duration::from_secs(10));
    // The grant describes its holder (host, pid, since, and the note: --note, or the command),
    // so `distlock ls` and `show` on another machine say who runs what.
    let note = args
        .note
        .clone()
        .unwrap_or_else(|| format!("distlock run -- {}", args.command.join(" ")));
    // A lock-delay is part of the description (what `show` reads "delayed until" from), which
    // a store writing descriptions with its grants has no place for: written after the grant.
    let with_grant = store.describes_grants() && args.lock_delay.is_none();
    let locker = locker(store, with_grant.then_some(note.as_str()))?;
    let guard = request(&locker, &args, wait, &note)
        .acquire()
        .await
        .map_err(|error| busy_or(error, &args.name, wait))?;
    if !with_grant {
        let lock = locker.backend_lock();
        describe_grant(lock.as_ref(), &guard, &note, args.lock_delay).await;
    }
    let mut signals = Signals::listen()?;
    let ended = ended(&guard, &args);
    let revocation = || {
        (guard.is_revoked() && !args.ignore_revocation)
            .then(|| guard.revocation_note().map(|note| note.to_string()))
    };
    let end = match supervise(
        &args,
        guard.fencing_token(),
        ended,
        &revocation,
        &mut signals,
    )
    .await
    {
        Ok(end) => end,
        Err(failure) => {
            let _ = guard.release().await;
            return Err(failure);
        }
    };
    match end {
        End::Exited(status) => release_after(guard, &args, status).await,
        End::Lost if guard.is_revoked() && !args.ignore_revocation => {
            // Given up on request: released now, for whoever asked.
            let released = guard.release().await;
            let how = if released.is_ok() {
                "released"
            } else {
                "already lost"
            };
            Err(Failure::new(
                LOST,
                format!("gave the lock {:?} up on request ({how})", args.name),
            ))
        }
        End::Lost => {
            drop(guard);
            Err(Failure::new(LOST, format!("lost the lock {:?}", args.name)))
        }
    }
}

/// The request `run` makes: the lease, the wait, the lock-delay, revocable where the store can
/// name the grant (`distlock revoke` reaches it; elsewhere nobody can ask), and its waiter
/// described by `note` where the store keeps notes (`show` and the console list who waits).
fn request(
    locker: &lock_core::Locker,
    args: &RunArgs,
    wait: Duration,
    note: &str,
) -> lock_core::LockRequest {
    let mut request = locker.lock(args.name.as_str()).lease(args.lease).wait(wait);
    if locker.backend_lock().capabilities().holders {
        let description = crate::store::describe_here(note).to_string();
        request = request.describe_waiter(description.into_bytes());
    }
    if !args.ignore_revocation && locker.backend_lock().capabilities().offers_revocation() {
        request = request.revocable();
    }
    if let Some(delay) = args.lock_delay {
        request = request.lock_delay(delay);
    }
    request
}

/// Resolves when the run must end: the lease lost, or a revocation (`distlock revoke`) unless
/// ignored, which ends the run as a lost lease does.
fn ended(guard: &lock_core::Guard, args: &RunArgs) -> impl std::future::Future<Output = ()> {
    let (lost, revoked) = (guard.lost(), guard.revoked());
    let honour = !args.ignore_revocation;
    async move {
        tokio::select! {
            () = lost => {}
            () = revoked, if honour => {}
        }
    }
}

/// The failure of an acquisition or a campaign bounded by `wait`: "busy" when the wait ran
/// out, the error's own otherwise.
pub(crate) fn busy_or(error: LockError, name: &str, wait: Duration) -> Failure {
    match error {
        LockError::Busy { .. }
        | LockError::Timeout {
            phase: TimeoutPhase::Wait,
            ..
        } => Failure::new(
            BUSY,
            format!(
                "{name:?} is busy: not acquired within {}",
                humantime::format_duration(wait)
            ),
        ),
        other => Failure::from(other),
    }
}

/// Runs the command of `args` under the lease whose fencing token is `token` until it exits
/// or `lost` resolves (`revoked` says whether that was a revocation, with its note), passing
/// on the signals distlock gets; stops it on `lost`. Either way
/// the command's process group is ended before this returns, so nothing it started outlives
/// the lease.
///
/// # Errors
/// The command could not be started (126, or 127 when not found), or waiting for it failed.
pub(crate) async fn supervise(
    args: &RunArgs,
    token: u64,
    lost: impl std::future::Future<Output = ()>,
    revoked: &dyn Fn() -> Option<Option<String>>,
    signals: &mut Signals,
) -> Result<End, Failure> {
    let Some((program, rest)) = args.command.split_first() else {
        return Err(Failure::new(FAILURE, "no command given"));
    };
    // The command's process group: led by its guardian, which ends the group if distlock is
    // killed (see `guardian`), so that a lost lease, a passed-on signal or distlock's death
    // reaches everything the command started (a shell's children too).
    let guardian = spawn_guardian();
    let group = guardian.as_ref().and_then(Child::id).unwrap_or(0);
    let mut command = tokio::process::Command::new(program);
    command
        .args(rest)
        .env("DISTLOCK_LOCK_NAME", &args.name)
        .env("DISTLOCK_FENCING_TOKEN", token.to_string())
        .process_group(i32::try_from(group).unwrap_or(0));
    if args.leader {
        // The term is the fencing token; named for what a leader's script means by it.
        command.env("DISTLOCK_TERM", token.to_string());
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            end_group(guardian, None).await;
            let code = if error.kind() == std::io::ErrorKind::NotFound {
                NOT_FOUND
            } else {
                CANNOT_EXECUTE
            };
            return Err(Failure::new(
                code,
                format!("cannot run {program:?}: {error}"),
            ));
        }
    };
    // The group's id: the guardian's pid, or the command's when it has no guardian.
    let group = child.id().map(|pid| if group == 0 { pid } else { group });
    tokio::pin!(lost);
    // Bounded: every turn either ends the loop or passes one signal on to the command.
    let end = loop {
        tokio::select! {
            status = child.wait() => match status {
                Ok(status) => break End::Exited(status),
                Err(e) => {
                    end_group(guardian, group).await;
                    return Err(Failure::new(FAILURE, format!("waiting for the command: {e}")));
                }
            },
            () = &mut lost => break End::Lost,
            sig = signals.recv() => pass_on(group, sig),
        }
    };
    if let End::Lost = end {
        let kill_after = humantime::format_duration(args.kill_after);
        match revoked() {
            Some(note) => eprintln!(
                "distlock: asked to give the lock {:?} up{}; stopping the command (SIGTERM, \
                 SIGKILL after {kill_after})",
                args.name,
                note.map(|note| format!(" ({note})")).unwrap_or_default()
            ),
            None => eprintln!(
                "distlock: the lease on {:?} was lost; stopping the command (SIGTERM, SIGKILL \
                 after {kill_after})",
                args.name
            ),
        }
        stop(&mut child, group, args.kill_after).await;
    }
    // Whatever the command left running in its group would outlive the lock.
    end_group(guardian, group).await;
    Ok(end)
}

/// Releases the lock after the command exited with `status`, and answers distlock's exit.
pub(crate) async fn release_after(
    guard: lock_core::Guard,
    args: &RunArgs,
    status: ExitStatus,
) -> Result<ExitCode, Failure> {
    match guard.release().await {
        Ok(()) => Ok(ExitCode::from(code_of(status))),
        Err(LockError::NotOwned { .. }) => Err(Failure::new(
            LOST,
            format!(
                "the lease on {:?} was lost before the command ended (it exited with {})",
                args.name,
                code_of(status)
            ),
        )),
        Err(error) => {
            // The command is done; the lock expires at the end of its lease.
            eprintln!(
                "distlock: releasing {:?} failed ({}); it expires within {}",
                args.name,
                crate::exit::one_line(&error),
                humantime::format_duration(args.lease)
            );
            Ok(ExitCode::from(code_of(status)))
        }
    }
}

/// Starts the command's guardian (this binary, `distlock __guardian <our pid>`) as the leader
/// of a new process group; `None`, with a warning, if it cannot start (the command then gets
/// a group of its own, unguarded, as before).
fn spawn_guardian() -> Option<Child> {
    let started = std::env::current_exe().and_then(|exe| {
        tokio::process::Command::new(exe)
            .arg(crate::guardian::ARG)
            .arg(std::process::id().to_string())
            .process_group(0)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
    });
    match started {
        Ok(guardian) => Some(guardian),
        Err(error) => {
            eprintln!(
                "distlock: cannot start the command's guardian ({error}); if distlock is killed, \
                 the command will not be"
            );
            None
        }
    }
}

/// Ends the command's process group (SIGKILL to what is left of it, the guardian included)
/// and reaps the guardian.
async fn end_group(guardian: Option<Child>, group: Option<u32>) {
    let Some(mut guardian) = guardian else {
        return;
    };
    let group = group.or_else(|| guardian.id());
    if let Some(group) = group.and_then(|g| i32::try_from(g).ok()) {
        let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
    }
    let _ = guardian.kill().await;
}

/// A stream of one signal sent to distlock.
fn listen(kind: SignalKind) -> Result<tokio::signal::unix::Signal, Failure> {
    signal(kind).map_err(|e| Failure::new(FAILURE, format!("cannot listen for signals: {e}")))
}

/// Sends `sig` to the command's process group `group` (its guardian's pid, or the command's
/// when it has none: neither is reused before we reap it).
fn pass_on(group: Option<u32>, sig: Signal) {
    if let Some(group) = group.and_then(|g| i32::try_from(g).ok()) {
        let _ = killpg(Pid::from_raw(group), sig);
    }
}

/// SIGTERM to the command's process group, then SIGKILL if the command still runs after
/// `grace`; waits for it to end.
async fn stop(child: &mut Child, group: Option<u32>, grace: Duration) {
    pass_on(group, Signal::SIGTERM);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        pass_on(group, Signal::SIGKILL);
        let _ = child.wait().await;
    }
}

/// The shell's number for how a command ended: its exit code, or 128 + the signal.
pub(crate) fn code_of(status: ExitStatus) -> u8 {
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(i32::from(FAILURE));
    u8::try_from(code & 0xff).unwrap_or(FAILURE)
}
