//! [`Store`] on Redlock (`--redlock`): N independent Redis masters, one per URL. Each master is
//! read as a single Redis is (`crate::connect::Target`, `inspect`), and a lock is shown as
//! held when a quorum (`N/2 + 1`) of the masters hold it with the same token; changes go
//! through a `lock_redlock::Redlock` over a `RedisLock` per URL, with the same prefix and
//! timeouts (`run`, `run --leader`, `release --token`).
//!
//! How the masters' answers are put together (`aggregate`):
//! - TTL: the quorum-th longest of the holding masters' TTLs, the time until fewer than a
//!   quorum hold it (conservative: no drift allowance is subtracted, the holder does that);
//! - fencing token: the largest of the holding masters' counters, which is how Redlock picks a
//!   grant's token (lock-redlock's README, "Fencing tokens");
//! - waiters and queued: the largest count of one master (a Redlock waiter subscribes on every
//!   master, so a sum would count it N times).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::Lock;
use lock_core::{Lease, Token};
use lock_redis::RedisLock;
use lock_redlock::Redlock;

use super::Store;
use crate::cli::{ScanArgs, TargetArgs};
use crate::connect::Target;
use crate::exit::{BACKEND, Failure, USAGE, one_line};
use crate::inspect::{self, Listing, LockInfo, NO_QUORUM, NodeAnswer, Quorum};
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

/// The masters' answers for one name and kind (`found[i]`: master `i`'s lock, if it holds
/// one), put together: the lock held by a quorum with one token, or with `no_quorum` a
/// [`NO_QUORUM`] entry when no token has a quorum. `errors[i]`: why master `i` did not answer.
/// `with_nodes`: each master's answer as a row.
fn aggregate(
    masters: &[&str],
    found: &[Option<&LockInfo>],
    errors: &[Option<&str>],
    with_nodes: bool,
    no_quorum: bool,
) -> Option<LockInfo> {
    let required = masters.len() / 2 + 1;
    let answered = errors.iter().filter(|e| e.is_none()).count();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for lock in found.iter().flatten() {
        if let Some(token) = lock.token.as_deref() {
            *counts.entry(token).or_default() += 1;
        }
    }
    // The token most masters hold (ties: the smaller token, so the answer is stable).
    let (best, holding) = counts
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map_or((None, 0), |(t, n)| (Some((*t).to_owned()), *n));
    let held = holding >= required;
    if !held && !no_quorum {
        return None;
    }
    let first = found.iter().flatten().next()?;
    let agreeing: Vec<&LockInfo> = found
        .iter()
        .flatten()
        .copied()
        .filter(|l| held && l.token == best)
        .collect();
    let mut ttls: Vec<i64> = agreeing.iter().filter_map(|l| l.ttl_ms).collect();
    ttls.sort_unstable_by(|a, b| b.cmp(a));
    let nodes = if with_nodes {
        masters
            .iter()
            .zip(found.iter().zip(errors))
            .map(|(addr, (lock, error))| NodeAnswer {
                node: (*addr).to_owned(),
                token: lock.and_then(|l| l.token.clone()),
                ttl_ms: lock.and_then(|l| l.ttl_ms),
                fencing_token: lock.and_then(|l| l.fencing_token),
                agrees: held && lock.is_some_and(|l| l.token == best),
                error: error.map(str::to_owned),
            })
            .collect()
    } else {
        Vec::new()
    };
    let quorum = Some(Quorum {
        holding,
        required,
        masters: masters.len(),
        answered,
    });
    if !held {
        return Some(LockInfo {
            name: first.name.clone(),
            key: first.key.clone(),
            kind: NO_QUORUM,
            node: masters.join(","),
            quorum,
            nodes,
            ..LockInfo::default()
        });
    }
    let holder_of = agreeing.first().copied().unwrap_or(first);
    Some(LockInfo {
        ttl_ms: ttls.get(required - 1).copied(),
        fencing_token: agreeing.iter().filter_map(|l| l.fencing_token).max(),
        waiters: agreeing.iter().map(|l| l.waiters).max().unwrap_or(0),
        queued: agreeing.iter().map(|l| l.queued).max().unwrap_or(0),
        holder: agreeing.iter().find_map(|l| l.holder.clone()),
        node: masters
            .iter()
            .zip(found)
            .filter(|(_, l)| l.is_some_and(|l| l.token == best))
            .map(|(a, _)| *a)
            .collect::<Vec<_>>()
            .join(","),
        quorum,
        nodes,
        ..holder_of.clone()
    })
}

/// Every (name, kind) in the masters' answers, each with what every master says of it.
fn by_lock(
    answers: &[Result<Vec<LockInfo>, String>],
) -> BTreeMap<(String, &'static str), Vec<Option<&LockInfo>>> {
    let mut locks: BTreeMap<(String, &'static str), Vec<Option<&LockInfo>>> = BTreeMap::new();
    for (i, answer) in answers.iter().enumerate() {
        for lock in answer.iter().flatten() {
            locks
                .entry((lock.name.clone(), lock.kind))
                .or_insert_with(|| vec![None; answers.len()])[i] = Some(lock);
        }
    }
    locks
}

#[async_trait]
impl Store for RedlockTarget {
    fn backend(&self) -> &'static str {
        "redlock"
    }

    async fn scan(&self, pattern: &str, scan: &ScanArgs) -> Result<Listing, Failure> {
        let listings = self
            .on_each(|target| inspect::list(target, pattern, scan.count, scan.foreign))
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
            .on_each(|target| async move { inspect::describe(target, &target.key(name)).await })
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

    fn held(token: &str, ttl: i64, fence: u64) -> LockInfo {
        LockInfo {
            name: "job".into(),
            key: "job".into(),
            kind: "mutex",
            token: Some(token.into()),
            ttl_ms: Some(ttl),
            fencing_token: Some(fence),
            waiters: 1,
            ..LockInfo::default()
        }
    }

    #[test]
    fn a_quorum_with_one_token_is_held_with_conservative_figures() {
        let (a, b, c) = (
            held("dl:a", 9_000, 5),
            held("dl:a", 7_000, 9),
            held("dl:b", 8_000, 2),
        );
        let masters = ["m1", "m2", "m3"];
        let lock = aggregate(
            &masters,
            &[Some(&a), Some(&b), Some(&c)],
            &[None, None, None],
            true,
            false,
        )
        .expect("held");
        assert_eq!(lock.token.as_deref(), Some("dl:a"));
        assert_eq!(lock.ttl_ms, Some(7_000), "the quorum-th longest TTL");
        assert_eq!(lock.fencing_token, Some(9), "the largest of the holders'");
        assert_eq!(lock.waiters, 1, "the largest, not the sum");
        assert_eq!(lock.node, "m1,m2");
        let q = lock.quorum.expect("verdict");
        assert_eq!((q.holding, q.required, q.masters), (2, 2, 3));
        assert_eq!(
            lock.nodes.iter().map(|n| n.agrees).collect::<Vec<_>>(),
            [true, true, false]
        );
    }

    #[test]
    fn a_minority_is_not_held_and_show_gives_each_master() {
        let a = held("dl:a", 9_000, 5);
        let masters = ["m1", "m2", "m3"];
        let found = [Some(&a), None, None];
        let errors = [None, None, Some("refused")];
        assert!(aggregate(&masters, &found, &errors, false, false).is_none());
        let shown = aggregate(&masters, &found, &errors, true, true).expect("shown");
        assert_eq!(shown.kind, NO_QUORUM);
        assert!(!shown.is_held());
        assert_eq!(shown.token, None);
        assert_eq!(shown.nodes.len(), 3);
        assert_eq!(shown.nodes[0].token.as_deref(), Some("dl:a"));
        assert_eq!(shown.nodes[2].error.as_deref(), Some("refused"));
    }

    #[test]
    fn urls_and_tokens_are_read() {
        assert_eq!(addr_of("redis://u:p@h:6379/0"), "h:6379");
        assert_eq!(addr_of("redis://h:1?protocol=resp3"), "h:1");
        assert_eq!(parse_hex(&"ab".repeat(16)), Some([0xab; 16]));
        assert_eq!(parse_hex("ab"), None);
    }
}
