//! The read-write lock of a name: readers share it, a writer holds it alone, and waiting writers
//! keep new readers out (writer preference).

use std::time::Duration;

use tokio::time::Instant;

use crate::backend::Attempt;
use crate::lease::valid_until;
use crate::memory::store::{Entry, Fence, Store};
use crate::{Kind, Lease, Token};

/// A reader's share or the write lock, by `kind`, with writer preference as it says.
pub(in crate::memory) fn try_acquire(
    store: &mut Store,
    fence: &Fence,
    name: &str,
    kind: Kind,
    token: Token,
    ttl: Duration,
) -> Attempt {
    let (reading, writer_preference) = match kind {
        Kind::Read { writer_preference } => (true, writer_preference),
        Kind::Write { writer_preference } => (false, writer_preference),
        _ => unreachable!("called for read-write kinds only"),
    };
    let now = Instant::now();
    let rw = store.rw.entry(name.to_owned()).or_default();
    rw.prune(now);
    // Until when the holders that keep this request out may stay.
    let busy_until = match rw.writer {
        Some(writer) => Some(writer.expires),
        None if reading && writer_preference => rw.waiting_writers.values().max().copied(),
        None if reading => None,
        None => rw.readers.values().max().copied(),
    };
    if let Some(until) = busy_until {
        if !reading && writer_preference {
            rw.waiting_writers.insert(token, valid_until(now, ttl));
        }
        return Attempt::Busy {
            holder_ttl: Some(until - now),
            announces: true,
        };
    }
    let expires = valid_until(now, ttl);
    let fencing_token = if reading {
        rw.readers.insert(token, expires);
        // The last write's token: no write granted so far has a greater one, every later
        // write has a greater one.
        fence.last()
    } else {
        rw.waiting_writers.remove(&token);
        let fence = fence.next();
        rw.writer = Some(Entry {
            token,
            expires,
            fence,
            since: std::time::SystemTime::now(),
        });
        fence
    };
    Attempt::Acquired(Lease::new(name, token, fencing_token, expires).with_kind(kind))
}
