//! Leader election from the command line: `distlock run NAME --leader -- CMD` (campaign, run
//! the command while leading, stop it when the leadership is lost, campaign again) and
//! `distlock leader NAME` (who leads). Both go through the library's `Election`
//! (`locker.elect(NAME)`), so a command and a Rust service can be candidates of one election.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_core::{Leader, Leadership, LockError};

use crate::cli::{LeaderArgs, RunArgs};
use crate::exit::{FAILURE, Failure, LOST, USAGE, one_line};
use crate::render;
use crate::run::{End, Signals, busy_or, code_of, supervise};
use crate::store::{Store, locker};

/// After a failed campaign (the store unreachable for longer than the locker retries), the
/// next starts this long after.
const CAMPAIGN_RETRY: Duration = Duration::from_secs(1);

/// `distlock run NAME --leader [--once] -- CMD`: answers distlock's exit code.
///
/// The loop: campaign (no limit, or `--wait` with `--once`); once elected, run the command
/// with the term in `DISTLOCK_TERM` and `DISTLOCK_FENCING_TOKEN`; when the leadership is lost
/// (its stop margin before the lease's end where renewals fail, or the lock found taken),
/// stop the command's group and campaign again (`--once`: exit 124). The command exiting by
/// itself resigns and ends distlock with its code. A signal while campaigning ends distlock
/// (128 + N); while the command runs, it is passed on to the command.
pub(crate) async fn run(store: &dyn Store, args: RunArgs) -> Result<ExitCode, Failure> {
    if args.wait.is_some() && !args.once {
        return Err(Failure::new(
            USAGE,
            "--wait with --leader needs --once: a candidate waits to be elected without limit",
        ));
    }
    let value = args
        .value
        .clone()
        .unwrap_or_else(|| format!("{}:{}", crate::host::hostname(), std::process::id()));
    // No holder metadata: the holder's one description is its grant's note, where the
    // election writes its record (value and since); a description written by the grant would
    // stand as the leader's value until then.
    let locker = locker(store, None)?;
    let delay = args.lock_delay.unwrap_or_default();
    let election = locker
        .elect(args.name.as_str())
        .value(value)
        .lease(args.lease)
        .lock_delay(delay);
    let mut signals = Signals::listen()?;
    // Bounded by the leadership being lost (or a campaign failing) each turn; every other
    // outcome returns.
    loop {
        let campaigned = tokio::select! {
            sig = signals.recv() => return Ok(ExitCode::from(signal_code(sig))),
            campaigned = campaign(&election, &args) => campaigned,
        };
        let leadership = match campaigned {
            Ok(leadership) => leadership,
            Err(failure) if args.once || failure.code == USAGE => return Err(failure),
            Err(failure) => {
                eprintln!(
                    "distlock: campaigning for {:?} failed ({}); again in {}",
                    args.name,
                    failure.message,
                    humantime::format_duration(CAMPAIGN_RETRY)
                );
                tokio::select! {
                    sig = signals.recv() => return Ok(ExitCode::from(signal_code(sig))),
                    () = tokio::time::sleep(CAMPAIGN_RETRY) => continue,
                }
            }
        };
        let term = leadership.term();
        eprintln!("distlock: leading {:?} with term {term}", args.name);
        match supervise(&args, term, leadership.lost(), &|| None, &mut signals).await {
            Err(failure) => {
                let _ = leadership.resign().await;
                return Err(failure);
            }
            Ok(End::Exited(status)) => return resign_after(leadership, &args, status).await,
            Ok(End::Lost) if args.once => {
                drop(leadership);
                return Err(Failure::new(
                    LOST,
                    format!("lost the leadership of {:?} (term {term})", args.name),
                ));
            }
            Ok(End::Lost) => {
                drop(leadership);
                eprintln!(
                    "distlock: lost the leadership of {:?} (term {term}); campaigning again",
                    args.name
                );
            }
        }
    }
}

/// One campaign, bounded by `--wait` when given (with `--once`).
async fn campaign(election: &lock_core::Election, args: &RunArgs) -> Result<Leadership, Failure> {
    match args.wait_limit() {
        Some(wait) => tokio::time::timeout(wait, election.campaign())
            .await
            .unwrap_or(Err(LockError::Timeout {
                phase: lock_core::TimeoutPhase::Wait,
                elapsed: wait,
            }))
            .map_err(|error| busy_or(error, &args.name, wait)),
        None => election.campaign().await.map_err(Failure::from),
    }
}

/// Resigns after the command exited with `status`, and answers distlock's exit: the
/// command's code, or 124 when the term had ended before the command did.
async fn resign_after(
    leadership: Leadership,
    args: &RunArgs,
    status: std::process::ExitStatus,
) -> Result<ExitCode, Failure> {
    match leadership.resign().await {
        Ok(()) => Ok(ExitCode::from(code_of(status))),
        Err(LockError::NotOwned { .. }) => Err(Failure::new(
            LOST,
            format!(
                "the leadership of {:?} was lost before the command ended (it exited with {})",
                args.name,
                code_of(status)
            ),
        )),
        Err(error) => {
            eprintln!(
                "distlock: resigning {:?} failed ({}); the term ends within {}",
                args.name,
                one_line(&error),
                humantime::format_duration(args.lease)
            );
            Ok(ExitCode::from(code_of(status)))
        }
    }
}

/// The shell's code for a process ended by `sig`: 128 + N.
fn signal_code(sig: nix::sys::signal::Signal) -> u8 {
    u8::try_from(128 + sig as i32).unwrap_or(FAILURE)
}

/// The leader as `--json` shows it.
#[derive(serde::Serialize)]
struct LeaderDoc {
    term: u64,
    value: String,
    since_ms: Option<u64>,
    recorded: bool,
}

impl From<&Leader> for LeaderDoc {
    fn from(leader: &Leader) -> Self {
        Self {
            term: leader.term(),
            value: String::from_utf8_lossy(leader.value()).into_owned(),
            since_ms: leader.since().map(unix_ms),
            recorded: leader.is_recorded(),
        }
    }
}

/// A wall-clock time in Unix milliseconds.
fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `distlock leader NAME`: prints the current leader (or that nobody leads); exit 0 either
/// way.
pub(crate) async fn show(
    store: &dyn Store,
    args: &LeaderArgs,
    json: bool,
) -> Result<ExitCode, Failure> {
    let locker = locker(store, None)?;
    let leader = locker
        .elect(args.name.as_str())
        .leader()
        .await
        .map_err(|error| match error {
            LockError::Unsupported { .. } => Failure::new(
                FAILURE,
                format!(
                    "{:?}: this backend ({}) cannot describe the holder, so it cannot name the leader ({})",
                    args.name,
                    store.backend(),
                    one_line(&error)
                ),
            ),
            other => Failure::from(other),
        })?;
    if json {
        crate::output::print_json(&serde_json::json!({
            "name": args.name,
            "leader": leader.as_ref().map(LeaderDoc::from),
        }))?;
    } else if let Some(leader) = &leader {
        let doc = LeaderDoc::from(leader);
        println!(
            "{}",
            render::text(&render::leader_table(
                &args.name,
                doc.term,
                &doc.value,
                doc.since_ms
            ))
        );
    } else {
        println!("{:?} has no leader", args.name);
    }
    Ok(ExitCode::SUCCESS)
}
