//! `distlock release`: compare-and-delete by the holder's token (the store's own release),
//! never a bare delete; the same on every backend.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use crate::cli::ReleaseArgs;
use crate::exit::{FAILURE, Failure};
use crate::store::{Session, Store};

/// Releases `args.name` if it is held with the given token (or, with `--force`, with the token
/// it has now, after the operator confirms on a terminal).
pub(crate) async fn release(
    store: &dyn Store,
    args: &ReleaseArgs,
    json: bool,
) -> Result<ExitCode, Failure> {
    let token = match &args.token {
        Some(token) => token.clone(),
        None => match confirm_current(store, &args.name).await? {
            Forced::Token(token) => token,
            Forced::Session(session) => {
                return end_session(store, &args.name, &session, json).await;
            }
        },
    };
    let released = store.release(&args.name, &token).await?;
    let announced = released && announces_releases(store);
    if json {
        println!(
            "{}",
            serde_json::json!({
                "name": args.name, "token": token, "released": released, "announced": announced,
            })
        );
    } else if announced {
        println!("released {:?} (token {token}); waiters notified", args.name);
    } else if released {
        // MySQL and object stores announce nothing: their waiters poll.
        println!(
            "released {:?} (token {token}); waiters find it free at their next try",
            args.name
        );
    }
    if released {
        return Ok(ExitCode::SUCCESS);
    }
    if !json {
        let now = holder_token(store, &args.name).await?;
        explain_not_released(&args.name, now.as_deref());
    }
    Ok(ExitCode::from(FAILURE))
}

/// Whether the store announces a release to its waiters, as the library's capability table
/// for it says; `false` when the library's lock cannot be built for it.
fn announces_releases(store: &dyn Store) -> bool {
    store
        .lock(None)
        .is_ok_and(|lock| lock.capabilities().announces_releases)
}

/// Says on stderr why `name` was not released: held with another token (`holder`'s), or not
/// held at all.
fn explain_not_released(name: &str, holder: Option<&str>) {
    match holder {
        Some(other) => {
            eprintln!("distlock: not released: {name:?} is held with another token ({other})");
        }
        None => eprintln!("distlock: not released: {name:?} is not held"),
    }
}

/// The token of whoever holds the exclusive lock `name` now, if anyone.
pub(crate) async fn holder_token(store: &dyn Store, name: &str) -> Result<Option<String>, Failure> {
    let locks = store.describe(name).await?;
    Ok(locks
        .into_iter()
        .find(|l| matches!(l.kind, "mutex" | "fair" | "foreign"))
        .and_then(|l| l.token))
}

/// What `--force` releases.
enum Forced {
    /// The lock held with this token now.
    Token(String),
    /// The session that holds the lock by itself (PostgreSQL's advisory locks): it is ended.
    Session(Session),
}

/// `--force`: the current holder's token (or, for a lock bound to a session and no token, that
/// session), once the operator typed `yes` on a terminal.
async fn confirm_current(store: &dyn Store, name: &str) -> Result<Forced, Failure> {
    refuse_without_terminal()?;
    if let Some(token) = holder_token(store, name).await? {
        return confirm(name, token).map(Forced::Token);
    }
    let Some(session) = store.holding(name).await? else {
        return Err(Failure::new(FAILURE, format!("{name:?} is not held")));
    };
    eprint!(
        "{name:?} is a session advisory lock held by backend pid {} ({}).\n\
         It has no token: forcing it terminates that backend (pg_terminate_backend), which ends \
         its whole session: every lock it holds is freed and its open transaction rolled back.\n\
         Type yes to terminate it: ",
        session.pid, session.about
    );
    ask_yes()?;
    Ok(Forced::Session(session))
}

/// `--force` on a lock bound to a session: ends the session, says what happened; exit 0 when
/// the lock is free afterwards.
async fn end_session(
    store: &dyn Store,
    name: &str,
    session: &Session,
    json: bool,
) -> Result<ExitCode, Failure> {
    let released = store.end_session(name, session).await?;
    if json {
        println!(
            "{}",
            serde_json::json!({
                "name": name,
                "backend_pid": session.pid,
                "terminated": true,
                "released": released,
            })
        );
    } else if released {
        println!(
            "released {name:?}: terminated backend pid {} (its session held it)",
            session.pid
        );
    } else {
        eprintln!(
            "distlock: terminated backend pid {}, but {name:?} is still held (by it, not yet \
             gone, or by another session)",
            session.pid
        );
    }
    Ok(if released {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(FAILURE)
    })
}

/// `--force` is refused unless stdin is a terminal to confirm on.
fn refuse_without_terminal() -> Result<(), Failure> {
    if std::io::stdin().is_terminal() {
        Ok(())
    } else {
        Err(Failure::new(
            FAILURE,
            "--force needs a terminal to confirm on; give --token TOKEN (from `distlock show`) instead",
        ))
    }
}

/// Asks the operator on the terminal whether to release `name`, held with `token`; the token
/// when they typed `yes`.
fn confirm(name: &str, token: String) -> Result<String, Failure> {
    eprint!(
        "{name:?} is held with token {token}.\nRelease it? Its holder may still be working. Type yes to release: "
    );
    ask_yes()?;
    Ok(token)
}

/// Reads the operator's answer on the terminal: `Ok` when it is `yes`.
fn ask_yes() -> Result<(), Failure> {
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::new(FAILURE, format!("reading the answer: {e}")))?;
    if answer.trim() == "yes" {
        Ok(())
    } else {
        Err(Failure::new(FAILURE, "not released"))
    }
}
