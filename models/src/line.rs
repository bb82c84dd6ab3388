//! Model 1: the `Locker`'s in-process wait line and the hand-over, with waiters in other
//! processes woken by release announcements that may be lost.
//!
//! Clients are tasks; each belongs to a process. Tasks of one process that wait for the name
//! queue first-in first-out and only the head contends (`lock-core/src/runtime/waiters.rs`,
//! `Waiters::join`, `Ticket::is_head`); a guard that ends its lease hands it to the head of its
//! own process's line when there is one (`lock-core/src/runtime/handoff.rs`, `end_lease`), at
//! most `max_handoffs` times in a row (`MAX_LOCAL_HANDOFFS`), otherwise releases it to the store,
//! which announces the release to subscribed processes (the waiting mark, `{k}:distlock-released`).
//! Announcements may be lost: a waiter then retries when the holder's TTL runs out
//! (`lock-core/src/locker/pace.rs`, `Pace::before_next`). Time is a global tick; every lease
//! lasts `TTL` ticks from its grant, by the store's clock and its holder's alike (no drift).
//! Leases are not renewed (`fixed_ttl`). The store's hand-over is `lock-redis/lua/handover.lua`
//! (and `MemoryLock::hand_over`): the stored token must still be the releasing lease's.

use stateright::{Model, Property};

use crate::check::quiescent;

/// How long a lease lasts, in ticks.
pub const TTL: u8 = 2;

/// A wake-up that never comes by itself (no deadline).
const NEVER: u8 = u8::MAX;

/// Which policy the model runs: the code's, or a known-bad change to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// What the code does.
    Real,
    /// The store's hand-over moves the lock to the next token without checking that the
    /// releasing guard's token still holds it (a lease that ran out, a lock granted since to
    /// another process): breaks mutual exclusion.
    HandOverUnchecked,
    /// A waiter subscribed to announcements sleeps until one comes, without the holder's TTL
    /// as the fallback: a lost announcement leaves it waiting for ever while the lock is free.
    SleepWithoutDeadline,
}

/// The model: which process each client (task) runs in, and how many times it takes the lock.
#[derive(Clone, Debug)]
pub struct LineModel {
    /// The policy.
    pub variant: Variant,
    /// `process[c]`: the process of client `c`; processes are numbered from 0.
    pub process: Vec<u8>,
    /// `rounds[c]`: how many times client `c` asks for the lock (one after the other).
    pub rounds: Vec<u8>,
    /// `MAX_LOCAL_HANDOFFS` (8 in the code; smaller here so that the bound is reached).
    pub max_handoffs: u8,
    /// How many names; each round, a client asks for any one of them.
    pub names: u8,
}

impl LineModel {
    /// Two tasks of process 0 (the first asks twice) and one task of process 1, a hand-over
    /// bound of 1: the 3-client case the tests check.
    pub fn three_clients(variant: Variant) -> Self {
        Self {
            variant,
            process: vec![0, 0, 1],
            rounds: vec![2, 1, 1],
            max_handoffs: 1,
            names: 1,
        }
    }

    /// Client `c`'s process and the name it asks for.
    fn slot(&self, state: &State, c: u8) -> (usize, usize) {
        (
            usize::from(self.process[usize::from(c)]),
            usize::from(state.asking[usize::from(c)]),
        )
    }

    fn processes(&self) -> usize {
        self.process
            .iter()
            .map(|p| usize::from(*p) + 1)
            .max()
            .unwrap_or(0)
    }
}

/// Where one client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Task {
    /// Not asking; `left` more rounds to go (0: finished).
    Idle {
        /// Rounds still to ask for.
        left: u8,
    },
    /// In its process's line; as the head, it takes its next step at `wake_at`.
    Waiting {
        /// The tick of its next step (a signal sets it to now).
        wake_at: u8,
        /// Rounds to ask for after this one.
        left: u8,
    },
    /// Holds the lease with fencing token `token`, valid until `until`.
    Holding {
        /// The lease's fencing token (also its identity in the store).
        token: u8,
        /// The lease's `valid_until`.
        until: u8,
        /// Rounds to ask for after this one.
        left: u8,
    },
    /// Gave up waiting (cancelled or timed out).
    Cancelled,
}

/// What one process keeps for the name while it has waiters (`Waiting` in waiters.rs); all
/// of it is forgotten when its line empties.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Local {
    /// The clients in line, first the head.
    pub line: Vec<u8>,
    /// A lease handed to the head and not yet taken: (token, valid until).
    pub handed: Option<(u8, u8)>,
    /// `holder`: a task of this process holds the name (or it was handed), until this tick.
    pub holder_until: Option<u8>,
    /// `handoffs_in_row`.
    pub handoffs: u8,
    /// Subscribed to the store's announcements (`Ticket::share_watch`).
    pub subscribed: bool,
    /// An announcement on its way to this process.
    pub message: bool,
}

/// The store's record of the name: the `SET NX PX` key, the fencing counter, the waiting mark.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Store {
    /// (token, expires): the key, absent once `expires <= now`.
    pub holder: Option<(u8, u8)>,
    /// The last fencing token issued.
    pub fence: u8,
    /// The waiting mark: a busy attempt sets it, a release publishes only when it is set.
    pub mark: bool,
}

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The tick.
    pub now: u8,
    /// The store, per name.
    pub stores: Vec<Store>,
    /// Per process, per name.
    pub locals: Vec<Vec<Local>>,
    /// Per client.
    pub tasks: Vec<Task>,
    /// Per client: the name it asks for or holds (this round's).
    pub asking: Vec<u8>,
}

/// A step of the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// `Locker::lock(name).wait()` begins: the client joins its process's line for the name
    /// (`Waiters::join`).
    Join(u8, u8),
    /// The head's next step (`Waiter::step` in lock-core/src/locker/line.rs): take a handed
    /// lease, wait for a local holder, or attempt at the store.
    Step(u8),
    /// The holder's guard is released (`Guard::release` → `end_lease`).
    Release(u8),
    /// A waiter's future is dropped or its deadline passes (`Drop for Ticket`).
    Cancel(u8),
    /// The announcement of name `n` reaches process `p` (its `ReleaseWatch` fires).
    Deliver(u8, u8),
    /// The announcement of name `n` to process `p` is lost (pub/sub gives no guarantee).
    Lose(u8, u8),
    /// Time passes.
    Tick,
}

impl Store {
    fn live(&self, now: u8) -> Option<u8> {
        self.holder
            .filter(|(_, expires)| *expires > now)
            .map(|(t, _)| t)
    }
}

impl LineModel {
    fn head_wakes(state: &mut State, p: usize, n: usize) {
        let now = state.now;
        if let Some(&head) = state.locals[p][n].line.first()
            && let Task::Waiting { wake_at, .. } = &mut state.tasks[usize::from(head)]
        {
            *wake_at = now;
        }
    }

    /// The store's compare-and-delete (`Lock::release`), and the announcement when someone
    /// marked a wait.
    fn store_release(state: &mut State, n: usize, token: u8) {
        if state.stores[n].live(state.now) == Some(token) {
            state.stores[n].holder = None;
            if state.stores[n].mark {
                state.stores[n].mark = false;
                for locals in &mut state.locals {
                    let local = &mut locals[n];
                    if local.subscribed {
                        local.message = true;
                    }
                }
            }
        }
    }

    /// `Waiters::released`: the local holder is gone; the head looks again.
    fn released(state: &mut State, p: usize, n: usize) {
        if state.locals[p][n].line.is_empty() {
            return;
        }
        state.locals[p][n].holder_until = None;
        state.locals[p][n].handoffs = 0;
        Self::head_wakes(state, p, n);
    }

    /// A ticket leaves the line (`Drop for Ticket`): the next head steps at once; the last one
    /// out forgets the line, its subscription, and releases a lease handed and never taken.
    fn leave(state: &mut State, p: usize, n: usize, c: u8) {
        let was_head = state.locals[p][n].line.first() == Some(&c);
        state.locals[p][n].line.retain(|x| *x != c);
        if state.locals[p][n].line.is_empty() {
            if let Some((token, _)) = state.locals[p][n].handed.take() {
                Self::store_release(state, n, token);
            }
            state.locals[p][n] = Local::default();
        } else if was_head {
            if let Some((token, _)) = state.locals[p][n].handed.take() {
                state.locals[p][n].holder_until = None;
                Self::store_release(state, n, token);
            }
            Self::head_wakes(state, p, n);
        }
    }

    /// A grant to client `c` (by attempt or by taking a handed lease): `Ticket::granted`, then
    /// the ticket is dropped.
    fn granted(state: &mut State, p: usize, n: usize, c: u8, token: u8, until: u8, left: u8) {
        state.tasks[usize::from(c)] = Task::Holding { token, until, left };
        state.locals[p][n].holder_until = Some(until);
        Self::leave(state, p, n, c);
    }

    fn step(&self, state: &mut State, c: u8, left: u8) {
        let (p, n) = self.slot(state, c);
        let now = state.now;
        // `Ticket::take_handed`: a valid handed lease is ours; an expired one is released.
        if let Some((token, until)) = state.locals[p][n].handed.take() {
            if until > now {
                Self::granted(state, p, n, c, token, until, left);
                return;
            }
            Self::store_release(state, n, token);
        }
        // `wait_for_local_holder`: until its release (a signal) or its validity.
        if let Some(until) = state.locals[p][n].holder_until {
            let wake_at = if until > now {
                until
            } else {
                state.locals[p][n].holder_until = None; // `granted_expired`
                now
            };
            state.tasks[usize::from(c)] = Task::Waiting { wake_at, left };
            return;
        }
        // `Waiter::attempt` → the store's `SET NX PX` with the fencing counter.
        match state.stores[n].live(now) {
            None => {
                state.stores[n].fence += 1;
                let token = state.stores[n].fence;
                state.stores[n].holder = Some((token, now + TTL));
                Self::granted(state, p, n, c, token, now + TTL, left);
            }
            Some(_) => {
                state.stores[n].mark = true;
                let expires = state.stores[n].holder.map_or(now, |(_, e)| e);
                let wake_at = if !state.locals[p][n].subscribed {
                    // `Waiter::subscribe` answered true: try again at once, as a release may
                    // have come between the busy answer and the subscription.
                    state.locals[p][n].subscribed = true;
                    now
                } else if self.variant == Variant::SleepWithoutDeadline {
                    NEVER
                } else {
                    // `Pace::before_next`, announced: the holder's TTL, or the message first.
                    expires
                };
                state.tasks[usize::from(c)] = Task::Waiting { wake_at, left };
            }
        }
    }

    fn release(&self, state: &mut State, c: u8, token: u8, left: u8) {
        let (p, n) = self.slot(state, c);
        let now = state.now;
        state.tasks[usize::from(c)] = Task::Idle { left };
        let local = &state.locals[p][n];
        // `Waiters::successor`.
        let successor =
            !local.line.is_empty() && local.handoffs < self.max_handoffs && local.handed.is_none();
        if successor {
            // `Lock::hand_over`: one atomic step of the store.
            let owned = match self.variant {
                Variant::HandOverUnchecked => true,
                _ => state.stores[n].live(now) == Some(token),
            };
            if owned {
                state.stores[n].fence += 1;
                let next = state.stores[n].fence;
                state.stores[n].holder = Some((next, now + TTL));
                // `Waiters::hand`.
                let local = &mut state.locals[p][n];
                local.handoffs += 1;
                local.holder_until = Some(now + TTL);
                local.handed = Some((next, now + TTL));
                Self::head_wakes(state, p, n);
            } else {
                Self::released(state, p, n); // `Handover::NotOwned`
            }
            return;
        }
        Self::store_release(state, n, token);
        Self::released(state, p, n);
    }

    fn has_deadline(state: &State) -> bool {
        let now = state.now;
        let later = |t: u8| t > now && t != NEVER;
        state
            .stores
            .iter()
            .any(|store| store.holder.is_some_and(|(_, e)| later(e)))
            || state.tasks.iter().any(|t| match t {
                Task::Waiting { wake_at, .. } => later(*wake_at),
                Task::Holding { until, .. } => later(*until),
                _ => false,
            })
            || state.locals.iter().flatten().any(|l| {
                l.handed.is_some_and(|(_, u)| later(u)) || l.holder_until.is_some_and(later)
            })
    }
}

impl Model for LineModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let names = usize::from(self.names);
        vec![State {
            now: 0,
            stores: vec![Store::default(); names],
            locals: vec![vec![Local::default(); names]; self.processes()],
            tasks: self
                .rounds
                .iter()
                .map(|r| Task::Idle { left: *r })
                .collect(),
            asking: vec![0; self.rounds.len()],
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, task) in state.tasks.iter().enumerate() {
            let c = u8::try_from(c).unwrap_or(u8::MAX);
            let (p, n) = self.slot(state, c);
            match task {
                Task::Idle { left } if *left > 0 => {
                    actions.extend((0..self.names).map(|name| Action::Join(c, name)));
                }
                Task::Waiting { wake_at, .. } => {
                    if state.locals[p][n].line.first() == Some(&c) && *wake_at <= state.now {
                        actions.push(Action::Step(c));
                    }
                    actions.push(Action::Cancel(c));
                }
                Task::Holding { .. } => actions.push(Action::Release(c)),
                _ => {}
            }
        }
        for (p, locals) in state.locals.iter().enumerate() {
            for (n, local) in locals.iter().enumerate() {
                if local.message {
                    let p = u8::try_from(p).unwrap_or(u8::MAX);
                    let n = u8::try_from(n).unwrap_or(u8::MAX);
                    actions.push(Action::Deliver(p, n));
                    actions.push(Action::Lose(p, n));
                }
            }
        }
        if Self::has_deadline(state) {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Join(c, name) => {
                let Task::Idle { left } = state.tasks[usize::from(c)] else {
                    return None;
                };
                state.asking[usize::from(c)] = name;
                let (p, n) = self.slot(&state, c);
                state.locals[p][n].line.push(c);
                state.tasks[usize::from(c)] = Task::Waiting {
                    wake_at: state.now,
                    left: left - 1,
                };
            }
            Action::Step(c) => {
                let Task::Waiting { left, .. } = state.tasks[usize::from(c)] else {
                    return None;
                };
                self.step(&mut state, c, left);
            }
            Action::Release(c) => {
                let Task::Holding { token, left, .. } = state.tasks[usize::from(c)] else {
                    return None;
                };
                self.release(&mut state, c, token, left);
            }
            Action::Cancel(c) => {
                let (p, n) = self.slot(&state, c);
                state.tasks[usize::from(c)] = Task::Cancelled;
                Self::leave(&mut state, p, n, c);
            }
            Action::Deliver(p, n) => {
                let (p, n) = (usize::from(p), usize::from(n));
                state.locals[p][n].message = false;
                Self::head_wakes(&mut state, p, n);
            }
            Action::Lose(p, n) => state.locals[usize::from(p)][usize::from(n)].message = false,
            Action::Tick => state.now += 1,
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("mutual exclusion", |m: &Self, s: &State| {
                (0..m.names).all(|name| {
                    s.tasks
                        .iter()
                        .zip(&s.asking)
                        .filter(|(t, n)| {
                            **n == name
                                && matches!(t, Task::Holding { until, .. } if *until > s.now)
                        })
                        .count()
                        <= 1
                })
            }),
            Property::always("no lost wake-up", |m: &Self, s: &State| {
                !quiescent(m, s, |a| matches!(a, Action::Cancel(_)))
                    || s.tasks
                        .iter()
                        .all(|t| matches!(t, Task::Idle { left: 0 } | Task::Cancelled))
            }),
            Property::sometimes("a lease is handed over", |_, s: &State| {
                s.locals.iter().flatten().any(|l| l.handed.is_some())
            }),
            Property::sometimes("the hand-over bound reached", |m: &Self, s: &State| {
                s.locals
                    .iter()
                    .flatten()
                    .any(|l| l.handoffs >= m.max_handoffs && !l.line.is_empty())
            }),
            Property::sometimes("every round served", |_, s: &State| {
                s.tasks.iter().all(|t| matches!(t, Task::Idle { left: 0 }))
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{assert_holds, assert_rejected, run};

    const SAFETY: &[&str] = &["mutual exclusion", "no lost wake-up"];
    const EXAMPLES: &[&str] = &[
        "a lease is handed over",
        "the hand-over bound reached",
        "every round served",
    ];

    #[test]
    fn the_line_and_hand_over_keep_mutual_exclusion_and_wake_everyone() {
        let outcome = run("line/real", LineModel::three_clients(Variant::Real), None);
        assert_holds(&outcome, SAFETY, EXAMPLES);
    }

    #[test]
    fn two_names_keep_their_lines_apart() {
        let model = LineModel {
            names: 2,
            ..LineModel::three_clients(Variant::Real)
        };
        let outcome = run("line/real, 2 names", model, None);
        assert_holds(&outcome, SAFETY, EXAMPLES);
    }

    #[test]
    fn an_unchecked_hand_over_breaks_mutual_exclusion() {
        let model = LineModel::three_clients(Variant::HandOverUnchecked);
        let outcome = run("line/hand-over-unchecked", model, None);
        let path = assert_rejected(&outcome, "mutual exclusion");
        assert!(path.contains("Release"), "{path}");
    }

    #[test]
    fn sleeping_without_the_ttl_fallback_loses_a_wake_up() {
        let model = LineModel::three_clients(Variant::SleepWithoutDeadline);
        let outcome = run("line/sleep-without-deadline", model, None);
        // The shortest counterexample needs no lost message: a holder whose lease runs out
        // without a release announces nothing, and only the TTL fallback wakes the waiter.
        assert_rejected(&outcome, "no lost wake-up");
    }
}
