//! The stream of leader changes: [`Election::observe`].

use std::time::Duration;

use futures::Stream;

use super::Election;
use super::leader::{Leader, from_holder, read_holder};
use crate::LockError;
use crate::backend::ReleaseWatch;

/// After a failed read, the next comes this long after (or the poll interval, if shorter).
const ERROR_PAUSE: Duration = Duration::from_secs(1);

/// What an observer has told so far and how it is woken.
struct Observer {
    election: Election,
    /// The last term told, kept across empty spells so no term is told out of order.
    last_term: Option<u64>,
    /// Whether the last thing told was "no leader".
    told_none: bool,
    /// The backend's release announcements of the name, if it makes them.
    watch: Option<ReleaseWatch>,
    subscribed: bool,
    /// After an error: the stream ends (the backend cannot describe holders) or pauses.
    ended: bool,
    pause: Option<Duration>,
}

impl Election {
    /// A stream of the election's leaders as they change: `Some(leader)` for each new term,
    /// in increasing term order, each term at most once, and `None` when nobody leads (once
    /// per empty spell). The first item is the state at subscription.
    ///
    /// It reads the leader from the store ([`Lock::describe_holder`](crate::backend::Lock::describe_holder))
    /// whenever something may have changed: at once on a release the backend announces
    /// ([`Lock::watch`](crate::backend::Lock::watch): Redis, PostgreSQL's lease table), when
    /// the leader's TTL runs out, and otherwise every
    /// [`poll_interval`](Election::poll_interval) (default
    /// [`DEFAULT_OBSERVE_POLL`](super::DEFAULT_OBSERVE_POLL)). A term that begins and ends
    /// between two reads is therefore not seen (a hand-over inside one process, a leader that
    /// resigns within a poll interval); no term is ever told out of order or twice.
    ///
    /// A read that fails yields `Err` and the stream goes on after a pause (1 s, or the poll
    /// interval if shorter); [`LockError::Unsupported`] (a backend that cannot describe the
    /// holder) is yielded once and ends the stream.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the stream (or a pending `next()`) changes nothing.
    pub fn observe(
        &self,
    ) -> impl Stream<Item = Result<Option<Leader>, LockError>> + Send + 'static {
        let observer = Observer {
            election: self.clone(),
            last_term: None,
            told_none: false,
            watch: None,
            subscribed: false,
            ended: false,
            pause: None,
        };
        futures::stream::unfold(observer, |mut observer| async move {
            if observer.ended {
                return None;
            }
            let item = observer.next().await;
            Some((item, observer))
        })
    }
}

impl Observer {
    /// The next change to tell, waiting for one.
    async fn next(&mut self) -> Result<Option<Leader>, LockError> {
        let lock = std::sync::Arc::clone(self.election.locker.backend_lock());
        let name = std::sync::Arc::clone(&self.election.name);
        if let Some(pause) = self.pause.take() {
            tokio::time::sleep(pause).await;
        }
        if !self.subscribed {
            self.subscribed = true;
            // No announcements (or a failed subscription) only means polling.
            self.watch = lock.as_ref().watch(&name).await.ok().flatten();
        }
        loop {
            // Read before the store, so a release between the read and the wait wakes us.
            let generation = self.watch.as_ref().map(|w| w.signal().generation());
            let holder = match lock.as_ref().describe_holder(&name).await {
                Ok(holder) => holder,
                Err(error) => return Err(self.failed(error)),
            };
            let told_term = self.last_term;
            match &holder {
                Some(h) if told_term.is_none_or(|term| h.fencing_token > term) => {
                    // A new term: give its leader a moment to write its record.
                    let holder = if h.note.is_none() {
                        match read_holder(lock.as_ref(), &name).await {
                            Ok(holder) => holder,
                            Err(error) => return Err(self.failed(error)),
                        }
                    } else {
                        holder.clone()
                    };
                    match holder {
                        Some(h) if told_term.is_none_or(|term| h.fencing_token > term) => {
                            self.last_term = Some(h.fencing_token);
                            self.told_none = false;
                            return Ok(Some(from_holder(&h)));
                        }
                        // It ended meanwhile: look again at once.
                        _ => continue,
                    }
                }
                None if !self.told_none => {
                    self.told_none = true;
                    return Ok(None);
                }
                _ => {}
            }
            let poll = self.election.poll;
            // Wake a little after the leader's TTL ends, or at the next poll.
            let wait = holder
                .as_ref()
                .and_then(|h| h.ttl)
                .map_or(poll, |ttl| poll.min(ttl + Duration::from_millis(1)));
            match (&self.watch, generation) {
                (Some(watch), Some(generation)) => {
                    let _ =
                        tokio::time::timeout(wait, watch.signal().changed_since(generation)).await;
                }
                _ => tokio::time::sleep(wait).await,
            }
        }
    }

    /// Records a failed read: the stream ends after an `Unsupported`, pauses otherwise.
    fn failed(&mut self, error: LockError) -> LockError {
        if matches!(error, LockError::Unsupported { .. }) {
            self.ended = true;
        } else {
            self.pause = Some(ERROR_PAUSE.min(self.election.poll.max(Duration::from_millis(1))));
        }
        error
    }
}
