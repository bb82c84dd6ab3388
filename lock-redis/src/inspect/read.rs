//! Reading locks on Redis: the SCAN walk that finds them (and tells which kinds' keys exist),
//! then one pipelined round of plain read commands per batch of locks (MGET, PTTL, ZRANGE,
//! HGETALL, PUBSUB NUMSUB...) on the master that holds them, only those their kinds need. The
//! replies are decoded in `decode.rs`.

use std::collections::HashMap;

use lock_core::LockError;
use lock_core::backend::{HeldLock, ListOptions, Listing, MAX_HOLDERS_SHOWN, NamePattern};
use redis::Value;

use super::decode::{at, read_one, server_ms};
use super::masters::Master;
use crate::executor::Executor;
use crate::layout::{DerivedKey, LockKeys};

/// Locks described per pipelined round trip.
const BATCH: usize = 200;

/// The SCAN walk of one master stops after this many steps (COUNT keys each), so a listing
/// always ends; a keyspace that large is reported as cut short.
const MAX_SCAN_STEPS: u64 = 1_000_000;

/// Which of a lock's keys the SCAN walk saw: only the reads of the kinds seen are sent (a
/// mutex takes 3 commands, not 17), and a name with none of its holding keys (a released
/// lock's fencing counter) is not read at all. A key there for the whole walk is always seen
/// (SCAN's guarantee), so a lock held throughout is never missed.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Seen {
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
    /// Every kind (one name read: nothing was walked).
    pub(super) const ALL: Seen = Seen {
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

/// The commands that read one lock; [`replies_of`] puts their replies where
/// [`read_one`] takes them. The lock's string keys (the lock key, its fencing counter, the
/// grant's note: one cluster slot) are read with one `MGET` (a non-string lock key reads as
/// nil: not a mutex), then only the reads of the kinds `seen`: a mutex costs 3 commands
/// (`MGET`, `PTTL`, `PUBSUB NUMSUB`).
fn queue_reads(pipe: &mut redis::Pipeline, keys: &LockKeys, sharded: bool, seen: Seen) {
    let shown = isize::try_from(MAX_HOLDERS_SHOWN).unwrap_or(isize::MAX) - 1;
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
            .arg(shown)
            .arg("WITHSCORES");
        pipe.cmd("ZCARD").arg(&keys.writers_waiting);
    }
    if seen.semaphore {
        pipe.cmd("ZCARD").arg(&keys.permits);
        pipe.cmd("ZRANGE")
            .arg(&keys.permits)
            .arg(0)
            .arg(shown)
            .arg("WITHSCORES");
        pipe.cmd("HGETALL").arg(&keys.permit_counts);
    }
    if seen.main && seen.fair {
        pipe.cmd("ZRANGE").arg(&keys.fair_queue).arg(0).arg(shown);
        pipe.cmd("ZCARD").arg(&keys.fair_queue);
    }
}

/// One lock's replies to [`queue_reads`], taken from `sent`, at the places of [`at`]; nil
/// for what was not read.
fn replies_of(seen: Seen, sent: &mut impl Iterator<Item = Value>) -> Vec<Value> {
    let mut r = vec![Value::Nil; at::COUNT];
    if let Some(Value::Array(values)) = sent.next() {
        for (value, i) in values.into_iter().zip([at::VALUE, at::FENCE, at::NOTE]) {
            r[i] = value;
        }
    }
    let mut take = |r: &mut Vec<Value>, i: usize| r[i] = sent.next().unwrap_or(Value::Nil);
    let string = matches!(r[at::VALUE], Value::BulkString(_) | Value::SimpleString(_));
    r[at::TYPE] = Value::SimpleString(if string { "string" } else { "none" }.to_owned());
    if seen.main {
        take(&mut r, at::PTTL);
    }
    take(&mut r, at::WAITERS);
    let groups: [(bool, &[usize]); 3] = [
        (
            seen.read_write,
            &[
                at::WRITER,
                at::WRITER_PTTL,
                at::READERS,
                at::READER_MEMBERS,
                at::WRITERS_WAITING,
            ],
        ),
        (
            seen.semaphore,
            &[at::HOLDERS, at::HOLDER_MEMBERS, at::PERMIT_COUNTS],
        ),
        (seen.main && seen.fair, &[at::FAIR_QUEUE, at::FAIR_LENGTH]),
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

/// Reads the locks `(name, key, seen)` on `master` in one pipeline, after one `TIME` (the
/// server's clock, which scores readers' and holders' expiries). `foreign`: keep string keys
/// with a TTL that hold no distlock token.
///
/// # Errors
/// As [`Executor::read_pipeline`].
pub(super) async fn describe_batch(
    exec: &Executor,
    master: &Master,
    locks: &[(String, String, Seen)],
    foreign: bool,
) -> Result<Vec<Vec<HeldLock>>, LockError> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe.cmd("TIME");
    for (_, key, seen) in locks {
        queue_reads(&mut pipe, &LockKeys::of_key(key), master.sharded(), *seen);
    }
    let replies = exec.read_pipeline(&pipe, master.route()).await?;
    let now_ms = server_ms(replies.first());
    let mut sent = replies.into_iter().skip(1);
    Ok(locks
        .iter()
        .map(|(name, key, seen)| {
            let r = replies_of(*seen, &mut sent);
            read_one(name, key, &r, now_ms, foreign, &master.label)
        })
        .collect())
}

/// Lists every held lock under `prefix` whose name matches `pattern`, master by master: SCAN
/// with COUNT `options.batch`, each key folded to the lock it belongs to, each lock read
/// once.
///
/// # Errors
/// As [`Executor::read_pipeline`].
pub(super) async fn list(
    exec: &Executor,
    masters: &[Master],
    prefix: &str,
    pattern: &NamePattern,
    options: &ListOptions,
) -> Result<Listing, LockError> {
    let mut locks = Vec::new();
    let (mut scanned, mut truncated) = (0, false);
    for master in masters {
        // The walk first (which keys of each lock exist), then the reads each needs.
        let walk = walk(exec, master, prefix, pattern, options.batch).await?;
        scanned += walk.keys_scanned;
        truncated |= walk.truncated;
        for chunk in walk.locks.chunks(BATCH) {
            for found in describe_batch(exec, master, chunk, options.foreign).await? {
                locks.extend(found);
            }
        }
    }
    let mut listing = Listing::new(locks, scanned);
    listing.truncated = truncated;
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

/// Walks the keys of `master` (SCAN with COUNT `count`), folding each to the lock it belongs
/// to and recording which of the lock's keys exist, for the locks under `prefix` whose name
/// `pattern` matches; a name with none of its holding keys is left out.
async fn walk(
    exec: &Executor,
    master: &Master,
    prefix: &str,
    pattern: &NamePattern,
    count: u32,
) -> Result<Walk, LockError> {
    let mut walk = Walk::default();
    // Where each lock key is in `walk.locks`, so that its keys fold to one entry.
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut cursor: u64 = 0;
    let mut steps = 0u64;
    loop {
        let mut pipe = redis::pipe();
        pipe.cmd("SCAN").arg(cursor).arg("COUNT").arg(count);
        let reply = exec.read_pipeline(&pipe, master.route()).await?;
        let (next, keys): (u64, Vec<String>) = reply
            .into_iter()
            .next()
            .map(redis::from_redis_value)
            .transpose()
            .map_err(|e| LockError::Backend {
                backend: crate::error::BACKEND,
                op: lock_core::Op::Read,
                retryable: false,
                source: format!("an unexpected reply to SCAN: {e}").into(),
            })?
            .unwrap_or_default();
        walk.keys_scanned += keys.len() as u64;
        for key in keys {
            let Some((name, lock_key, which)) = lock_of(key, prefix, pattern) else {
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
/// itself), when the lock is under `prefix` and `pattern` matches its name.
fn lock_of(
    key: String,
    prefix: &str,
    pattern: &NamePattern,
) -> Option<(String, String, Option<DerivedKey>)> {
    let (lock_key, which) = match LockKeys::owner_of(&key) {
        Some((owner, which)) => (owner, Some(which)),
        None => (key, None),
    };
    let name = lock_key.strip_prefix(prefix)?;
    if !pattern.matches(name) {
        return None;
    }
    Some((name.to_owned(), lock_key, which))
}
