//! Model 3: the fair lock's queue: a waiter that finds the lock busy takes a place in the
//! queue (an entry with its own TTL, renewed by each attempt), and the lock is granted only to
//! the head of the queue; an entry whose waiter died lapses.
//!
//! The store's step is `try_acquire` of `lock-core/src/memory/kinds/fair.rs` (the rule of
//! `lock-redis/lua/fair_acquire.lua`, reached from `lock-redis/src/kinds/fair.rs`): lapsed entries
//! dropped first; granted when the lock is free and the asker is the head (or nobody queues);
//! otherwise its entry is added or renewed. A release tells the new head alone, on its turn
//! channel (`fair_release.lua`); that message may be lost. The waiter retries within half its
//! entry's TTL (`Waiter::retry_within` in `lock-core/src/locker/line.rs`), so its entry never
//! lapses while it lives. A request that ends without the lock withdraws its entry
//! (`Line::wait`), unless its process died.

use stateright::{Model, Property};

use crate::check::quiescent;
use crate::client::Client;

/// How long a lease lasts, in ticks.
pub const TTL: u8 = 2;

/// How long a queue entry lasts (`fair_entry_ttl(TTL)`), in ticks.
pub const ENTRY_TTL: u8 = 2;

/// An entry that never lapses.
const NEVER: u8 = u8::MAX;

/// Which policy the model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// What the code does.
    Real,
    /// The free lock goes to whoever asks, the queue's head skipped: breaks "grants in queue
    /// order".
    HeadSkipped,
    /// Entries never lapse: a waiter that dies at the head blocks the queue for ever.
    EntryWithoutTtl,
}

/// The model.
#[derive(Clone, Debug)]
pub struct FairModel {
    /// The policy.
    pub variant: Variant,
    /// `rounds[c]`: how many times client `c` asks.
    pub rounds: Vec<u8>,
    /// How many names; each round, a client asks for any one of them.
    pub names: u8,
    /// Whether waiters retry on time: no tick while a live waiter's retry is due. `false` lets
    /// the scheduler delay any retry (a paused process) past its entry's lapse.
    pub timely: bool,
    /// No tick past this one: the bound that makes a run finite when waiters poll for ever
    /// behind an entry that never lapses; far above what the real policy needs.
    pub horizon: u8,
}

impl FairModel {
    /// Three clients, the first asking twice: the case the tests check.
    pub fn three_clients(variant: Variant) -> Self {
        Self {
            variant,
            rounds: vec![2, 1, 1],
            names: 1,
            timely: true,
            horizon: 12,
        }
    }
}

/// The store's state of the name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Store {
    /// The lock: (client, expires).
    pub holder: Option<(u8, u8)>,
    /// The queue in arrival order: (client, lapses).
    pub queue: Vec<(u8, u8)>,
}

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The tick.
    pub now: u8,
    /// The store, per name.
    pub stores: Vec<Store>,
    /// Per client: the name it asks for or holds (this round's).
    pub asking: Vec<u8>,
    /// Per client.
    pub clients: Vec<Client>,
    /// Ghost: the lock was granted to a client while another client's live entry was ahead.
    pub out_of_order: bool,
}

/// A step of the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The client starts asking for a name (`locker.fair(name).wait()`).
    Join(u8, u8),
    /// One attempt at the store.
    Attempt(u8),
    /// The holder releases; `announced`: the new head hears of it on its turn channel.
    Release {
        /// The client.
        client: u8,
        /// Whether the turn message is delivered.
        announced: bool,
    },
    /// The waiter gives up; `withdraw`: its entry is removed (and the new head told), or not
    /// (its process died: the entry lapses).
    Cancel {
        /// The client.
        client: u8,
        /// Whether its entry is withdrawn.
        withdraw: bool,
    },
    /// Time passes.
    Tick,
}

impl FairModel {
    /// The live head's waiter wakes (its turn message).
    fn tell_head(state: &mut State, n: u8) {
        let now = state.now;
        let head = state.stores[usize::from(n)]
            .queue
            .iter()
            .find(|(_, l)| *l > now)
            .map(|(c, _)| *c);
        if let Some(head) = head
            && let Client::Waiting { wake_at, .. } = &mut state.clients[usize::from(head)]
        {
            *wake_at = now;
        }
    }

    /// `try_acquire` in `lock-core/src/memory/kinds/fair.rs`.
    fn attempt(&self, state: &mut State, c: u8, left: u8) {
        let now = state.now;
        let store = &mut state.stores[usize::from(state.asking[usize::from(c)])];
        let holder = store.holder.filter(|(_, e)| *e > now);
        store.queue.retain(|(_, lapses)| *lapses > now);
        let place = store.queue.iter().position(|(w, _)| *w == c);
        let first = match self.variant {
            Variant::HeadSkipped => true,
            _ => place.map_or(store.queue.is_empty(), |p| p == 0),
        };
        if first && holder.is_none() {
            state.out_of_order |= store
                .queue
                .iter()
                .take_while(|(w, _)| *w != c)
                .next()
                .is_some();
            store.queue.retain(|(w, _)| *w != c);
            store.holder = Some((c, now + TTL));
            state.clients[usize::from(c)] = Client::Holding {
                until: now + TTL,
                left,
            };
            return;
        }
        let busy_until = holder
            .map(|(_, e)| e)
            .or_else(|| store.queue.first().map(|(_, l)| *l))
            .unwrap_or(now);
        let lapses = if self.variant == Variant::EntryWithoutTtl {
            NEVER
        } else {
            now + ENTRY_TTL
        };
        match place {
            Some(p) => store.queue[p].1 = lapses,
            None => store.queue.push((c, lapses)),
        }
        // `retry_within`: at most half the entry's TTL.
        let wake_at = busy_until.min(now + ENTRY_TTL / 2).max(now + 1);
        state.clients[usize::from(c)] = Client::Waiting { wake_at, left };
    }

    fn has_deadline(state: &State) -> bool {
        let now = state.now;
        let later = |t: u8| t > now && t != NEVER;
        state.clients.iter().any(|c| c.deadline_after(now))
            || state.stores.iter().any(|store| {
                store.holder.is_some_and(|(_, e)| later(e))
                    || store.queue.iter().any(|(_, l)| later(*l))
            })
    }
}

impl Model for FairModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            stores: vec![Store::default(); usize::from(self.names)],
            asking: vec![0; self.rounds.len()],
            clients: self
                .rounds
                .iter()
                .map(|r| Client::Idle { left: *r })
                .collect(),
            out_of_order: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, client) in state.clients.iter().enumerate() {
            let c = u8::try_from(c).unwrap_or(u8::MAX);
            match client {
                Client::Idle { left } if *left > 0 => {
                    actions.extend((0..self.names).map(|name| Action::Join(c, name)));
                }
                Client::Waiting { wake_at, .. } => {
                    if *wake_at <= state.now {
                        actions.push(Action::Attempt(c));
                    }
                    for withdraw in [true, false] {
                        actions.push(Action::Cancel {
                            client: c,
                            withdraw,
                        });
                    }
                }
                Client::Holding { .. } => {
                    for announced in [true, false] {
                        actions.push(Action::Release {
                            client: c,
                            announced,
                        });
                    }
                }
                _ => {}
            }
        }
        // Timely waiters (the fairness the model assumes): time does not pass while a live
        // waiter's retry is due, so its entry, renewed within half its TTL, never lapses under
        // it. Without this, a waiter paused past half the entry TTL at every retry loses its
        // place each time, and two such waiters can leave each other unserved (see the README).
        let due = state
            .clients
            .iter()
            .any(|c| matches!(c, Client::Waiting { wake_at, .. } if *wake_at <= state.now));
        if !(self.timely && due) && state.now < self.horizon && Self::has_deadline(state) {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Join(c, name) => {
                let Client::Idle { left } = state.clients[usize::from(c)] else {
                    return None;
                };
                state.asking[usize::from(c)] = name;
                state.clients[usize::from(c)] = Client::Waiting {
                    wake_at: state.now,
                    left: left - 1,
                };
            }
            Action::Attempt(c) => {
                let Client::Waiting { left, .. } = state.clients[usize::from(c)] else {
                    return None;
                };
                self.attempt(&mut state, c, left);
            }
            Action::Release { client, announced } => {
                let Client::Holding { left, .. } = state.clients[usize::from(client)] else {
                    return None;
                };
                state.clients[usize::from(client)] = Client::Idle { left };
                let n = state.asking[usize::from(client)];
                let store = &mut state.stores[usize::from(n)];
                if store
                    .holder
                    .is_some_and(|(h, e)| h == client && e > state.now)
                {
                    store.holder = None;
                    if announced {
                        Self::tell_head(&mut state, n);
                    }
                }
            }
            Action::Cancel { client, withdraw } => {
                state.clients[usize::from(client)] = Client::Gone;
                let n = state.asking[usize::from(client)];
                let store = &mut state.stores[usize::from(n)];
                if withdraw && store.queue.iter().any(|(w, _)| *w == client) {
                    store.queue.retain(|(w, _)| *w != client);
                    Self::tell_head(&mut state, n);
                }
            }
            Action::Tick => state.now += 1,
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("mutual exclusion", |m: &Self, s: &State| {
                (0..m.names).all(|name| {
                    (0..s.clients.len())
                        .filter(|c| s.asking[*c] == name && s.clients[*c].holds_valid(s.now))
                        .count()
                        <= 1
                })
            }),
            Property::always("grants in queue order", |_, s: &State| !s.out_of_order),
            Property::always("no lost wake-up", |m: &Self, s: &State| {
                !quiescent(m, s, |a| matches!(a, Action::Cancel { .. }))
                    || s.clients.iter().all(Client::finished)
            }),
            Property::sometimes("a dead waiter's entry lapses", |_, s: &State| {
                s.clients.contains(&Client::Gone)
                    && s.stores
                        .iter()
                        .flat_map(|store| &store.queue)
                        .any(|(w, l)| *l <= s.now && s.clients[usize::from(*w)] == Client::Gone)
            }),
            Property::sometimes("every round served", |_, s: &State| {
                s.clients
                    .iter()
                    .all(|c| matches!(c, Client::Idle { left: 0 }))
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{assert_holds, assert_rejected, run};

    const SAFETY: &[&str] = &[
        "mutual exclusion",
        "grants in queue order",
        "no lost wake-up",
    ];
    const EXAMPLES: &[&str] = &["a dead waiter's entry lapses", "every round served"];

    #[test]
    fn the_fair_queue_grants_in_order_and_serves_everyone() {
        let outcome = run("fair/real", FairModel::three_clients(Variant::Real), None);
        assert_holds(&outcome, SAFETY, EXAMPLES);
    }

    #[test]
    fn the_fair_queues_of_two_names() {
        let model = FairModel {
            names: 2,
            ..FairModel::three_clients(Variant::Real)
        };
        let outcome = run("fair/real, 2 names", model, None);
        assert_holds(&outcome, SAFETY, EXAMPLES);
    }

    #[test]
    fn waiters_paused_past_half_their_entry_ttl_can_keep_each_other_out() {
        // Not a known-bad variant but the limit of the real policy: the fair queue's liveness
        // assumes that a live waiter retries within half its entry's TTL. A scheduler that
        // delays every retry until the entry lapsed has two waiters re-queue behind each other
        // until the horizon.
        let model = FairModel {
            timely: false,
            ..FairModel::three_clients(Variant::Real)
        };
        let outcome = run("fair/real, untimely waiters", model, None);
        assert!(outcome.discovery("mutual exclusion").is_none(), "{outcome}");
        assert!(
            outcome.discovery("grants in queue order").is_none(),
            "{outcome}"
        );
        assert_rejected(&outcome, "no lost wake-up");
    }

    #[test]
    fn skipping_the_head_grants_out_of_order() {
        let model = FairModel::three_clients(Variant::HeadSkipped);
        let outcome = run("fair/head-skipped", model, None);
        assert_rejected(&outcome, "grants in queue order");
    }

    #[test]
    fn an_entry_without_ttl_blocks_the_queue_after_its_waiter_dies() {
        let model = FairModel::three_clients(Variant::EntryWithoutTtl);
        let outcome = run("fair/entry-without-ttl", model, None);
        let path = assert_rejected(&outcome, "no lost wake-up");
        assert!(path.contains("withdraw: false"), "{path}");
    }
}
