//! `distlock watch`: `ls` again every interval, with the releases announced in between (where
//! the store announces them: [`Store::releases`]).

use std::process::ExitCode;
use std::time::Instant;

use crate::cli::WatchArgs;
use crate::exit::Failure;
use crate::store::Store;
use crate::{inspect, render};

/// Refreshes until Ctrl-C or `--iterations`.
pub(crate) async fn watch(
    store: &dyn Store,
    args: &WatchArgs,
    json: bool,
) -> Result<ExitCode, Failure> {
    let mut releases = store.releases().await?;
    let term = console::Term::stdout();
    let live = !json && term.is_term();
    let mut last = Instant::now();
    let mut done = 0u64;
    // Bounded by --iterations when given; otherwise it is the user's Ctrl-C that ends it.
    while args.iterations.is_none_or(|n| done < n) {
        let listing = store.list(&args.pattern, &args.scan).await?;
        let elapsed = last.elapsed().as_secs_f64().max(0.001);
        last = Instant::now();
        let mut listing = listing;
        if let Some(releases) = releases.as_mut() {
            releases.follow(&mut listing.locks).await;
        }
        let rates = releases
            .as_mut()
            .map(|releases| releases.take_rates(elapsed))
            .unwrap_or_default();
        let shown = if json {
            emit(&format!(
                "{}",
                serde_json::json!({
                    "locks": listing.locks,
                    "releases_per_second": rates,
                })
            ))
        } else {
            if live {
                let _ = term.clear_screen();
            }
            let rate = |lock: &inspect::LockInfo| match releases {
                Some(_) => format!("{:.1}", rates.get(&lock.name).copied().unwrap_or(0.0)),
                None => "-".into(),
            };
            emit(&format!(
                "{} held · refresh every {} · Ctrl-C ends\n{}",
                listing.locks.len(),
                humantime::format_duration(args.interval),
                render::text(&render::lock_table(
                    &listing.locks,
                    Some(("RELEASES/S", &rate))
                ))
            ))
        };
        // The reader went away (`watch --json | head`): nothing more to show it.
        if !shown {
            break;
        }
        done += 1;
        if args.iterations.is_some_and(|n| done >= n) {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(args.interval) => {}
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `text` and a newline on stdout, flushed; `false` when stdout is gone (a closed pipe),
/// where `println!` would panic.
fn emit(text: &str) -> bool {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}").and_then(|()| out.flush()).is_ok()
}
