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
    let mut releases = Releases::start(target).await?;
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
        let mut listing = listing;
        releases.follow(&mut listing.locks).await;
        let rates = take_rates(releases.counts(), &target.prefix, elapsed);
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
            let rate = |lock: &inspect::LockInfo| match releases.counts() {
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

/// At most this many release channels are followed on a cluster.
#[cfg(feature = "cluster")]
const MAX_SHARDED: usize = 1000;

/// Where release announcements are counted.
enum Releases {
    /// A single server: `PSUBSCRIBE *:distlock-released` sees every name's releases.
    Pattern(Counts),
    /// A cluster: releases are announced with sharded pub/sub, which has no patterns, so the
    /// channel of each name seen held is subscribed (`SSUBSCRIBE`) from then on.
    #[cfg(feature = "cluster")]
    Sharded {
        conn: redis::cluster_async::ClusterConnection,
        followed: std::collections::HashSet<String>,
        counts: Counts,
    },
    /// Not counted (a cluster, without the `cluster` feature).
    #[cfg_attr(feature = "cluster", allow(dead_code))]
    Off,
}

impl Releases {
    /// Starts counting on every node.
    async fn start(target: &Target) -> Result<Self, Failure> {
        let counts: Counts = Arc::default();
        if target.cluster {
            #[cfg(feature = "cluster")]
            return Self::sharded(target, counts).await;
            #[cfg(not(feature = "cluster"))]
            return Ok(Self::Off);
        }
        for node in &target.nodes {
            let client = target.tls.client(node.info.clone())?;
            let failed = |e: &redis::RedisError| {
                Failure::backend(&format!("subscribing on {}", node.addr), e)
            };
            let mut pubsub = client.get_async_pubsub().await.map_err(|e| failed(&e))?;
            pubsub
                .psubscribe("*:distlock-released")
                .await
                .map_err(|e| failed(&e))?;
            let counts = Arc::clone(&counts);
            tokio::spawn(async move {
                let mut messages = pubsub.into_on_message();
                while let Some(message) = messages.next().await {
                    count(&counts, message.get_channel_name());
                }
            });
        }
        Ok(Self::Pattern(counts))
    }

    /// A RESP3 cluster connection whose sharded messages are counted.
    #[cfg(feature = "cluster")]
    async fn sharded(target: &Target, counts: Counts) -> Result<Self, Failure> {
        let (push_tx, mut pushes) = tokio::sync::mpsc::unbounded_channel::<redis::PushInfo>();
        let infos: Vec<redis::ConnectionInfo> =
            target.nodes.iter().map(|n| n.info.clone()).collect();
        let conn = redis::cluster::ClusterClientBuilder::new(infos)
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(push_tx)
            .connection_timeout(target.command_timeout)
            .response_timeout(target.command_timeout)
            .build()?
            .get_async_connection()
            .await
            .map_err(|e| Failure::backend("subscribing on the cluster", &e))?;
        let c = Arc::clone(&counts);
        tokio::spawn(async move {
            while let Some(push) = pushes.recv().await {
                if push.kind == redis::PushKind::SMessage
                    && let Some(redis::Value::BulkString(channel)) = push.data.first()
                {
                    count(&c, &String::from_utf8_lossy(channel));
                }
            }
        });
        Ok(Self::Sharded {
            conn,
            followed: std::collections::HashSet::new(),
            counts,
        })
    }

    /// On a cluster, subscribes to the release channels of `locks` not yet followed, and
    /// takes this watch's own subscription out of their waiters (it read them after
    /// subscribing, or before: then it counted none).
    async fn follow(&mut self, locks: &mut [inspect::LockInfo]) {
        #[cfg(feature = "cluster")]
        if let Self::Sharded { conn, followed, .. } = self {
            for lock in locks.iter_mut() {
                let channel = LockKeys::of_key(&lock.key).released;
                if followed.contains(&channel) {
                    lock.waiters = lock.waiters.saturating_sub(1);
                } else if followed.len() < MAX_SHARDED {
                    // A failed subscription only leaves this name's count at zero.
                    if conn.ssubscribe(&channel).await.is_ok() {
                        followed.insert(channel);
                    }
                }
            }
        }
        let _ = locks;
    }

    /// The counts, when releases are counted.
    fn counts(&self) -> Option<&Counts> {
        match self {
            Self::Pattern(counts) => Some(counts),
            #[cfg(feature = "cluster")]
            Self::Sharded { counts, .. } => Some(counts),
            Self::Off => None,
        }
    }
}

/// One more release on `channel`.
fn count(counts: &Counts, channel: &str) {
    *counts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(channel.to_owned())
        .or_default() += 1;
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
