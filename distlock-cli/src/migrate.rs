//! `distlock migrate`: installs what fenced writes need, so that `redis-cli` and `psql` alone
//! can write fenced. On Redis (one server, each master of a Cluster, the master Sentinel
//! names), the `distlock` function library (`RedisFences::load`: loaded, or replaced only when
//! the loaded one is older). On PostgreSQL, lock-postgres's migration (`PostgresLock::migrate`:
//! the lease table and its functions, one transaction). Each store says what it did
//! ([`Store::migrate`]).

use std::process::ExitCode;

use crate::exit::Failure;
use crate::output::print_json;
use crate::store::Store;

/// `migrate` on any store: what it installed, as a line or a JSON object.
///
/// # Errors
/// As [`Store::migrate`].
pub(crate) async fn migrate(store: &dyn Store, json: bool) -> Result<ExitCode, Failure> {
    let (line, doc) = store.migrate().await?;
    if json {
        print_json(&doc)?;
    } else {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
