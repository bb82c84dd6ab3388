//! The mutex of a name: one holder at a time, each grant with the next fencing token.

use std::time::Duration;

use tokio::time::Instant;

use crate::backend::Attempt;
use crate::lease::valid_until;
use crate::memory::store::{Entry, Fence, Store};
use crate::{Lease, Token};

/// The mutex `name` for `token` for `ttl`, unless someone holds it.
pub(in crate::memory) fn try_acquire(
    store: &mut Store,
    fence: &Fence,
    name: &str,
    token: Token,
    ttl: Duration,
) -> Attempt {
    let now = Instant::now();
    if let Some(entry) = store.live(name, now) {
        return Attempt::Busy {
            holder_ttl: Some(entry.expires - now),
            // Every holder here is a distlock holder: a backend that wraps this one and
            // offers `watch` announces all of their releases.
            announces: true,
        };
    }
    Attempt::Acquired(grant(store, fence, name, token, ttl, now))
}

/// Makes `token` the holder of the mutex `name` from `now` for `ttl`, with the next fencing
/// token: the grant of a plain and of a fair request alike.
pub(in crate::memory) fn grant(
    store: &mut Store,
    fence: &Fence,
    name: &str,
    token: Token,
    ttl: Duration,
    now: Instant,
) -> Lease {
    let expires = valid_until(now, ttl);
    let fence = fence.next();
    store.locks.insert(
        name.to_owned(),
        Entry {
            token,
            expires,
            fence,
            since: std::time::SystemTime::now(),
        },
    );
    Lease::new(name, token, fence, expires)
}
