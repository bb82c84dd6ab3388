//! Reading locks on Redis: the SCAN walk that finds them (and tells which kinds' keys exist),
//! then one pipelined round of plain read commands per batch of locks (MGET, PTTL, ZRANGE,
//! HGETALL, PUBSUB NUMSUB...) on the master that holds them, only those their kinds need. The
//! replies are decoded in `redis_decode.rs`.

use std::collections::HashMap;

use lock_redis::{DerivedKey, LockKeys};
use redis::Value;

use super::redis_decode::{read_one, server_ms};
use crate::connect::{Node, Target};
use crate::exit::{Failure, USAGE};
use crate::inspect::{Listing, LockInfo};

/// At most this many members of a readers' or holders' set are listed per lock (the count is
/// always exact).
const MEMBERS_SHOWN: isize = 50;

/// Locks described per pipelined round trip.
const BATCH: usize = 200;

/// The SCAN walk of one master stops after this many steps (COUNT keys each), so a listing
/// always ends; a keyspace that large is reported as cut short.
const MAX_SCAN_STEPS: u64 = 1_000_000;

/// Every held lock (of every kind) named `key`, read in one round trip from its master.
pub(crate) async fn describe(target: &Target, key: &str) -> Result<Vec<LockInfo>, Failure> {
    let node = target.node_for(key)?;
    let name = key.strip_prefix(target.prefix.as_str()).unwrap_or(key);
    let mut found = describe_batch(
        node,
        target.cluster,
        &[(name.to_owned(), key.to_owned(), Seen::ALL)],
        true,
    )
    .await?;
    Ok(found.pop().unwrap_or_default())
}

/// Which of a lock's keys the SCAN walk saw: only the reads of the kinds seen are sent (a
/// mutex takes 3 commands, not 17), and a name with none of its holding keys (a released
/// lock's fencing counter) is not read at all. A key there for the whole walk is always seen
/// (SCAN's guarantee), so a lock held throughout is never missed.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    /// The lock key itself: a mutex, a fair lock, or another client's key.
    main: bool,
    /// The read-write lock's writer, readers or waiting writers.
    read_write: bool,
    /// The semaphore's holders or counts.
    semaphore: bool,
    /// The fair queue.
    fair: bool,
}

impl Seen {
    /// Every kind (`show`: nothing was walked).
    const ALL: Seen = Seen {
        main: true,
        read_write: true,
        semaphore: true,
        fair: true,
    };

    /// Whether a lock could be held: one of its holding keys was seen.
    fn any(self) -> bool {
        self.main || self.read_write || self.semaphore
    }

    /// Records the key `which` of the lock (`None`: the lock key itself).
    fn saw(&mut self, which: Option<DerivedKey>) {
        match which {
            None => self.main = true,
            Some(DerivedKey::Writer | DerivedKey::Readers | DerivedKey::WritersWaiting) => {
                self.read_write = true;
            }
            Some(DerivedKey::Permits | DerivedKey::PermitCounts) => self.semaphore = true,
            Some(DerivedKey::FairQueue | DerivedKey::FairEntries) => self.fair = true,
            Some(_) => {}
        }
    }
}

/// The commands that read one lock; [`replies_of`] puts their replies where [`read_one`]
/// takes them. The lock's string keys (the lock key, its fencing counter, the grant's note:
/// one cluster slot) are read with one `MGET` (a
/// non-string lock key reads as nil: not a mutex), then only the reads of the kinds `seen`:
/// a mutex costs 3 commands (`MGET`, `PTTL`, `PUBSUB NUMSUB`).
fn queue_reads(pipe: &mut redis::Pipeline, keys: &LockKeys, sharded: bool, seen: Seen) {
    pipe.cmd("MGET")
        .arg(&keys.key)
        .arg(&keys.fence)
        .arg(&keys.note);
    if seen.main {
        pipe.cmd("PTTL").arg(&keys.key);
    }
    pipe.cmd("PUBSUB")
        .arg(if sharded { "SHARDNUMSUB" } else { "NUMSUB" })
        .arg(&keys.released);
    if seen.read_write {
        pipe.cmd("GET").arg(&keys.writer);
        pipe.cmd("PTTL").arg(&keys.writer);
        pipe.cmd("ZCARD").arg(&keys.readers);
        pipe.cmd("ZRANGE")
            .arg(&keys.readers)
            .arg(0)
            .arg(MEMBERS_SHOWN - 1)
            .arg("WITHSCORES");
        pipe.cmd("ZCARD").arg(&keys.writers_waiting);
    }
    if seen.semaphore {
        pipe.cmd("ZCARD").arg(&keys.permits);
        pipe.cmd("ZRANGE")
            .arg(&keys.permits)
            .arg(0)
            .arg(MEMBERS_SHOWN - 1)
            .arg("WITHSCORES");
        pipe.cmd("HGETALL").arg(&keys.permit_counts);
    }
    if seen.main && seen.fair {
        pipe.cmd("ZRANGE")
            .arg(&keys.fair_queue)
            .arg(0)
            .arg(MEMBERS_SHOWN - 1);
        pipe.cmd("ZCARD").arg(&keys.fair_queue);
    }
}

/// One lock's replies to [`queue_reads`], taken from `sent`, at the places [`read_one`] reads
/// them: 0 the lock key's type, 1 its value, 2 its PTTL, 3 the fencing counter, 4 the previous
/// holder's description, 5 the waiters, 6-10 the read-write lock's, 11-13 the semaphore's,
/// 14-15 the fair queue's, 16 the note; nil for what was not read.
fn replies_of(seen: Seen, sent: &mut impl Iterator<Item = Value>) -> Vec<Value> {
    let mut r = vec![Value::Nil; READS];
    if let Some(Value::Array(values)) = sent.next() {
        for (value, i) in values.into_iter().zip([1, 3, 16]) {
            r[i] = value;
        }
    }
    let mut take = |r: &mut Vec<Value>, i: usize| r[i] = sent.next().unwrap_or(Value::Nil);
    let string = matches!(r[1], Value::BulkString(_) | Value::SimpleString(_));
    r[0] = Value::SimpleString(if string { "string" } else { "none" }.to_owned());
    if seen.main {
        take(&mut r, 2);
    }
    take(&mut r, 5);
    let groups: [(bool, &[usize]); 3] = [
        (seen.read_write, &[6, 7, 8, 9, 10]),
        (seen.semaphore, &[11, 12, 13]),
        (seen.main && seen.fair, &[14, 15]),
    ];
    for (read, places) in groups {
        if read {
            for i in places {
                take(&mut r, *i);
            }
        }
    }
    r
}

/// How many replies [`queue_reads`] asks for.
const READS: usize = 17;

/// Reads the locks `(name, key)` on `node` in one pipeline, after one `TIME` (the server's
/// clock, which scores readers' and holders' expiries). `foreign`: keep string keys with a TTL
/// that hold no distlock token.
async fn describe_batch(
    node: &Node,
    sharded: bool,
    locks: &[(String, String, Seen)],
    foreign: bool,
) -> Result<Vec<Vec<LockInfo>>, Failure> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe.cmd("TIME");
    for (_, key, seen) in locks {
        queue_reads(&mut pipe, &LockKeys::of_key(key), sharded, *seen);
    }
    let replies: Vec<Value> = pipe
        .query_async(&mut node.conn.clone())
        .await
        .map_err(|e| Failure::backend(&format!("reading locks on {}", node.addr), &e))?;
    let now_ms = server_ms(replies.first());
    let mut sent = replies.into_iter().skip(1);
    Ok(locks
        .iter()
        .map(|(name, key, seen)| {
            let r = replies_of(*seen, &mut sent);
            read_one(name, key, &r, now_ms, foreign, &node.addr)
        })
        .collect())
}

/// Lists every held lock whose name matches `pattern`, master by master: SCAN with COUNT
/// `count`, each key folded to the lock it belongs to, each lock read once.
pub(crate) async fn list(
    target: &Target,
    pattern: &str,
    count: u32,
    foreign: bool,
) -> Result<Listing, Failure> {
    let matcher = glob::Pattern::new(pattern)
        .map_err(|e| Failure::new(USAGE, format!("bad pattern {pattern:?}: {e}")))?;
    let mut listing = Listing::default();
    for node in &target.nodes {
        // The walk first (which keys of each lock exist), then the reads each needs.
        let walk = walk(node, &target.prefix, &matcher, count).await?;
        listing.keys_scanned += walk.keys_scanned;
        listing.truncated |= walk.truncated;
        for chunk in walk.locks.chunks(BATCH) {
            for locks in describe_batch(node, target.cluster, chunk, foreign).await? {
                listing.locks.extend(locks);
            }
        }
    }
    listing
        .locks
        .sort_by(|a, b| (&a.name, a.kind).cmp(&(&b.name, b.kind)));
    Ok(listing)
}

/// What one master's SCAN walk found.
#[derive(Debug, Default)]
struct Walk {
    /// The locks `(name, key, seen)` with a holding key, in the order first seen.
    locks: Vec<(String, String, Seen)>,
    /// Keys SCAN returned.
    keys_scanned: u64,
    /// Whether the walk stopped at [`MAX_SCAN_STEPS`].
    truncated: bool,
}

/// Walks the keys of `node` (SCAN with COUNT `count`), folding each to the lock it belongs to
/// and recording which of the lock's keys exist, for the locks under `prefix` whose name
/// `matcher` matches; a name with none of its holding keys is left out.
async fn walk(
    node: &Node,
    prefix: &str,
    matcher: &glob::Pattern,
    count: u32,
) -> Result<Walk, Failure> {
    let mut walk = Walk::default();
    // Where each lock key is in `walk.locks`, so that its keys fold to one entry.
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut cursor: u64 = 0;
    let mut steps = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(count)
            .query_async(&mut node.conn.clone())
            .await
            .map_err(|e| Failure::backend(&format!("SCAN on {}", node.addr), &e))?;
        walk.keys_scanned += keys.len() as u64;
        for key in keys {
            let Some((name, lock_key, which)) = lock_of(key, prefix, matcher) else {
                continue;
            };
            let at = match index.get(&lock_key) {
                Some(at) => *at,
                None => {
                    walk.locks.push((name, lock_key.clone(), Seen::default()));
                    index.insert(lock_key, walk.locks.len() - 1);
                    walk.locks.len() - 1
                }
            };
            walk.locks[at].2.saw(which);
        }
        cursor = next;
        steps += 1;
        if cursor == 0 {
            break;
        }
        if steps >= MAX_SCAN_STEPS {
            walk.truncated = true;
            break;
        }
    }
    walk.locks.retain(|(_, _, seen)| seen.any());
    Ok(walk)
}

/// The lock a key belongs to, as `(name, lock key, which of its keys)` (`None` for the lock key
/// itself), when the lock is under `prefix` and `matcher` matches its name.
fn lock_of(
    key: String,
    prefix: &str,
    matcher: &glob::Pattern,
) -> Option<(String, String, Option<DerivedKey>)> {
    let (lock_key, which) = match LockKeys::owner_of(&key) {
        Some((owner, which)) => (owner, Some(which)),
        None => (key, None),
    };
    let name = lock_key.strip_prefix(prefix)?;
    if !matcher.matches(name) {
        return None;
    }
    Some((name.to_owned(), lock_key, which))
}
