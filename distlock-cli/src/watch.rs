//! `distlock watch`: `ls` again every interval, with the releases announced in between.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::StreamExt;
use lock_redis::LockKeys;

use crate::cli::WatchArgs;
use crate::connect::Target;
use crate::exit::Failure;
use crate::{inspect, render};

/// Releases announced per release channel since the last refresh.
type Counts = Arc<Mutex<HashMap<String, u64>>>;

/// Refreshes until Ctrl-C or `--iterations`.
pub(crate) async fn watch(
    target: &Target,
    args: &WatchArgs,
    json: bool,
) -> Result<ExitCode, Failure> {
    let counts = count_releases(target).await?;
    let term = console::Term::stdout();
    let live = !json && term.is_term();
    let mut last = Instant::now();
    let mut done = 0u64;
    // Bounded by --iterations when given; otherwise it is the user's Ctrl-C that ends it.
    while args.iterations.is_none_or(|n| done < n) {
        let listing =
            inspect::list(target, &args.pattern, args.scan.count, args.scan.foreign).await?;
        let elapsed = last.elapsed().as_secs_f64().max(0.001);
        last = Instant::now();
        let rates = take_rates(counts.as_ref(), &target.prefix, elapsed);
        if json {
            println!(
                "{}",
                serde_json::json!({
                    "locks": listing.locks,
                    "releases_per_second": rates,
                })
            );
        } else {
            if live {
                let _ = term.clear_screen();
            }
            let rate = |lock: &inspect::LockInfo| match &counts {
                Some(_) => format!("{:.1}", rates.get(&lock.name).copied().unwrap_or(0.0)),
                None => "-".into(),
            };
            println!(
                "{} held · refresh every {} · Ctrl-C ends",
                listing.locks.len(),
                humantime::format_duration(args.interval)
            );
            println!(
                "{}",
                render::text(&render::lock_table(
                    &listing.locks,
                    Some(("RELEASES/S", &rate))
                ))
            );
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

/// Counts the releases announced on every node (`PSUBSCRIBE *:distlock-released`). `None` on
/// a cluster: releases are announced there with sharded pub/sub, which has no patterns.
async fn count_releases(target: &Target) -> Result<Option<Counts>, Failure> {
    if target.cluster {
        return Ok(None);
    }
    let counts: Counts = Arc::default();
    for node in &target.nodes {
        let client = target.tls.client(node.info.clone())?;
        let mut pubsub = client
            .get_async_pubsub()
            .await
            .map_err(|e| Failure::backend(&format!("subscribing on {}", node.addr), &e))?;
        pubsub
            .psubscribe("*:distlock-released")
            .await
            .map_err(|e| Failure::backend(&format!("subscribing on {}", node.addr), &e))?;
        let counts = Arc::clone(&counts);
        tokio::spawn(async move {
            let mut messages = pubsub.into_on_message();
            while let Some(message) = messages.next().await {
                let channel = message.get_channel_name().to_owned();
                *counts
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(channel)
                    .or_default() += 1;
            }
        });
    }
    Ok(Some(counts))
}

/// Releases per second per lock name since the last call, and the counts reset.
fn take_rates(counts: Option<&Counts>, prefix: &str, seconds: f64) -> HashMap<String, f64> {
    let Some(counts) = counts else {
        return HashMap::new();
    };
    let taken = std::mem::take(&mut *counts.lock().unwrap_or_else(PoisonError::into_inner));
    taken
        .into_iter()
        .filter_map(|(channel, n)| {
            let (key, _) = LockKeys::owner_of(&channel)?;
            let name = key.strip_prefix(prefix)?.to_owned();
            #[allow(clippy::cast_precision_loss)] // counts far below 2^52
            Some((name, n as f64 / seconds))
        })
        .collect()
}
