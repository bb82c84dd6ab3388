//! `distlock revoke`: ask the holder of a lock to give it up (`Locker::revoke`), without taking
//! it from under the holder's work; a `distlock run` holder stops its command and releases.

use std::process::ExitCode;

use crate::cli::RevokeArgs;
use crate::exit::{FAILURE, Failure};
use crate::store::{Store, locker};

/// Asks the current holder of `args.name` to give it up. Exit 1 when nobody holds it.
pub(crate) async fn revoke(
    store: &dyn Store,
    args: &RevokeArgs,
    json: bool,
) -> Result<ExitCode, Failure> {
    let locker = locker(store, None)?;
    let asked = locker.revoke(&args.name, args.note.as_deref()).await?;
    if json {
        println!(
            "{}",
            serde_json::json!({ "name": args.name, "asked": asked.is_some(), "fencing_token": asked })
        );
    } else {
        match asked {
            Some(token) => println!(
                "asked the holder of {:?} (fencing token {token}) to give it up; a revocable \
                 holder is told at its next renewal",
                args.name
            ),
            None => println!("{:?} is not held: nobody to ask", args.name),
        }
    }
    Ok(if asked.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(FAILURE)
    })
}
