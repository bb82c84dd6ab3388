//! Reading lock-etcd's locks: a range read of the prefix (paged, `--count` keys a page) or of
//! one key, then the remaining TTL of each holder's lease.

use etcd_client::{GetOptions, KeyValue};
use futures::{StreamExt, stream};

use super::{EtcdTarget, bounded};
use crate::exit::{Failure, USAGE};
use crate::inspect::{Listing, LockInfo};

/// What a distlock holder's value starts with (lock-etcd's layout, the same as lock-redis's).
const TOKEN_PREFIX: &str = "dl:";

/// The range read stops after this many pages, so a listing always ends; a keyspace that
/// large is reported as cut short.
const MAX_PAGES: u64 = 1_000_000;

/// Lease TTL requests in flight at once while a page is described.
const TTL_READS_IN_FLIGHT: usize = 16;

/// The lock `name`, if it is held (by distlock, or by another client with a lease).
pub(crate) async fn describe(target: &EtcdTarget, name: &str) -> Result<Vec<LockInfo>, Failure> {
    let key = target.key(name);
    let mut kv = target.client.kv_client();
    let response = bounded(
        &format!("reading {key:?}"),
        target.command_timeout,
        kv.get(key.as_bytes(), None),
    )
    .await?;
    let found: Vec<KeyValue> = response.kvs().to_vec();
    describe_keys(target, found, &|_| true, true).await
}

/// Every held lock whose name (the key without the prefix) matches `pattern`: the prefix is
/// read in pages of `count` keys, in key order. `foreign`: also keys with a lease whose value
/// is not a distlock token (another client's lock under the same names).
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
        let kvs = response.kvs().to_vec();
        listing.keys_scanned += kvs.len() as u64;
        if let Some(last) = kvs.last() {
            // The next page starts just after the last key read.
            start = last.key().to_vec();
            start.push(0);
        }
        let matches = |name: &str| matcher.matches(name);
        listing
            .locks
            .extend(describe_keys(target, kvs, &matches, foreign).await?);
        pages += 1;
        if !response.more() {
            break;
        }
        if pages >= MAX_PAGES {
            listing.truncated = true;
            break;
        }
    }
    listing.locks.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(listing)
}

/// The locks among `kvs` whose names pass `keep`, with their leases' remaining TTLs.
async fn describe_keys(
    target: &EtcdTarget,
    kvs: Vec<KeyValue>,
    keep: &(dyn Fn(&str) -> bool + Sync),
    foreign: bool,
) -> Result<Vec<LockInfo>, Failure> {
    let mut locks = Vec::new();
    for kv in kvs {
        let (Ok(key), Ok(value)) = (kv.key_str(), kv.value_str()) else {
            continue;
        };
        let Some(name) = key.strip_prefix(target.prefix.as_str()) else {
            continue;
        };
        // Names that start with NUL are lock-etcd's own key spaces (semaphore holders,
        // readers, fair queues, election notes), never a lock: lock-etcd refuses such names.
        if name.starts_with('\0') {
            continue;
        }
        let ours = value.starts_with(TOKEN_PREFIX);
        // A key without a lease never expires: not a lock of any client that keeps the rule.
        if !keep(name) || !(ours || (foreign && kv.lease() != 0)) {
            continue;
        }
        locks.push((
            kv.lease(),
            LockInfo {
                name: name.to_owned(),
                key: key.to_owned(),
                kind: if ours { "mutex" } else { "foreign" },
                token: Some(value.to_owned()),
                ttl_ms: None,
                fencing_token: u64::try_from(kv.mod_revision()).ok(),
                // etcd does not tell how many clients watch a key.
                waiters: 0,
                queued: 0,
                readers: None,
                permits: None,
                fair_queue: Vec::new(),
                holder: None,
                node: target.node(),
                leader: None,
            },
        ));
    }
    let with_ttls = stream::iter(locks.into_iter().map(|(lease, mut info)| async move {
        info.ttl_ms = lease_ttl_ms(target, lease).await?;
        Ok::<_, Failure>(info)
    }))
    .buffered(TTL_READS_IN_FLIGHT)
    .collect::<Vec<_>>()
    .await;
    with_ttls.into_iter().collect()
}

/// The remaining TTL of the lease `id` in milliseconds (etcd counts whole seconds), `None`
/// for no lease (0) or one that has expired.
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
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
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
