//! The wait for one name: in this process's first-in first-out line for it, then, at the head,
//! attempt after attempt, woken by releases (a guard of this process, the backend's
//! announcement, a fair waiter's turn) or by the pace's delay.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::handle::{Ask, Locker, single_try};
use super::options::Options;
use super::pace::{Pace, changed};
use crate::backend::{Attempt, ReleaseWatch};
use crate::metric::{self, Labels, Via};
use crate::runtime::cleanup::ReleaseOnDrop;
use crate::runtime::waiters::{Signals, Ticket};
use crate::{Guard, Kind, Lease, LockError, Token};

/// One request's wait for one name of one kind.
pub(super) struct Line<'a> {
    locker: &'a Locker,
    name: &'a Arc<str>,
    kind: Kind,
    options: &'a Options,
}

impl<'a> Line<'a> {
    pub(super) fn new(
        locker: &'a Locker,
        name: &'a Arc<str>,
        kind: Kind,
        options: &'a Options,
    ) -> Self {
        Self {
            locker,
            name,
            kind,
            options,
        }
    }

    /// Waits for the grant, asking for `ttl`; a request that ends without the lock (deadline,
    /// error) withdraws its waiter's record from the backend before it returns, so the readers
    /// a waiting writer held back (or the fair waiters behind it) are let in as soon as the
    /// caller hears of it. (Cancelled, the record is withdrawn in the background.)
    pub(super) async fn wait(
        &self,
        ttl: Duration,
        labels: &Labels,
        attempts: &mut u32,
    ) -> Result<Guard, LockError> {
        let mut record = None;
        let result = self.wait_in_line(ttl, labels, attempts, &mut record).await;
        match (&result, record) {
            (Err(_), Some(record)) => {
                let lease = record.lease().clone();
                match self.locker.backend_lock().as_ref().release(&lease).await {
                    Ok(_) => record.disarm(),
                    // Kept armed: dropped, it tries again in the background.
                    Err(error) => {
                        tracing::debug!(%error, "withdrawing the waiter's record failed");
                    }
                }
            }
            // A grant consumed the record (its token is the lease's): nothing to withdraw.
            (Ok(_), Some(record)) => record.disarm(),
            (_, None) => {}
        }
        result
    }

    /// `record`: a waiter's record in the backend (a waiting writer, a fair waiter's queue
    /// entry): the token of its busy attempts, reused by the next one, and released if the
    /// request ends without the lock.
    async fn wait_in_line(
        &self,
        ttl: Duration,
        labels: &Labels,
        attempts: &mut u32,
        record: &mut Option<ReleaseOnDrop>,
    ) -> Result<Guard, LockError> {
        let ticket = self.locker.join_line(self.name, self.kind.class(), ttl);
        // Declared after the ticket, so dropped before it, as the line's other state was.
        let mut waiter = Waiter {
            line: self,
            ttl,
            labels,
            // A request that does not wait asks as a single try does: a writer records nothing.
            kind: if self.options.wait() == Some(Duration::ZERO) {
                single_try(self.kind)
            } else {
                self.kind
            },
            pace: self.locker.pace(self.options),
            attempts,
            record,
            waiting: None,
            tried_watch: false,
            turn: None,
            turn_token: None,
        };
        loop {
            if let Some(guard) = waiter.step(&ticket).await? {
                ticket.granted(guard.held());
                drop(ticket); // the next in line becomes head, and waits for our release
                return Ok(guard);
            }
        }
    }
}

/// The state of one wait in line, between its steps.
struct Waiter<'l, 'a> {
    line: &'l Line<'a>,
    ttl: Duration,
    labels: &'l Labels,
    /// The kind each attempt asks for.
    kind: Kind,
    pace: Pace<'l>,
    attempts: &'l mut u32,
    record: &'l mut Option<ReleaseOnDrop>,
    waiting: Option<Waiting>,
    /// Whether this wait subscribed to the name's releases (or tried to) already.
    tried_watch: bool,
    /// A fair waiter's subscription to its own turn, and the token it is for.
    turn: Option<ReleaseWatch>,
    turn_token: Option<Token>,
}

/// How an attempt that did not get the lock ended.
struct Miss {
    holder_ttl: Option<Duration>,
    announces: bool,
    /// A retryable backend failure, to retry within the budget.
    failure: Option<LockError>,
}

impl Waiter<'_, '_> {
    /// One turn of the wait: the guard once granted, `None` to go on.
    async fn step(&mut self, ticket: &Ticket) -> Result<Option<Guard>, LockError> {
        if !ticket.is_head() {
            self.enter_waiting();
            tokio::select! {
                () = ticket.my_turn() => return Ok(None),
                () = self.pace.deadline() => return Err(self.pace.timed_out()),
            }
        }
        // Read the signals before anything else: a release or handoff after this point bumps
        // `local`, so the waits below cannot miss it.
        let signals = ticket.signals();
        let local_seen = signals.local.generation();
        // A guard of this process released the name by handing it to us. (Looked for after
        // reading the signals: a handoff landing between the two would otherwise leave us
        // waiting for the handed lease's validity.)
        if let Some(lease) = ticket.take_handed() {
            return Ok(Some(self.grant(lease, Via::Handover)));
        }
        if let Some(held_until) = signals.held_until {
            self.wait_for_local_holder(ticket, &signals, local_seen, held_until)
                .await?;
            return Ok(None);
        }
        let remote_seen = signals.remote.as_ref().map(|w| w.signal().generation());
        let turn_seen = self.turn.as_ref().map(|w| w.signal().generation());
        let miss = match self.attempt().await? {
            Ok(guard) => return Ok(Some(guard)),
            Err(miss) => miss,
        };
        let failure = self.pace.after_miss(self.line.name, miss.failure)?;
        self.enter_waiting();
        if failure.is_none() && self.subscribe(ticket, &signals).await {
            return Ok(None);
        }
        let announced = signals.remote.is_some() && miss.announces && failure.is_none();
        let turn = self.turn.as_ref();
        let woken = async {
            tokio::select! {
                () = signals.local.changed_since(local_seen) => {}
                () = changed(signals.remote.as_deref(), remote_seen) => {}
                () = changed(turn, turn_seen) => {}
            }
        };
        self.pace
            .before_next(*self.attempts, miss.holder_ttl, announced, woken)
            .await;
        Ok(None)
    }

    /// Counts this request in the `distlock_waiters` gauge from now on.
    fn enter_waiting(&mut self) {
        let labels = self.labels;
        self.waiting
            .get_or_insert_with(|| Waiting::enter(labels.clone()));
    }

    /// A guard of this process holds the name: wait for its release rather than send an
    /// attempt that cannot succeed (at the lease's validity — as renewal moves it — try
    /// anyway).
    async fn wait_for_local_holder(
        &mut self,
        ticket: &Ticket,
        signals: &Signals,
        local_seen: u64,
        held_until: Instant,
    ) -> Result<(), LockError> {
        self.enter_waiting();
        let until = self.pace.capped(held_until);
        tokio::select! {
            () = signals.local.changed_since(local_seen) => {}
            () = tokio::time::sleep_until(until) => {
                if self.pace.is_over() {
                    // Still held here: an attempt could not succeed.
                    return Err(self.pace.timed_out());
                }
                ticket.granted_expired();
            }
        }
        Ok(())
    }

    /// One attempt: `Ok(Ok(guard))` when granted, `Ok(Err(miss))` when busy or failing in a
    /// way worth retrying, `Err` for an error to return at once. A transient backend failure
    /// (connection dropped, server restarting) is retried like a busy lock, within the same
    /// wait; the caller sees it if it outlasts the wait.
    async fn attempt(&mut self) -> Result<Result<Guard, Miss>, LockError> {
        *self.attempts = self.attempts.saturating_add(1);
        let line = self.line;
        let attempt = line
            .locker
            .attempt(
                line.name,
                self.kind,
                Ask {
                    ttl: self.ttl,
                    renewed: line.options.renewal().is_some(),
                },
                self.labels,
                self.record,
                self.pace.started(),
            )
            .await;
        match attempt {
            Ok(Attempt::Acquired(lease)) => Ok(Ok(self.grant(lease, Via::Attempt))),
            Ok(Attempt::Busy {
                holder_ttl,
                announces,
            }) => {
                self.pace.answered();
                Ok(Err(Miss {
                    holder_ttl: self.retry_within(holder_ttl),
                    announces,
                    failure: None,
                }))
            }
            Err(error) if error.is_retryable() => Ok(Err(Miss {
                holder_ttl: None,
                announces: false,
                failure: Some(error),
            })),
            Err(error) => Err(error),
        }
    }

    fn grant(&self, lease: Lease, via: Via) -> Guard {
        let line = self.line;
        line.locker.grant(
            line.name,
            lease,
            self.labels,
            self.pace.started(),
            via,
            line.options,
        )
    }

    /// Subscribes to the name's releases once per line, and a fair waiter to its own turn once
    /// per token (a fair holder's release tells the head of the queue alone). `true` when it
    /// subscribed: then try again at once, as a release may have landed between the busy
    /// answer and the subscription.
    async fn subscribe(&mut self, ticket: &Ticket, signals: &Signals) -> bool {
        let line = self.line;
        let lock = line.locker.backend_lock().as_ref();
        if signals.remote.is_none() && !self.tried_watch {
            self.tried_watch = true;
            match lock.watch(line.name).await {
                Ok(Some(watch)) => {
                    ticket.share_watch(watch);
                    return true;
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::debug!(%error, "subscribing to releases failed; polling instead");
                }
            }
        }
        if self.kind == (Kind::Fair { queued: true })
            && let Some(token) = self.record.as_ref().map(|r| *r.lease().token())
            && self.turn_token != Some(token)
        {
            self.turn_token = Some(token);
            match lock.watch_turn(line.name, &token).await {
                Ok(Some(watch)) => {
                    self.turn = Some(watch);
                    return true;
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::debug!(%error, "subscribing to the turn failed; polling instead");
                }
            }
        }
        false
    }

    /// How long a busy attempt may wait before the next: the holder's TTL, but for a waiter
    /// that left a record (a writer with writer preference, a fair waiter) at most half the
    /// time its record lasts, so the next attempt renews the record before it lapses.
    fn retry_within(&self, holder_ttl: Option<Duration>) -> Option<Duration> {
        let lasts = match self.line.kind {
            Kind::Write {
                writer_preference: true,
            } => self.ttl,
            Kind::Fair { queued: true } => crate::fair_entry_ttl(self.ttl),
            _ => return holder_ttl,
        };
        Some(holder_ttl.map_or(lasts / 2, |holder| holder.min(lasts / 2)))
    }
}

/// Counts a request in the `distlock_waiters` gauge while it waits (also when cancelled).
struct Waiting(Labels);

impl Waiting {
    fn enter(labels: Labels) -> Self {
        labels.gauge(metric::WAITERS, 1.0);
        Self(labels)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.gauge(metric::WAITERS, -1.0);
    }
}
