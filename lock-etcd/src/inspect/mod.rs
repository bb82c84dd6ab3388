//! Operator reads of lock-etcd's keys (lock-core's [`Inspect`]: what `distlock ls`, `show`,
//! `release --token` and `watch` need), beside the layout that writes them (`layout.rs`).
//!
//! - `list`: one range read of the whole prefix, paged ([`ListOptions::batch`] keys a page),
//!   in key order: every key beside the lock keys (their spaces start with NUL) and then the
//!   lock keys; then each lock key's etcd lease TTL.
//! - `read`: one transaction reading the lock key, its note, fence, semaphore holders, fair
//!   queue, readers, waiting writers and grant times; then every holder's etcd lease TTL.
//! - `release_held`: one transaction that deletes the holder's key only if it still holds the
//!   token (never a bare delete), so the deletion wakes the name's waiters (they watch it).
//! - `release_feed`: one watch on the prefix, deletes only (`feed.rs`).
//!
//! The kinds: a holder of the lock key is a writer ([`HeldKind::Write`]) when the fence key
//! was put by the same transaction, a fair lock ([`HeldKind::Fair`]) when the name has queue
//! entries, else a mutex; readers ([`HeldKind::Read`]) and semaphore holders are keys of
//! their own (`parts.rs`). A holder's token is its stored value (`dl:` + 32 hex digits), as
//! `ls` prints it; its fencing token is the revision of its grant; "held since" is the grant
//! time its grant put beside it (`layout::granted_key`).

mod feed;
mod parts;

use std::collections::BTreeMap;

use async_trait::async_trait;
use etcd_client::{
    Compare, CompareOp, GetOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse,
};
use futures::{StreamExt, stream};
use lock_core::backend::{HeldLock, Inspect, ListOptions, Listing, NamePattern, ReleaseFeed};
use lock_core::{LockError, Op, TimeoutPhase};

use self::parts::{Context, Parts, TTL_READS_IN_FLIGHT};
use crate::EtcdLock;
use crate::error::bounded;
use crate::layout::{
    self, FAIR, FENCE, GRANTED, NOTE, READERS, SEMAPHORE, WAITING, granted_key, parse, prefix_end,
    range_end, token_hex, under,
};

/// A listing stops after this many pages, so it always ends; a keyspace that large is
/// reported as cut short ([`Listing::truncated`]).
const MAX_PAGES: u64 = 1_000_000;

impl EtcdLock {
    /// The members, as the `node` of every hold: every one, since any member answers for
    /// every key (`host:port`, comma separated).
    fn node(&self) -> String {
        let members: Vec<&str> = (self.endpoints().iter())
            .map(|url| {
                let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
                rest.trim_end_matches('/')
            })
            .collect();
        members.join(",")
    }
}

#[async_trait]
impl Inspect for EtcdLock {
    /// Every lock under the prefix whose name matches `pattern`; with
    /// [`ListOptions::foreign`], also keys with an etcd lease whose value is not a distlock
    /// token (another client's lock under the same names). Readers' and semaphore holders'
    /// TTLs are left out (`None`): [`Inspect::inspect`] reads them.
    async fn list(
        &self,
        pattern: &NamePattern,
        options: &ListOptions,
    ) -> Result<Listing, LockError> {
        let exec = self.executor();
        let client = exec.client().await?;
        let prefix = exec.prefix();
        let end = prefix_end(prefix.as_bytes());
        let mut start = if prefix.is_empty() {
            vec![0]
        } else {
            prefix.as_bytes().to_vec()
        };
        let (mut scanned, mut pages, mut truncated) = (0_u64, 0_u64, false);
        let mut names: BTreeMap<String, Parts> = BTreeMap::new();
        let mut kv = client.kv_client();
        loop {
            let page = GetOptions::new()
                .with_range(end.clone())
                .with_limit(i64::from(options.batch.max(1)));
            let answer = bounded(
                Op::Read,
                TimeoutPhase::Command,
                exec.command_timeout(),
                kv.get(start.clone(), Some(page)),
            )
            .await?;
            let kvs = answer.kvs();
            scanned += kvs.len() as u64;
            if let Some(last) = kvs.last() {
                // The next page starts just after the last key read.
                start = last.key().to_vec();
                start.push(0);
            }
            for kv in kvs {
                let Some(parsed) = parse(prefix, kv.key()) else {
                    continue;
                };
                if pattern.matches(parsed.name()) {
                    (names.entry(parsed.name().to_owned()).or_default()).add(&parsed, kv.clone());
                }
            }
            pages += 1;
            if !answer.more() {
                break;
            }
            if pages >= MAX_PAGES {
                truncated = true;
                break;
            }
        }
        let node = self.node();
        let cx = Context {
            exec,
            client: &client,
            node: &node,
            foreign: options.foreign,
            member_ttls: false,
        };
        let cx = &cx;
        // Collected first: a stream of closures over borrowed names trips the `Send` check of
        // the trait's boxed future (rust#102211).
        let builds: Vec<_> = names
            .into_iter()
            .map(|(name, parts)| Box::pin(async move { parts.build(cx, &name).await }))
            .collect();
        let built = stream::iter(builds)
            .buffered(TTL_READS_IN_FLIGHT)
            .collect::<Vec<_>>()
            .await;
        let mut locks = Vec::new();
        for held in built {
            locks.extend(held?);
        }
        let mut listing = Listing::new(locks, scanned);
        listing.truncated = truncated;
        Ok(listing)
    }

    /// Every hold of `name`, another client's key with a lease included
    /// ([`HeldKind::Foreign`](lock_core::backend::HeldKind::Foreign)), with every listed
    /// holder's TTL.
    async fn read(&self, name: &str) -> Result<Vec<HeldLock>, LockError> {
        layout::check_name(name)?;
        let exec = self.executor();
        let client = exec.client().await?;
        let prefix = exec.prefix();
        let range = |mark: &[u8]| {
            let start = under(mark, prefix, name);
            let options = GetOptions::new()
                .with_range(range_end(&start))
                .with_sort(SortTarget::Create, SortOrder::Ascend);
            TxnOp::get(start, Some(options))
        };
        let txn = Txn::new().and_then([
            TxnOp::get(exec.key(name), None),
            TxnOp::get(under(NOTE, prefix, name), None),
            TxnOp::get(under(FENCE, prefix, name), None),
            range(SEMAPHORE),
            range(FAIR),
            range(READERS),
            range(WAITING),
            range(GRANTED),
        ]);
        let answer = exec.txn(&client, Op::Read, txn).await?;
        let mut parts = Parts::default();
        for op in answer.op_responses() {
            if let TxnOpResponse::Get(get) = op {
                for kv in get.kvs() {
                    if let Some(parsed) = parse(prefix, kv.key()) {
                        parts.add(&parsed, kv.clone());
                    }
                }
            }
        }
        let node = self.node();
        let cx = Context {
            exec,
            client: &client,
            node: &node,
            foreign: true,
            member_ttls: true,
        };
        parts.build(&cx, name).await
    }

    /// One transaction: if the lock key holds `token`, delete it (with its note and grant
    /// time); else the reader or semaphore holder of that token, if there is one. The
    /// holder's etcd lease is left alone: revoking it would also drop any other key on it
    /// (a shared lease carries many grants), and without its key the holder's next renewal
    /// finds the lock lost. Waiters watch the deletion, so it wakes them.
    async fn release_held(&self, name: &str, token: &str) -> Result<bool, LockError> {
        layout::check_name(name)?;
        let exec = self.executor();
        let client = exec.client().await?;
        let prefix = exec.prefix();
        let lock_key = exec.key(name);
        let mut then = vec![
            TxnOp::delete(lock_key.clone(), None),
            TxnOp::delete(under(NOTE, prefix, name), None),
        ];
        let mut otherwise = Vec::new();
        if let Some(hex) = token_hex(token.as_bytes()) {
            let granted = || TxnOp::delete(granted_key(prefix, name, hex), None);
            then.push(granted());
            // A reader's key holds its token; a semaphore holder's is named by it.
            let mut reader = under(READERS, prefix, name);
            reader.extend_from_slice(hex.as_bytes());
            let mut holder = under(SEMAPHORE, prefix, name);
            holder.extend_from_slice(hex.as_bytes());
            otherwise.push(TxnOp::txn(
                Txn::new()
                    .when([Compare::value(reader.clone(), CompareOp::Equal, token)])
                    .and_then([TxnOp::delete(reader, None), granted()]),
            ));
            otherwise.push(TxnOp::txn(
                Txn::new()
                    .when([Compare::version(holder.clone(), CompareOp::Greater, 0)])
                    .and_then([TxnOp::delete(holder, None), granted()]),
            ));
        }
        let txn = Txn::new()
            .when([Compare::value(lock_key, CompareOp::Equal, token)])
            .and_then(then)
            .or_else(otherwise);
        let answer = exec.txn(&client, Op::Release, txn).await?;
        Ok(answer.succeeded()
            || answer
                .op_responses()
                .iter()
                .any(|op| matches!(op, TxnOpResponse::Txn(inner) if inner.succeeded())))
    }

    async fn release_feed(&self) -> Result<Option<Box<dyn ReleaseFeed>>, LockError> {
        Ok(Some(Box::new(
            feed::Releases::start(self.executor()).await?,
        )))
    }
}
