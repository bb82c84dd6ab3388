//! [`Store`] on Redlock (`--redlock`): N independent Redis masters, one per URL. Each master is
//! read as a single Redis is (`crate::connect::Target`, `redis_read.rs`), and a lock is shown as
//! held when a quorum (`N/2 + 1`) of the masters hold it with the same token; changes go
//! through a `lock_redlock::Redlock` over a `RedisLock` per URL, with the same prefix and
//! timeouts (`run`, `run --leader`, `release --token`).
//!
//! How the masters' answers are put together (`quorum.rs`):
//! - TTL: the quorum-th longest of the holding masters' TTLs, the time until fewer than a
//!   quorum hold it (conservative: no drift allowance is subtracted, the holder does that);
//! - fencing token: the largest of the holding masters' counters, which is how Redlock picks a
//!   grant's token (lock-redlock's README, "Fencing tokens");
//! - waiters and queued: the largest count of one master (a Redlock waiter subscribes on every
//!   master, so a sum would count it N times).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::Lock;
use lock_core::{Lease, Token};
use lock_redis::RedisLock;
use lock_redlock::Redlock;

use super::quorum::{aggregate, by_lock};
use super::{Releases, Store, redis_read};
use crate::cli::{ScanArgs, TargetArgs};
use crate::connect::Target;
use crate::exit::{BACKEND, Failure, USAGE, one_line};
use crate::inspect::{Listing, LockInfo};
use crate::tls::Tls;

/// Release rates over several masters: per name, the largest of theirs.
struct LargestOf(Vec<Box<dyn Releases>>);

#[async_trait]
impl Releases for LargestOf {
    async fn follow(&mut self, locks: &mut [LockInfo]) {
        for releases in &mut self.0 {
            releases.follow(locks).await;
        }
    }

    fn take_rates(&mut self, seconds: f64) -> std::collections::HashMap<String, f64> {
        let mut largest = std::collections::HashMap::new();
        for releases in &mut self.0 {
            for (name, rate) in releases.take_rates(seconds) {
                let entry = largest.entry(name).or_insert(0.0_f64);
                *entry = entry.max(rate);
            }
        }
        largest
    }
}

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
    urls: Vec<String>,
    prefix: String,
    tls: Tls,
    connect_timeout: Duration,
    command_timeout: Duration,
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
                            target.nodes[0].addr
                        ),
                    ));
                }
                Ok(target) => masters.push(Master {
                    addr: target.nodes[0].addr.clone(),
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
        Ok(Self {
            masters,
            urls: args.url.clone(),
            prefix: args.prefix.clone().unwrap_or_default(),
            tls,
            connect_timeout: args.connect_timeout,
            command_timeout: args.command_timeout,
        })
    }

    /// Masters needed for a quorum: `N/2 + 1`.
    fn quorum(&self) -> usize {
        self.masters.len() / 2 + 1
    }

    /// The Redlock over a `RedisLock` per URL (labelled by address), with the prefix and
    /// timeouts given. Nothing is sent until it is used.
    fn redlock(&self) -> Result<Redlock, Failure> {
        let mut builder = Redlock::builder();
        for (url, master) in self.urls.iter().zip(&self.masters) {
            let node = self
                .tls
                .apply(RedisLock::builder())
                .url(url.clone())
                .prefix(self.prefix.clone())
                .connect_timeout(self.connect_timeout)
                .command_timeout(self.command_timeout)
                .build()?;
            builder = builder.named_node(master.addr.clone(), node);
        }
        Ok(builder.build()?)
    }

    /// Runs `read` on every master that answered at connect time, at once: each master's
    /// answer, or why it has none.
    async fn on_each<'a, T, F>(&'a self, read: impl Fn(&'a Target) -> F) -> Vec<Result<T, String>>
    where
        F: Future<Output = Result<T, Failure>> + 'a,
    {
        let reads = self.masters.iter().map(|master| {
            let read = master.target.as_ref().map(&read);
            let error = master.error.clone();
            async move {
                match read {
                    Some(read) => read.await.map_err(|f| one_line(&f.message)),
                    None => Err(error.unwrap_or_default()),
                }
            }
        });
        futures::future::join_all(reads).await
    }

    /// A backend failure unless a quorum of masters answered: with fewer, "no quorum holds
    /// it" could be wrong.
    fn need_quorum<T>(&self, answers: &[Result<T, String>]) -> Result<usize, Failure> {
        let answered = answers.iter().filter(|a| a.is_ok()).count();
        if answered >= self.quorum() {
            return Ok(answered);
        }
        let why: Vec<String> = self
            .masters
            .iter()
            .zip(answers)
            .filter_map(|(m, a)| a.as_ref().err().map(|e| format!("{}: {e}", m.addr)))
            .collect();
        Err(Failure::new(
            BACKEND,
            format!(
                "only {answered} of {} Redlock masters answered ({} needed): {}",
                self.masters.len(),
                self.quorum(),
                why.join("; ")
            ),
        ))
    }
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

    async fn scan(&self, pattern: &str, scan: &ScanArgs) -> Result<Listing, Failure> {
        let listings = self
            .on_each(|target| redis_read::list(target, pattern, scan.count, scan.foreign))
            .await;
        self.need_quorum(&listings)?;
        let mut listing = Listing::default();
        let answers: Vec<Result<Vec<LockInfo>, String>> = listings
            .into_iter()
            .map(|l| {
                l.map(|l| {
                    listing.keys_scanned += l.keys_scanned;
                    listing.truncated |= l.truncated;
                    l.locks
                })
            })
            .collect();
        let masters: Vec<&str> = self.masters.iter().map(|m| m.addr.as_str()).collect();
        let errors: Vec<Option<&str>> = answers
            .iter()
            .map(|a| a.as_ref().err().map(String::as_str))
            .collect();
        listing.locks = by_lock(&answers)
            .values()
            .filter_map(|found| aggregate(&masters, found, &errors, false, false))
            .collect();
        Ok(listing)
    }

    async fn read(&self, name: &str) -> Result<Vec<LockInfo>, Failure> {
        let answers = self
            .on_each(|target| async move { redis_read::describe(target, &target.key(name)).await })
            .await;
        self.need_quorum(&answers)?;
        let masters: Vec<&str> = self.masters.iter().map(|m| m.addr.as_str()).collect();
        let errors: Vec<Option<&str>> = answers
            .iter()
            .map(|a| a.as_ref().err().map(String::as_str))
            .collect();
        Ok(by_lock(&answers)
            .values()
            .filter_map(|found| aggregate(&masters, found, &errors, true, true))
            .collect())
    }

    /// Releases through the Redlock: compare-and-delete with the token on every master;
    /// released when a quorum released.
    async fn release_token(&self, name: &str, token: &str) -> Result<bool, Failure> {
        let bytes = token
            .strip_prefix(lock_redis::TOKEN_PREFIX)
            .and_then(parse_hex)
            .ok_or_else(|| {
                Failure::new(
                    USAGE,
                    "a Redlock token is `dl:` and 32 hex digits, as `ls` and `show` print it",
                )
            })?;
        let redlock = self.redlock()?;
        // The lease is only the carrier of the name and token: release reads nothing else.
        let lease = Lease::new(
            name,
            Token::from_bytes(bytes),
            0,
            tokio::time::Instant::now() + self.command_timeout,
        );
        Ok(redlock.release(&lease).await?)
    }

    fn lock(&self, _describe: Option<&str>) -> Result<Arc<dyn Lock>, Failure> {
        Ok(Arc::new(self.redlock()?))
    }

    /// Each master's release announcements, counted as on a single Redis; per name, the
    /// largest rate among the masters. One Redlock release is announced by every master that
    /// released its key (a quorum at least), so a sum would count it N times; a master that
    /// missed it (down, lagging) only lowers its own count.
    async fn releases(&self) -> Result<Option<Box<dyn Releases>>, Failure> {
        let mut each = Vec::new();
        for target in self.masters.iter().filter_map(|m| m.target.as_ref()) {
            // A master whose subscription fails only leaves its own count out.
            if let Ok(Some(releases)) = target.releases().await {
                each.push(releases);
            }
        }
        if each.is_empty() {
            return Ok(None);
        }
        Ok(Some(Box::new(LargestOf(each))))
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

/// 32 hex digits as 16 bytes.
fn parse_hex(hex: &str) -> Option<[u8; 16]> {
    if hex.len() != 32 || !hex.is_ascii() {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_tokens_are_read() {
        assert_eq!(addr_of("redis://u:p@h:6379/0"), "h:6379");
        assert_eq!(addr_of("redis://h:1?protocol=resp3"), "h:1");
        assert_eq!(parse_hex(&"ab".repeat(16)), Some([0xab; 16]));
        assert_eq!(parse_hex("ab"), None);
    }
}
