//! `distlock migrate`: installs what fenced writes need, so that `redis-cli` and `psql` alone
//! can write fenced. On Redis (one server, each master of a Cluster, the master Sentinel
//! names), the `distlock` function library (`RedisFences::load`: loaded, or replaced only when
//! the loaded one is older). On PostgreSQL (`postgres://`, `postgresql://`), lock-postgres's
//! migration (`PostgresLock::migrate`: the lease table and its functions, one transaction).

use std::process::ExitCode;

use crate::cli::Cli;
use crate::connect::Target;
use crate::exit::{Failure, USAGE};
use crate::output::print_json;

/// Whether the URLs name a PostgreSQL server (the first decides).
pub(crate) fn is_postgres(urls: &[String]) -> bool {
    urls.first()
        .is_some_and(|url| url.starts_with("postgres://") || url.starts_with("postgresql://"))
}

/// `migrate` on a PostgreSQL URL: lock-postgres's migration, bounded by the timeouts given.
///
/// # Errors
/// A usage failure for several URLs or a URL lock-postgres refuses; a backend failure when
/// the server is unreachable or refuses (no `CREATE` right).
pub(crate) async fn postgres(cli: &Cli) -> Result<ExitCode, Failure> {
    let [url] = cli.target.url.as_slice() else {
        return Err(Failure::new(USAGE, "migrate takes one PostgreSQL URL"));
    };
    let lock = lock_postgres::PostgresLock::builder()
        .url(url.clone())
        .connect_timeout(cli.target.connect_timeout)
        .statement_timeout(cli.target.command_timeout)
        .announcements(false)
        .build()?;
    lock.migrate().await?;
    let version = lock_postgres::SCHEMA_VERSION;
    if cli.json {
        print_json(&serde_json::json!({
            "backend": "postgres",
            "schema_version": version,
        }))?;
    } else {
        println!("PostgreSQL: the distlock schema is at version {version}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `migrate` on Redis: loads the `distlock` function library through a lock built like every
/// other subcommand's, and says what happened (exit 0 also when functions are unavailable:
/// fenced writes then use the same code as scripts).
///
/// # Errors
/// A backend failure when Redis is unreachable or answers an error.
pub(crate) async fn redis(target: &Target, json: bool) -> Result<ExitCode, Failure> {
    let load = target.lock()?.fences().load().await?;
    if json {
        print_json(&serde_json::json!({
            "backend": "redis",
            "library": "distlock",
            "version": lock_redis::LIBRARY_VERSION,
            "functions": load.uses_functions(),
            "outcome": load.to_string(),
        }))?;
    } else {
        println!("Redis: {load}");
    }
    Ok(ExitCode::SUCCESS)
}
