//! Reading lock-etcd's locks of every kind: one range read of the prefix (paged, `--count`
//! keys a page) finds every lock key and every key beside it (semaphore holders, readers,
//! fair queues, waiting writers, fences, notes: `keys.rs`), or one transaction of seven reads
//! for one name; then the remaining TTL of each holder's etcd lease (etcd has no request that
//! reads several).
//!
//! How each kind shows in lock-etcd's keys:
//! - the lock key `prefix + name` holds `dl:<token>` for a mutex, a fair lock and a writer
//!   alike. A writer's grant puts the fence key in the same transaction, so the lock key is a
//!   writer's when the fence key's `mod_revision` is the lock key's; a fair lock is one with
//!   queue entries; any other holder is a mutex;
//! - readers and semaphore holders are keys of their own, on etcd leases of their own;
//! - the holder's note is tied to the grant by the lock key's value written in front of it.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{GetOptions, KeyValue, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse};
use futures::{StreamExt, stream};
use lock_core::backend::Holder;

use super::keys::{self, Parsed, Parts, Space};
use super::{EtcdTarget, bounded};
use crate::exit::{Failure, USAGE};
use crate::inspect::{Listing, LockInfo, Member, Members, Permits};

/// What a distlock holder's value starts with (lock-etcd's layout, the same as lock-redis's).
const TOKEN_PREFIX: &str = "dl:";

/// The range read stops after this many pages, so a listing always ends; a keyspace that
/// large is reported as cut short.
const MAX_PAGES: u64 = 1_000_000;

/// Locks described at once (each with its lease TTL request) while a listing is built.
const TTL_READS_IN_FLIGHT: usize = 16;

/// At most this many readers, semaphore holders or fair waiters are listed per lock (the
/// count is always exact), as on Redis.
const MEMBERS_SHOWN: usize = 50;

/// Every lock named `name` (one name may be held as several kinds; by another client with a
/// lease too): one transaction reading the lock key, its note and fence keys and its four
/// ranges, then the etcd leases' TTLs, each reader's and holder's included.
pub(crate) async fn describe(target: &EtcdTarget, name: &str) -> Result<Vec<LockInfo>, Failure> {
    let prefix = target.prefix.as_str();
    let range = |space: Space| {
        let start = keys::under(space, prefix, name);
        let options = GetOptions::new()
            .with_range(keys::range_end(&start))
            .with_sort(SortTarget::Create, SortOrder::Ascend);
        TxnOp::get(start, Some(options))
    };
    let txn = Txn::new().and_then([
        TxnOp::get(target.key(name), None),
        TxnOp::get(keys::under(Space::Note, prefix, name), None),
        TxnOp::get(keys::under(Space::Fence, prefix, name), None),
        range(Space::Semaphore),
        range(Space::Fair),
        range(Space::Reader),
        range(Space::Waiting),
    ]);
    let mut kv = target.client.kv_client();
    let response = bounded(
        &format!("reading {:?}", target.key(name)),
        target.command_timeout,
        kv.txn(txn),
    )
    .await?;
    let mut parts = Parts::default();
    for op in response.op_responses() {
        if let TxnOpResponse::Get(get) = op {
            for kv in get.kvs() {
                if let Some(parsed) = keys::parse(prefix, kv.key()) {
                    parts.add(&parsed, kv.clone());
                }
            }
        }
    }
    build(target, name, parts, true, true).await
}

/// Every held lock whose name (the key without the prefix) matches `pattern`: the whole
/// prefix is read in pages of `count` keys, in key order (every key beside the locks first,
/// then the lock keys), and each lock's etcd lease TTL once. `foreign`: also keys with a lease
/// whose value is not a distlock token (another client's lock under the same names). The
/// TTLs of readers and semaphore holders are left out (`-1`): `show` reads them.
pub(crate) async fn list(
    target: &EtcdTarget,
    pattern: &str,
    count: u32,
    foreign: bool,
) -> Result<Listing, Failure> {
    let matcher = glob::Pattern::new(pattern)
        .map_err(|e| Failure::new(USAGE, format!("bad pattern {pattern:?}: {e}")))?;
    let end = prefix_end(target.prefix.as_bytes());
    let mut start = if target.prefix.is_empty() {
        vec![0]
    } else {
        target.prefix.as_bytes().to_vec()
    };
    let mut listing = Listing::default();
    let mut names: BTreeMap<String, Parts> = BTreeMap::new();
    let mut kv = target.client.kv_client();
    let mut pages = 0u64;
    loop {
        let options = GetOptions::new()
            .with_range(end.clone())
            .with_limit(i64::from(count));
        let response = bounded(
            &format!("reading the keys under {:?}", target.prefix),
            target.command_timeout,
            kv.get(start.clone(), Some(options)),
        )
        .await?;
        let kvs = response.kvs();
        listing.keys_scanned += kvs.len() as u64;
        if let Some(last) = kvs.last() {
            // The next page starts just after the last key read.
            start = last.key().to_vec();
            start.push(0);
        }
        for kv in kvs {
            let Some(parsed) = keys::parse(&target.prefix, kv.key()) else {
                continue;
            };
            let name = match parsed {
                Parsed::Lock(name) | Parsed::Derived(_, name) => name,
            };
            if matcher.matches(name) {
                names
                    .entry(name.to_owned())
                    .or_default()
                    .add(&parsed, kv.clone());
            }
        }
        pages += 1;
        if !response.more() {
            break;
        }
        if pages >= MAX_PAGES {
            listing.truncated = true;
            break;
        }
    }
    // Collected first: a stream of closures over borrowed names trips the `Send` check of
    // the trait's boxed future (rust#102211).
    let builds: Vec<_> = names
        .into_iter()
        .map(|(name, parts)| {
            Box::pin(async move { build(target, &name, parts, foreign, false).await })
        })
        .collect();
    let built = stream::iter(builds)
        .buffered(TTL_READS_IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    for locks in built {
        listing.locks.extend(locks?);
    }
    listing
        .locks
        .sort_by(|a, b| (&a.name, a.kind).cmp(&(&b.name, b.kind)));
    Ok(listing)
}

/// The locks in `name`'s keys: the holder of its lock key (a mutex, a fair lock, a writer, or
/// with `foreign` another client's key with a lease), its readers, its semaphore holders.
/// `member_ttls`: read every listed reader's and holder's etcd lease TTL too.
async fn build(
    target: &EtcdTarget,
    name: &str,
    mut parts: Parts,
    foreign: bool,
    member_ttls: bool,
) -> Result<Vec<LockInfo>, Failure> {
    for members in [
        &mut parts.semaphore,
        &mut parts.fair,
        &mut parts.readers,
        &mut parts.waiting,
    ] {
        members.sort_by_key(KeyValue::create_revision);
    }
    let base = LockInfo {
        name: name.to_owned(),
        key: target.key(name),
        kind: "mutex",
        node: target.node(),
        ..LockInfo::default()
    };
    // A write grant puts the lock key and the fence key in one transaction.
    let writer = parts.lock.as_ref().is_some_and(|lock| {
        parts
            .fence
            .as_ref()
            .is_some_and(|f| f.mod_revision() == lock.mod_revision())
    });
    let mut found = Vec::new();
    found.extend(key_lock(target, &parts, &base, foreign, writer, member_ttls).await?);
    if !writer {
        found.extend(readers_lock(target, &parts, &base, member_ttls).await?);
    }
    found.extend(semaphore_lock(target, &parts, base, member_ttls).await?);
    Ok(found)
}

/// The lock its lock key holds: a mutex, a fair lock (one with queue entries), a read-write
/// lock's writer (`writer`: with its readers and waiting writers), or with `foreign` another
/// client's key with a lease; `None` when there is no lock key or it is none of these.
async fn key_lock(
    target: &EtcdTarget,
    parts: &Parts,
    base: &LockInfo,
    foreign: bool,
    writer: bool,
    member_ttls: bool,
) -> Result<Option<LockInfo>, Failure> {
    let Some(lock) = &parts.lock else {
        return Ok(None);
    };
    let ours = lock.value().starts_with(TOKEN_PREFIX.as_bytes());
    if !(ours || (foreign && lock.lease() != 0)) {
        return Ok(None);
    }
    let ttl_ms = lease_ttl_ms(target, lock.lease()).await?;
    let fencing_token = u64::try_from(lock.mod_revision()).ok();
    let mut info = LockInfo {
        kind: if !ours {
            "foreign"
        } else if writer {
            "read-write"
        } else if !parts.fair.is_empty() {
            "fair"
        } else {
            "mutex"
        },
        token: Some(lossy(lock.value())),
        ttl_ms,
        fencing_token,
        ..base.clone()
    };
    if info.kind == "fair" {
        info.queued = parts.fair.len() as u64;
        info.fair_queue = parts
            .fair
            .iter()
            .take(MEMBERS_SHOWN)
            .map(|kv| lossy(kv.value()))
            .collect();
    }
    if writer {
        info.queued = parts.waiting.len() as u64;
        info.readers = Some(members(target, &parts.readers, member_ttls, false).await?);
    }
    if ours {
        info.holder = note(parts, lock, fencing_token.unwrap_or(0), ttl_ms);
    }
    Ok(Some(info))
}

/// The read-write lock held by readers only (no writer), when there are readers.
async fn readers_lock(
    target: &EtcdTarget,
    parts: &Parts,
    base: &LockInfo,
    member_ttls: bool,
) -> Result<Option<LockInfo>, Failure> {
    if parts.readers.is_empty() {
        return Ok(None);
    }
    Ok(Some(LockInfo {
        kind: "read-write",
        // Readers hold the last write's fence.
        fencing_token: parts
            .fence
            .as_ref()
            .and_then(|f| u64::try_from(f.mod_revision()).ok()),
        queued: parts.waiting.len() as u64,
        readers: Some(members(target, &parts.readers, member_ttls, false).await?),
        ..base.clone()
    }))
}

/// The semaphore, when it has holders: `max` as the first holder wrote it, `used` the sum of
/// the holders' permits.
async fn semaphore_lock(
    target: &EtcdTarget,
    parts: &Parts,
    base: LockInfo,
    member_ttls: bool,
) -> Result<Option<LockInfo>, Failure> {
    let holders: Vec<(u64, u64)> = parts
        .semaphore
        .iter()
        .filter_map(|kv| keys::semaphore_value(kv.value()).map(|(_, p, max)| (p, max)))
        .collect();
    if holders.is_empty() {
        return Ok(None);
    }
    Ok(Some(LockInfo {
        kind: "semaphore",
        permits: Some(Permits {
            max: holders.first().map(|(_, max)| *max),
            used: Some(holders.iter().map(|(p, _)| p).sum()),
            holders: members(target, &parts.semaphore, member_ttls, true).await?,
        }),
        ..base
    }))
}

/// The holder of `lock` with the note written beside its grant (the note key's value starts
/// with the lock key's value and a newline); `None` when it wrote none.
fn note(parts: &Parts, lock: &KeyValue, fencing_token: u64, ttl_ms: Option<i64>) -> Option<Holder> {
    let written = parts.note.as_ref()?.value();
    let note = written.strip_prefix(lock.value())?.strip_prefix(b"\n")?;
    let ttl = ttl_ms.and_then(|ms| u64::try_from(ms).ok().map(Duration::from_millis));
    Some(Holder::new(fencing_token, ttl).with_note(note.to_vec()))
}

/// The readers or semaphore holders in `kvs` (oldest first): the count, and the first
/// [`MEMBERS_SHOWN`] with their tokens, permits (`semaphore`) and, with `ttls`, their etcd
/// leases' TTLs (`-1` when not read).
async fn members(
    target: &EtcdTarget,
    kvs: &[KeyValue],
    ttls: bool,
    semaphore: bool,
) -> Result<Members, Failure> {
    let reads: Vec<_> = kvs
        .iter()
        .take(MEMBERS_SHOWN)
        .map(|kv| {
            Box::pin(async move {
                let (token, permits) = if semaphore {
                    let (token, permits, _) = keys::semaphore_value(kv.value()).unwrap_or_default();
                    (token, Some(permits))
                } else {
                    (lossy(kv.value()), None)
                };
                let ttl_ms = if ttls {
                    lease_ttl_ms(target, kv.lease()).await?.unwrap_or(-1)
                } else {
                    -1
                };
                Ok::<_, Failure>(Member {
                    token,
                    ttl_ms,
                    permits,
                })
            })
        })
        .collect();
    let shown = stream::iter(reads)
        .buffered(TTL_READS_IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    Ok(Members {
        count: kvs.len() as u64,
        shown: shown.into_iter().collect::<Result<_, _>>()?,
    })
}

/// Bytes as text, invalid UTF-8 replaced.
fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The remaining TTL of the etcd lease `id` in milliseconds (etcd counts whole seconds),
/// `None` for no lease (0) or one that has expired.
async fn lease_ttl_ms(target: &EtcdTarget, id: i64) -> Result<Option<i64>, Failure> {
    if id == 0 {
        return Ok(None);
    }
    let mut lease = target.client.lease_client();
    let response = bounded(
        &format!("reading lease {id:x}"),
        target.command_timeout,
        lease.time_to_live(id, None),
    )
    .await?;
    let ttl = response.ttl();
    Ok((ttl >= 0).then(|| ttl.saturating_mul(1000)))
}

/// The end of the range of keys that start with `prefix` (etcd's rule: the prefix with its
/// last byte below 0xff incremented and what follows dropped; `[0]`, "every key from the
/// start", when there is no such byte).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"distlock/"), b"distlock0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b""), vec![0]);
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
    }
}
