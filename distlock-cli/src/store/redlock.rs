//! [`Store`] on Redlock (`--redlock`): N independent Redis masters, one per URL, each checked
//! at connect time as a single Redis is (`crate::connect::Target`), and a `lock_redlock::Redlock`
//! over a `RedisLock` per URL, with the same prefix and timeouts. The Redlock's own operator
//! reads show a lock held when a quorum (`N/2 + 1`) of the masters hold it with the same token
//! (lock-redlock's `inspect`), and each master's own answer in `show`.

use std::sync::Arc;

use async_trait::async_trait;
use lock_core::backend::{Inspect, Lock};
use lock_redis::RedisLock;
use lock_redlock::Redlock;

use super::Store;
use crate::cli::TargetArgs;
use crate::connect::Target;
use crate::exit::{BACKEND, Failure, USAGE};
use crate::tls::Tls;

/// One master as connected: its address, and its connection or why there is none.
struct Master {
    /// `host:port`, for messages, the `node` column and the Redlock's node labels.
    addr: String,
    /// `None` when it did not answer at connect time (a master down: the others may still
    /// form a quorum).
    target: Option<Target>,
    error: Option<String>,
}

/// Redlock's masters, as the command sees them.
pub(crate) struct RedlockTarget {
    masters: Vec<Master>,
    /// The Redlock over every master: reads, releases, `run` and elections.
    redlock: Redlock,
}

impl RedlockTarget {
    /// Connects to every master at once (each as a single Redis, within `--connect-timeout`).
    /// Masters that do not answer are kept as such: reads need a quorum of answers.
    ///
    /// # Errors
    /// A usage failure for a URL that does not parse or that is a Redis Cluster's; a backend
    /// failure when no master answers.
    ///
    /// # Cancel safety
    /// Cancel safe: it only opens connections.
    pub(crate) async fn connect(args: &TargetArgs) -> Result<Self, Failure> {
        let tls = Tls::load(args)?;
        let connects = args.url.iter().map(|url| {
            let mut one = args.clone();
            one.url = vec![url.clone()];
            one.redlock = false;
            async move { Target::connect(&one).await }
        });
        let results = futures::future::join_all(connects).await;
        let mut masters = Vec::with_capacity(args.url.len());
        let mut last = None;
        for (url, result) in args.url.iter().zip(results) {
            match result {
                Ok(target) if target.cluster => {
                    return Err(Failure::new(
                        USAGE,
                        format!(
                            "--redlock takes independent masters; {} is a Redis Cluster's node",
                            target.node.addr
                        ),
                    ));
                }
                Ok(target) => masters.push(Master {
                    addr: target.node.addr.clone(),
                    target: Some(target),
                    error: None,
                }),
                Err(failure) if failure.code == USAGE => return Err(failure),
                Err(failure) => {
                    masters.push(Master {
                        addr: addr_of(url),
                        target: None,
                        error: Some(failure.message.clone()),
                    });
                    last = Some(failure);
                }
            }
        }
        if masters.iter().all(|m| m.target.is_none()) {
            return Err(last.unwrap_or_else(|| Failure::new(USAGE, "no Redis URL given")));
        }
        let redlock = redlock(&masters, &args.url, args, &tls)?;
        Ok(Self { masters, redlock })
    }
}

/// The Redlock over a `RedisLock` per URL (labelled by address), with the prefix and timeouts
/// given. Nothing is sent until it is used.
fn redlock(
    masters: &[Master],
    urls: &[String],
    args: &TargetArgs,
    tls: &Tls,
) -> Result<Redlock, Failure> {
    let mut builder = Redlock::builder();
    for (url, master) in urls.iter().zip(masters) {
        let node = tls
            .apply(RedisLock::builder())
            .url(url.clone())
            .prefix(args.prefix.clone().unwrap_or_default())
            .connect_timeout(args.connect_timeout)
            .command_timeout(args.command_timeout)
            .build()?;
        builder = builder.named_node(master.addr.clone(), node);
    }
    Ok(builder.build()?)
}

/// `host:port` of a Redis URL, without its scheme, credentials, database or query.
fn addr_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split(['/', '?']).next().unwrap_or(rest).to_owned()
}

#[async_trait]
impl Store for RedlockTarget {
    fn backend(&self) -> &'static str {
        "redlock"
    }

    fn inspector(&self) -> Option<&dyn Inspect> {
        Some(&self.redlock)
    }

    fn lock(&self, _describe: Option<&str>) -> Result<Arc<dyn Lock>, Failure> {
        Ok(Arc::new(self.redlock.clone()))
    }

    async fn migrate(&self) -> Result<(String, serde_json::Value), Failure> {
        let mut lines = Vec::new();
        let mut outcomes = Vec::new();
        for master in &self.masters {
            let Some(target) = &master.target else {
                return Err(Failure::new(
                    BACKEND,
                    format!(
                        "{}: {}",
                        master.addr,
                        master.error.as_deref().unwrap_or("no answer")
                    ),
                ));
            };
            let load = target
                .lock_with(RedisLock::builder())?
                .fences()
                .load()
                .await?;
            lines.push(format!("{}: {load}", master.addr));
            outcomes.push(serde_json::json!({
                "node": master.addr,
                "functions": load.uses_functions(),
                "outcome": load.to_string(),
            }));
        }
        Ok((
            format!("Redlock: {}", lines.join("; ")),
            serde_json::json!({
                "backend": "redlock",
                "library": "distlock",
                "version": lock_redis::LIBRARY_VERSION,
                "masters": outcomes,
            }),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_read() {
        assert_eq!(addr_of("redis://u:p@h:6379/0"), "h:6379");
        assert_eq!(addr_of("redis://h:1?protocol=resp3"), "h:1");
    }
}
