//! Decoding one lock's replies to the reads of `redis_read.rs` into the locks they show: each
//! kind from its own replies, and the reply values (strings, counts, pairs, sorted-set
//! members) taken leniently, nil or a wrong type reading as absent.

use lock_core::backend::Holder;
use lock_redis::{HolderReplies, TOKEN_PREFIX};
use redis::Value;

use crate::inspect::{LockInfo, Member, Members, Permits};

/// The holder of the lock key whose value is `at(1)`, read by lock-redis's one reader from the
/// replies of `redis_read::queue_reads`; `None` when it said nothing about itself.
fn holder_of(at: impl Fn(usize) -> Option<Vec<u8>>, pttl_ms: i64) -> Option<Holder> {
    let (value, note, fence) = (at(1), at(16), at(3));
    HolderReplies {
        value: value.as_deref(),
        pttl_ms,
        note: note.as_deref(),
        fence: fence.as_deref(),
    }
    .holder()
    .filter(|holder| holder.note.is_some())
}

/// The locks in one lock's replies (see `redis_read::queue_reads`): each kind keeps its own
/// keys, so one name can show as several kinds, and each kind's replies are decoded on their
/// own.
pub(super) fn read_one(
    name: &str,
    key: &str,
    r: &[Value],
    now_ms: i64,
    foreign: bool,
    node: &str,
) -> Vec<LockInfo> {
    let at = |i: usize| reply(r, i);
    let base = LockInfo {
        name: name.to_owned(),
        key: key.to_owned(),
        kind: "mutex",
        token: None,
        ttl_ms: None,
        fencing_token: text(at(3)).and_then(|t| t.parse().ok()),
        waiters: numsub(at(5)),
        queued: 0,
        readers: None,
        permits: None,
        fair_queue: Vec::new(),
        holder: None,
        node: node.to_owned(),
        ..LockInfo::default()
    };
    let holder = holder_of(|i| raw(at(i)), number_signed(at(2)));
    let with_holder = |mut info: LockInfo| {
        info.holder = holder
            .clone()
            .filter(|_| info.token.as_deref().map(str::as_bytes) == raw(at(1)).as_deref());
        info
    };
    let mut found = Vec::new();
    found.extend(string_lock(r, &base, foreign).map(with_holder));
    found.extend(read_write_lock(r, &base, now_ms).map(with_holder));
    found.extend(semaphore_lock(r, base, now_ms));
    found
}

/// The lock on the name's string key: a mutex, a fair lock when its queue is not empty, or with
/// `foreign` another client's key with a TTL.
fn string_lock(r: &[Value], base: &LockInfo, foreign: bool) -> Option<LockInfo> {
    let at = |i: usize| reply(r, i);
    if text(at(0)).as_deref() != Some("string") {
        return None;
    }
    let value = text(at(1)).unwrap_or_default();
    let ttl = number_signed(at(2));
    let ours = value.starts_with(TOKEN_PREFIX);
    if !(ours || (foreign && ttl > 0)) {
        return None;
    }
    let fair_queue: Vec<String> = strings(at(14));
    let queued = number(at(15));
    Some(LockInfo {
        kind: if !ours {
            "foreign"
        } else if queued > 0 {
            "fair"
        } else {
            "mutex"
        },
        token: Some(value),
        ttl_ms: (ttl >= 0).then_some(ttl),
        queued,
        fair_queue,
        ..base.clone()
    })
}

/// The read-write lock: its writer (with the writer key's TTL) and its readers, when either is
/// there.
fn read_write_lock(r: &[Value], base: &LockInfo, now_ms: i64) -> Option<LockInfo> {
    let at = |i: usize| reply(r, i);
    let writer = text(at(6));
    let readers = number(at(8));
    if writer.is_none() && readers == 0 {
        return None;
    }
    let ttl = number_signed(at(7));
    Some(LockInfo {
        kind: "read-write",
        token: writer.clone(),
        ttl_ms: writer.is_some().then_some(ttl).filter(|t| *t >= 0),
        queued: number(at(10)),
        readers: Some(Members {
            count: readers,
            shown: members(at(9), now_ms, None),
        }),
        ..base.clone()
    })
}

/// The semaphore: its holders and, from its counts hash, `max` and `used`.
fn semaphore_lock(r: &[Value], base: LockInfo, now_ms: i64) -> Option<LockInfo> {
    let at = |i: usize| reply(r, i);
    let holders = number(at(11));
    if holders == 0 {
        return None;
    }
    let counts = pairs(at(13));
    let count = |field: &str| {
        counts
            .iter()
            .find(|(f, _)| f == field)
            .and_then(|(_, v)| v.parse().ok())
    };
    let shown = members(at(12), now_ms, Some(&counts));
    Some(LockInfo {
        kind: "semaphore",
        permits: Some(Permits {
            max: count("max"),
            used: count("used"),
            holders: Members {
                count: holders,
                shown,
            },
        }),
        ttl_ms: None,
        ..base
    })
}

/// The reply at `i` of one lock's replies (see `redis_read::queue_reads`), nil when missing.
fn reply(r: &[Value], i: usize) -> &Value {
    r.get(i).unwrap_or(&Value::Nil)
}

/// `TIME` as milliseconds.
pub(super) fn server_ms(reply: Option<&Value>) -> i64 {
    match reply {
        Some(Value::Array(parts)) => {
            let secs = parts
                .first()
                .and_then(text)
                .and_then(|s| s.parse::<i64>().ok());
            let micros = parts
                .get(1)
                .and_then(text)
                .and_then(|s| s.parse::<i64>().ok());
            secs.unwrap_or(0) * 1000 + micros.unwrap_or(0) / 1000
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

/// Members of a sorted set scored by expiry (server ms), with their remaining time and, for a
/// semaphore, the permits each holds (`counts`: the counts hash).
fn members(value: &Value, now_ms: i64, counts: Option<&[(String, String)]>) -> Vec<Member> {
    pairs(value)
        .into_iter()
        .map(|(token, score)| {
            // Expiries are whole milliseconds, which Redis prints without a fraction.
            let expiry = score.parse::<i64>().unwrap_or(0);
            let permits = counts.and_then(|c| {
                c.iter()
                    .find(|(f, _)| *f == token)
                    .and_then(|(_, n)| n.parse().ok())
            });
            Member {
                ttl_ms: expiry.saturating_sub(now_ms),
                token,
                permits,
            }
        })
        .collect()
}
