//! The fair lock of a name: its mutex, granted to the head of a queue of waiters.

use std::time::Duration;

use tokio::time::Instant;

use crate::backend::Attempt;
use crate::lease::valid_until;
use crate::memory::store::{Fence, Store};
use crate::{Kind, Token, fair_entry_ttl};

/// The mutex of `name`, for the head of its queue of fair waiters only.
pub(in crate::memory) fn try_acquire(
    store: &mut Store,
    fence: &Fence,
    name: &str,
    kind: Kind,
    token: Token,
    ttl: Duration,
) -> Attempt {
    let now = Instant::now();
    let holder = store.live(name, now).map(|entry| entry.expires);
    let queue = store.fair.entry(name.to_owned()).or_default();
    queue.retain(|(_, lapses)| *lapses > now);
    let place = queue.iter().position(|(waiter, _)| *waiter == token);
    let first = place.map_or(queue.is_empty(), |place| place == 0);
    if let (true, None) = (first, holder) {
        if place.is_some() {
            queue.remove(0);
        }
        if queue.is_empty() {
            store.fair.remove(name);
        }
        let lease = super::mutex::grant(store, fence, name, token, ttl, now);
        return Attempt::Acquired(lease.with_kind(kind));
    }
    // Until the holder's expiry, or the lapse of the entry ahead of us.
    let busy_until = holder.or_else(|| queue.first().map(|(_, lapses)| *lapses));
    if kind == (Kind::Fair { queued: true }) {
        let lapses = valid_until(now, fair_entry_ttl(ttl));
        match place {
            Some(place) => queue[place].1 = lapses,
            None => queue.push((token, lapses)),
        }
    } else if queue.is_empty() {
        store.fair.remove(name);
    }
    Attempt::Busy {
        holder_ttl: busy_until.map(|until| until - now),
        announces: true,
    }
}
