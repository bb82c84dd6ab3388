//! What the subcommands print on stdout: `ls` and `show` (the same for Redis and etcd, from the
//! same `LockInfo`s), and JSON for every subcommand. Here rather than in `main.rs`, so that the
//! subcommands the root dispatches to never import the root back.

use crate::exit::{FAILURE, Failure};
use crate::{inspect, render};

/// `ls`'s output: the listing as JSON, or a table, or a line saying nothing matched.
pub(crate) fn print_listing(
    listing: &inspect::Listing,
    pattern: &str,
    json: bool,
) -> Result<(), Failure> {
    if json {
        print_json(listing)?;
    } else if listing.locks.is_empty() {
        println!("no held locks match {pattern:?}");
    } else {
        println!(
            "{}",
            render::text(&render::lock_table(&listing.locks, None))
        );
    }
    Ok(())
}

/// `show`'s output: the locks named `name` as JSON, or one table each, or a line saying it is
/// not held.
pub(crate) fn print_show(
    name: &str,
    locks: &[inspect::LockInfo],
    json: bool,
) -> Result<(), Failure> {
    if json {
        print_json(&serde_json::json!({
            "name": name,
            "held": locks.iter().any(inspect::LockInfo::is_held),
            "locks": locks,
        }))
    } else {
        if !locks.iter().any(inspect::LockInfo::is_held) {
            println!("{name:?} is not held");
        }
        for (i, lock) in locks.iter().enumerate() {
            if i > 0 {
                println!();
            }
            println!("{}", render::text(&render::show_table(lock)));
        }
        Ok(())
    }
}

/// `value` as one JSON document on stdout.
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::new(FAILURE, format!("JSON: {e}")))?;
    println!("{text}");
    Ok(())
}
