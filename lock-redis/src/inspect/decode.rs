//! Decoding one lock's replies to the reads of `read.rs` into the holds they show: each kind
//! from its own replies, and the reply values (strings, counts, pairs, sorted-set members)
//! taken leniently, nil or a wrong type reading as absent.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_core::backend::{HeldKind, HeldLock, HolderView};
use redis::Value;

use crate::holder::HolderReplies;
use crate::layout::TOKEN_PREFIX;

/// Where each read's reply sits among one lock's replies (see `read::queue_reads`).
pub(super) mod at {
    /// The lock key's type (`string` or `none`, from its `MGET` value).
    pub(crate) const TYPE: usize = 0;
    /// The lock key's value: the holder's token.
    pub(crate) const VALUE: usize = 1;
    /// The lock key's `PTTL`.
    pub(crate) const PTTL: usize = 2;
    /// The name's fencing counter.
    pub(crate) const FENCE: usize = 3;
    /// The waiters subscribed to the release channel (`PUBSUB NUMSUB`/`SHARDNUMSUB`).
    pub(crate) const WAITERS: usize = 5;
    /// The read-write lock's writer, its `PTTL`, the readers' count and first members, the
    /// writers waiting.
    pub(crate) const WRITER: usize = 6;
    pub(crate) const WRITER_PTTL: usize = 7;
    pub(crate) const READERS: usize = 8;
    pub(crate) const READER_MEMBERS: usize = 9;
    pub(crate) const WRITERS_WAITING: usize = 10;
    /// The semaphore's holders' count, first members, and counts hash.
    pub(crate) const HOLDERS: usize = 11;
    pub(crate) const HOLDER_MEMBERS: usize = 12;
    pub(crate) const PERMIT_COUNTS: usize = 13;
    /// The fair queue's first members and length.
    pub(crate) const FAIR_QUEUE: usize = 14;
    pub(crate) const FAIR_LENGTH: usize = 15;
    /// The note written beside the grant.
    pub(crate) const NOTE: usize = 16;
    /// How many replies a lock has.
    pub(crate) const COUNT: usize = 17;
}

/// The holds in one lock's replies (see `read::queue_reads`): each kind keeps its own keys, so
/// one name can show as several kinds, and each kind's replies are decoded on their own.
/// `foreign`: keep a string key with a TTL that holds no distlock token, as
/// [`HeldKind::Foreign`].
pub(super) fn read_one(
    name: &str,
    key: &str,
    r: &[Value],
    now_ms: i64,
    foreign: bool,
    node: &str,
) -> Vec<HeldLock> {
    let at = |i: usize| reply(r, i);
    let mut base = HeldLock::new(name, key, HeldKind::Mutex, node);
    base.last_fencing_token = text(at(at::FENCE)).and_then(|t| t.parse().ok());
    base.waiters = numsub(at(at::WAITERS));
    let mut found = Vec::new();
    found.extend(string_lock(r, &base, foreign));
    found.extend(read_write_lock(r, &base, now_ms));
    found.extend(semaphore_lock(r, base, now_ms));
    found
}

/// The lock on the name's string key: a mutex, a fair lock when its queue is not empty, or with
/// `foreign` another client's key with a TTL. Its holder is read by lock-redis's one reader
/// ([`HolderReplies`]): the fencing token, and the note written beside this grant, whose
/// description (holder metadata) says since when it is held.
fn string_lock(r: &[Value], base: &HeldLock, foreign: bool) -> Option<HeldLock> {
    let at = |i: usize| reply(r, i);
    if text(at(at::TYPE)).as_deref() != Some("string") {
        return None;
    }
    let value = text(at(at::VALUE)).unwrap_or_default();
    let pttl = number_signed(at(at::PTTL));
    let ours = value.starts_with(TOKEN_PREFIX);
    if !(ours || (foreign && pttl > 0)) {
        return None;
    }
    let queue: Vec<String> = strings(at(at::FAIR_QUEUE));
    let queued = number(at(at::FAIR_LENGTH));
    let (raw_value, note, fence) = (raw(at(at::VALUE)), raw(at(at::NOTE)), raw(at(at::FENCE)));
    let read = HolderReplies {
        value: raw_value.as_deref(),
        pttl_ms: pttl,
        note: note.as_deref(),
        fence: fence.as_deref(),
    }
    .holder();
    let mut holder = HolderView::new(value);
    if let Some(read) = read {
        let mut since = None;
        if ours && read.fencing_token != 0 {
            holder = holder.fencing_token(read.fencing_token);
            since = granted_at(read.fencing_token);
        }
        if let Some(ttl) = read.ttl {
            holder = holder.ttl(ttl);
        }
        if let Some(note) = read.note {
            since = since_of(&note).or(since);
            holder = holder.note(note);
        }
        if let Some(since) = since {
            holder = holder.since(since);
        }
    }
    let kind = if !ours {
        HeldKind::Foreign
    } else if queued > 0 {
        HeldKind::Fair
    } else {
        HeldKind::Mutex
    };
    let mut lock = base.clone().holder(holder);
    lock.kind = kind;
    lock.queued = queued;
    lock.queue = queue;
    Some(lock)
}

/// When the holder was granted the lock, from the description a grant with holder metadata
/// writes as its note (`since_ms`: its wall clock, Unix ms); `None` for any other note.
fn since_of(note: &[u8]) -> Option<SystemTime> {
    let value: serde_json::Value = serde_json::from_slice(note).ok()?;
    let ms = value.get("since_ms")?.as_u64()?;
    Some(UNIX_EPOCH + Duration::from_millis(ms))
}

/// When a grant with fencing token `fencing_token` was made, by the server's clock: a fenced
/// grant's token is `max(the server's clock in µs, counter + 1)` (`TokenScale::Clock`), so it
/// is the grant's time unless grants came faster than one per microsecond. `None` for a token
/// that is not a time of this century (another scale).
fn granted_at(fencing_token: u64) -> Option<SystemTime> {
    // 2001-09-09 to 2286-11-20 in µs: any later Redis clock, and no counter that started at 1.
    const PLAUSIBLE: std::ops::Range<u64> = 1_000_000_000_000_000..10_000_000_000_000_000;
    PLAUSIBLE
        .contains(&fencing_token)
        .then(|| UNIX_EPOCH + Duration::from_micros(fencing_token))
}

/// The read-write lock: held by its writer (with the writer key's TTL), or by its readers.
fn read_write_lock(r: &[Value], base: &HeldLock, now_ms: i64) -> Option<HeldLock> {
    let at = |i: usize| reply(r, i);
    let writer = text(at(at::WRITER));
    let readers = number(at(at::READERS));
    let mut lock = base.clone();
    lock.queued = number(at(at::WRITERS_WAITING));
    if let Some(writer) = writer {
        let mut holder = HolderView::new(writer);
        if let Ok(ttl) = u64::try_from(number_signed(at(at::WRITER_PTTL))) {
            holder = holder.ttl(Duration::from_millis(ttl));
        }
        lock.kind = HeldKind::Write;
        return Some(lock.holder(holder));
    }
    let (live, expired) = live_members(at(at::READER_MEMBERS), now_ms, None);
    let readers = readers.saturating_sub(expired.len() as u64);
    if readers == 0 {
        return None;
    }
    lock.kind = HeldKind::Read;
    lock = live.into_iter().fold(lock, HeldLock::holder);
    lock.holder_count = readers;
    Some(lock)
}

/// The semaphore: its holders and, from its counts hash, `max` and `used`.
fn semaphore_lock(r: &[Value], base: HeldLock, now_ms: i64) -> Option<HeldLock> {
    let at = |i: usize| reply(r, i);
    let counts = pairs(at(at::PERMIT_COUNTS));
    let count = |field: &str| {
        counts
            .iter()
            .find(|(f, _)| f == field)
            .and_then(|(_, v)| v.parse::<u64>().ok())
    };
    let (live, expired) = live_members(at(at::HOLDER_MEMBERS), now_ms, Some(&counts));
    let holders = number(at(at::HOLDERS)).saturating_sub(expired.len() as u64);
    if holders == 0 {
        return None;
    }
    let mut lock = base;
    lock.kind = HeldKind::Semaphore;
    lock.max_permits = count("max");
    let expired_permits: u64 = expired.iter().filter_map(|h| h.permits).sum();
    lock.permits_used = count("used").map(|used| used.saturating_sub(expired_permits));
    lock = live.into_iter().fold(lock, HeldLock::holder);
    lock.holder_count = holders;
    Some(lock)
}

/// The reply at `i` of one lock's replies, nil when missing.
fn reply(r: &[Value], i: usize) -> &Value {
    r.get(i).unwrap_or(&Value::Nil)
}

/// `TIME` as milliseconds.
pub(super) fn server_ms(reply: Option<&Value>) -> i64 {
    match reply {
        Some(Value::Array(parts)) => {
            let part = |i: usize| {
                parts
                    .get(i)
                    .and_then(text)
                    .and_then(|s| s.parse::<i64>().ok())
                    .unwrap_or(0)
            };
            part(0) * 1000 + part(1) / 1000
        }
        _ => 0,
    }
}

/// A string reply's bytes, `None` for nil, errors and arrays.
fn raw(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        _ => None,
    }
}

/// A reply as text, `None` for nil, errors and arrays.
fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) | Value::VerbatimString { text: s, .. } => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        Value::Okay => Some("OK".into()),
        _ => None,
    }
}

/// An integer reply, 0 otherwise (a missing set's ZCARD is 0 too).
fn number_signed(value: &Value) -> i64 {
    match value {
        Value::Int(n) => *n,
        other => text(other).and_then(|t| t.parse().ok()).unwrap_or(0),
    }
}

/// A count, 0 when absent or negative.
fn number(value: &Value) -> u64 {
    u64::try_from(number_signed(value)).unwrap_or(0)
}

/// The count in a `PUBSUB NUMSUB`/`SHARDNUMSUB` reply: `[channel, n]` (an array in RESP2, a
/// map in RESP3).
fn numsub(value: &Value) -> u64 {
    match value {
        Value::Array(parts) => parts.get(1).map_or(0, number),
        Value::Map(pairs) => pairs.first().map_or(0, |(_, n)| number(n)),
        _ => 0,
    }
}

/// A list reply as strings.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) | Value::Set(items) => items.iter().filter_map(text).collect(),
        _ => Vec::new(),
    }
}

/// A flat `[a, b, a, b]` reply (HGETALL in RESP2, `ZRANGE ... WITHSCORES`) or a map, as pairs.
fn pairs(value: &Value) -> Vec<(String, String)> {
    match value {
        Value::Map(pairs) => pairs
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, text(v)?)))
            .collect(),
        Value::Array(items) if items.iter().all(|i| matches!(i, Value::Array(_))) => items
            .iter()
            .filter_map(|pair| {
                let [k, v] = strings(pair).try_into().ok()?;
                Some((k, v))
            })
            .collect(),
        other => strings(other)
            .chunks(2)
            .filter_map(|pair| Some((pair.first()?.clone(), pair.get(1)?.clone())))
            .collect(),
    }
}

/// The members of a set scored by expiry, as [`members`], split into those whose share is
/// live and those whose share has expired (by the server's clock, `now_ms`) but which no
/// write has pruned yet: a crashed holder's stay in the set until the next grant or release,
/// and a listing must not count them as held. The set is read lowest expiry first, so the
/// expired ones are among those read unless more than a page of them wait to be pruned.
fn live_members(
    value: &Value,
    now_ms: i64,
    counts: Option<&[(String, String)]>,
) -> (Vec<HolderView>, Vec<HolderView>) {
    let expiries: Vec<i64> = pairs(value)
        .into_iter()
        .map(|(_, score)| score.parse::<i64>().unwrap_or(0))
        .collect();
    let (mut live, mut expired) = (Vec::new(), Vec::new());
    for (holder, expiry) in members(value, now_ms, counts).into_iter().zip(expiries) {
        if expiry > now_ms {
            live.push(holder);
        } else {
            expired.push(holder);
        }
    }
    (live, expired)
}

/// Members of a sorted set scored by expiry (server ms), with their remaining time and, for a
/// semaphore, the permits each holds (`counts`: the counts hash).
fn members(value: &Value, now_ms: i64, counts: Option<&[(String, String)]>) -> Vec<HolderView> {
    pairs(value)
        .into_iter()
        .map(|(token, score)| {
            // Expiries are whole milliseconds, which Redis prints without a fraction.
            let expiry = score.parse::<i64>().unwrap_or(0);
            let left = u64::try_from(expiry.saturating_sub(now_ms)).unwrap_or(0);
            let permits = counts.and_then(|c| {
                c.iter()
                    .find(|(f, _)| *f == token)
                    .and_then(|(_, n)| n.parse().ok())
            });
            let holder = HolderView::new(token).ttl(Duration::from_millis(left));
            match permits {
                Some(permits) => holder.permits(permits),
                None => holder,
            }
        })
        .collect()
}
