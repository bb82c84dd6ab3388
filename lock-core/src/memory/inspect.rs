//! [`Inspect`] on a `MemoryLock`: the store's maps read under its mutex.

use async_trait::async_trait;
use tokio::time::Instant;

use super::MemoryLock;
use super::store::Store;
use crate::backend::{HeldKind, HeldLock, HolderView, Inspect, ListOptions, Listing, NamePattern};
use crate::{LockError, Token};

/// Where a `MemoryLock`'s locks live, in `HeldLock::node`.
const NODE: &str = "memory";

/// Every hold of `name` in `store` at `now`.
fn holds(store: &mut Store, name: &str, now: Instant) -> Vec<HeldLock> {
    let mut found = Vec::new();
    let queue: Vec<String> = store
        .fair
        .get(name)
        .map(|q| {
            q.iter()
                .filter(|(_, lapses)| *lapses > now)
                .map(|(token, _)| token.to_hex().as_str().to_owned())
                .collect()
        })
        .unwrap_or_default();
    if let Some(entry) = store.live(name, now).copied() {
        let kind = if queue.is_empty() {
            HeldKind::Mutex
        } else {
            HeldKind::Fair
        };
        let mut holder = HolderView::new(entry.token.to_hex().as_str())
            .fencing_token(entry.fence)
            .ttl(entry.expires - now)
            .since(entry.since);
        if let Some((token, note)) = store.notes.get(name)
            && *token == entry.token
        {
            holder = holder.note(std::sync::Arc::clone(note));
        }
        let mut lock = HeldLock::new(name, name, kind, NODE).holder(holder);
        lock.last_fencing_token = Some(entry.fence);
        lock.queued = queue.len() as u64;
        lock.queue = queue;
        found.push(lock);
    }
    if let Some(rw) = store.rw.get_mut(name) {
        rw.prune(now);
        let queued = rw.waiting_writers.len() as u64;
        if let Some(writer) = rw.writer {
            let mut lock = HeldLock::new(name, name, HeldKind::Write, NODE).holder(
                HolderView::new(writer.token.to_hex().as_str())
                    .fencing_token(writer.fence)
                    .ttl(writer.expires - now)
                    .since(writer.since),
            );
            lock.last_fencing_token = Some(writer.fence);
            lock.queued = queued;
            found.push(lock);
        } else if !rw.readers.is_empty() {
            let mut readers: Vec<(&Token, &Instant)> = rw.readers.iter().collect();
            readers.sort_by_key(|(_, expires)| **expires);
            let mut lock = HeldLock::new(name, name, HeldKind::Read, NODE);
            for (token, expires) in readers {
                lock = lock.holder(HolderView::new(token.to_hex().as_str()).ttl(*expires - now));
            }
            lock.queued = queued;
            found.push(lock);
        }
    }
    if let Some(semaphore) = store.semaphores.get_mut(name) {
        semaphore.prune(now);
        if !semaphore.holders.is_empty() {
            let mut lock = HeldLock::new(name, name, HeldKind::Semaphore, NODE);
            lock.max_permits = Some(u64::from(semaphore.max));
            lock.permits_used = Some(u64::from(semaphore.in_use()));
            let mut holders: Vec<_> = semaphore.holders.iter().collect();
            holders.sort_by_key(|(_, (_, expires))| *expires);
            for (token, (permits, expires)) in holders {
                lock = lock.holder(
                    HolderView::new(token.to_hex().as_str())
                        .ttl(*expires - now)
                        .permits(u64::from(*permits)),
                );
            }
            found.push(lock);
        }
    }
    found
}

#[async_trait]
impl Inspect for MemoryLock {
    async fn list(
        &self,
        pattern: &NamePattern,
        _options: &ListOptions,
    ) -> Result<Listing, LockError> {
        let now = Instant::now();
        let mut store = self.state();
        let mut names: Vec<String> = store
            .locks
            .keys()
            .chain(store.rw.keys())
            .chain(store.semaphores.keys())
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        let scanned = names.len() as u64;
        let locks = names
            .iter()
            .filter(|name| pattern.matches(name))
            .flat_map(|name| holds(&mut store, name, now))
            .collect();
        Ok(Listing::new(locks, scanned))
    }

    async fn read(&self, name: &str) -> Result<Vec<HeldLock>, LockError> {
        Ok(holds(&mut self.state(), name, Instant::now()))
    }

    async fn release_held(&self, name: &str, token: &str) -> Result<bool, LockError> {
        let now = Instant::now();
        let mut store = self.state();
        let is = |t: &Token| t.to_hex().as_str() == token;
        if store.live(name, now).is_some_and(|e| is(&e.token)) {
            store.locks.remove(name);
            store.notes.remove(name);
            return Ok(true);
        }
        let mut released = false;
        if let Some(rw) = store.rw.get_mut(name) {
            rw.prune(now);
            if rw.writer.is_some_and(|w| is(&w.token)) {
                rw.writer = None;
                released = true;
            } else {
                let before = rw.readers.len();
                rw.readers.retain(|t, _| !is(t));
                released = rw.readers.len() < before;
            }
        }
        if !released && let Some(semaphore) = store.semaphores.get_mut(name) {
            let before = semaphore.holders.len();
            semaphore.holders.retain(|t, _| !is(t));
            released = semaphore.holders.len() < before;
        }
        Ok(released)
    }
}
