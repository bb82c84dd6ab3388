//! Model 2: the read-write lock with writer preference: a writer that finds the lock busy
//! leaves a *waiting record* (with the writer's TTL, renewed by each of its attempts), and new
//! readers are refused while a live record exists.
//!
//! The store's step is `try_acquire` of `lock-core/src/memory/kinds/read_write.rs` (the same
//! rule as `lock-redis/lua/read_acquire.lua` and `write_acquire.lua`, reached from
//! `lock-redis/src/kinds/read_write.rs`): expired entries pruned first; a writer is refused while a writer or any reader holds, a reader
//! while a writer holds or (writer preference) a writer's record is live. The waiter's pace is
//! `Waiter::retry_within` and `Pace::before_next` (`lock-core/src/locker/line.rs`, `pace.rs`): a
//! writer retries within half its record's TTL (so the record never lapses while it waits), a
//! reader sleeps until the blocking entry's expiry unless a release announcement wakes it. A
//! request that ends without the lock withdraws its record (`Line::wait`), unless its process
//! died: then the record lapses.

use stateright::{Model, Property};

use crate::check::quiescent;
use crate::client::Client;

/// How long a lease (and a writer's waiting record) lasts, in ticks.
pub const TTL: u8 = 2;

/// A record that never lapses.
const NEVER: u8 = u8::MAX;

/// Which policy the model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// What the code does.
    Real,
    /// Readers are admitted despite a live waiting record (no writer preference in the read
    /// path): breaks "a waiting writer blocks new readers".
    ReadersIgnoreWaitingWriter,
    /// The waiting record has no TTL: a writer that dies while waiting keeps readers out for
    /// ever (a lost wake-up).
    RecordWithoutTtl,
}

/// A reader or a writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// `locker.read(name)`.
    Reader,
    /// `locker.write(name)` with writer preference.
    Writer,
}

/// The model: each client's role and rounds.
#[derive(Clone, Debug)]
pub struct RwModel {
    /// The policy.
    pub variant: Variant,
    /// `roles[c]`.
    pub roles: Vec<Role>,
    /// `rounds[c]`: how many times client `c` asks.
    pub rounds: Vec<u8>,
    /// How many names; each round, a client asks for any one of them.
    pub names: u8,
    /// No tick past this one (a bound on the run, far above what the real policy needs).
    pub horizon: u8,
}

impl RwModel {
    /// A reader that asks twice, a writer, a second reader: the 3-client case the tests check.
    pub fn three_clients(variant: Variant) -> Self {
        Self {
            variant,
            roles: vec![Role::Reader, Role::Writer, Role::Reader],
            rounds: vec![2, 1, 1],
            names: 1,
            horizon: 12,
        }
    }
}

/// The store's state of the name: the holders and the waiting records, each `(client,
/// expires)`, kept sorted by client.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Store {
    /// The write lock.
    pub writer: Option<(u8, u8)>,
    /// The readers' shares.
    pub readers: Vec<(u8, u8)>,
    /// The waiting writers' records.
    pub waiting: Vec<(u8, u8)>,
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
    /// Ghost: a reader was granted while another writer's record was live.
    pub reader_overtook: bool,
}

/// A step of the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The client starts asking for a name (`locker.read/write(name).wait()`).
    Join(u8, u8),
    /// One attempt at the store (`Lock::try_acquire_kind`).
    Attempt(u8),
    /// The holder releases; `announced`: the release announcement reaches every waiter (or is
    /// lost for all: they wake at their own deadlines).
    Release {
        /// The client.
        client: u8,
        /// Whether the announcement is delivered.
        announced: bool,
    },
    /// The waiter gives up; `withdraw`: its record is removed (`Line::wait`) and the removal
    /// announced, or not (its process died: the record lapses).
    Cancel {
        /// The client.
        client: u8,
        /// Whether its record is withdrawn.
        withdraw: bool,
    },
    /// Time passes.
    Tick,
}

fn remove(entries: &mut Vec<(u8, u8)>, client: u8) {
    entries.retain(|(c, _)| *c != client);
}

fn upsert(entries: &mut Vec<(u8, u8)>, client: u8, expires: u8) {
    remove(entries, client);
    entries.push((client, expires));
    entries.sort_unstable();
}

impl RwModel {
    /// The release announcement of name `n` wakes its waiters.
    fn wake_all(state: &mut State, n: u8) {
        let now = state.now;
        for (client, asking) in state.clients.iter_mut().zip(&state.asking) {
            if *asking == n
                && let Client::Waiting { wake_at, .. } = client
            {
                *wake_at = now;
            }
        }
    }

    /// `try_acquire` in `lock-core/src/memory/kinds/read_write.rs`.
    fn attempt(&self, state: &mut State, c: u8, left: u8) {
        let now = state.now;
        let store = &mut state.stores[usize::from(state.asking[usize::from(c)])];
        // `rw.prune(now)`.
        store.writer = store.writer.filter(|(_, e)| *e > now);
        store.readers.retain(|(_, e)| *e > now);
        store.waiting.retain(|(_, e)| *e > now);
        let role = self.roles[usize::from(c)];
        let prefer = self.variant != Variant::ReadersIgnoreWaitingWriter;
        let busy_until = match (store.writer, role) {
            (Some((_, expires)), _) => Some(expires),
            (None, Role::Reader) if prefer => store.waiting.iter().map(|(_, e)| *e).max(),
            (None, Role::Reader) => None,
            (None, Role::Writer) => store.readers.iter().map(|(_, e)| *e).max(),
        };
        let client = &mut state.clients[usize::from(c)];
        match (busy_until, role) {
            (Some(until), Role::Writer) => {
                let lasts = if self.variant == Variant::RecordWithoutTtl {
                    NEVER
                } else {
                    now + TTL
                };
                upsert(&mut store.waiting, c, lasts);
                // `retry_within`: at most half the record's TTL.
                let wake_at = until.min(now + TTL / 2);
                *client = Client::Waiting { wake_at, left };
            }
            // `before_next`, announced: the blocking entry's expiry, or the message first.
            (Some(until), Role::Reader) => {
                *client = Client::Waiting {
                    wake_at: until,
                    left,
                }
            }
            (None, Role::Reader) => {
                let live_record = store.waiting.iter().any(|(w, e)| *e > now && *w != c);
                state.reader_overtook |= live_record;
                upsert(&mut store.readers, c, now + TTL);
                *client = Client::Holding {
                    until: now + TTL,
                    left,
                };
            }
            (None, Role::Writer) => {
                remove(&mut store.waiting, c);
                store.writer = Some((c, now + TTL));
                *client = Client::Holding {
                    until: now + TTL,
                    left,
                };
            }
        }
    }

    fn has_deadline(state: &State) -> bool {
        let now = state.now;
        let later = |(_, e): &(u8, u8)| *e > now && *e != NEVER;
        state.clients.iter().any(|c| c.deadline_after(now))
            || state.stores.iter().any(|store| {
                store.writer.iter().any(later)
                    || store.readers.iter().any(later)
                    || store.waiting.iter().any(later)
            })
    }
}

impl Model for RwModel {
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
            reader_overtook: false,
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
        if state.now < self.horizon && Self::has_deadline(state) {
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
                if store.writer.is_some_and(|(w, _)| w == client) {
                    store.writer = None;
                }
                remove(&mut store.readers, client);
                if announced {
                    Self::wake_all(&mut state, n);
                }
            }
            Action::Cancel { client, withdraw } => {
                state.clients[usize::from(client)] = Client::Gone;
                let n = state.asking[usize::from(client)];
                let store = &mut state.stores[usize::from(n)];
                if withdraw && store.waiting.iter().any(|(w, _)| *w == client) {
                    remove(&mut store.waiting, client);
                    Self::wake_all(&mut state, n);
                }
            }
            Action::Tick => state.now += 1,
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("no reader with a writer", |m: &Self, s: &State| {
                (0..m.names).all(|name| {
                    let holding = |role| {
                        (0..s.clients.len())
                            .filter(|c| {
                                s.asking[*c] == name
                                    && m.roles[*c] == role
                                    && s.clients[*c].holds_valid(s.now)
                            })
                            .count()
                    };
                    let writers = holding(Role::Writer);
                    writers == 0 || (writers == 1 && holding(Role::Reader) == 0)
                })
            }),
            Property::always("a waiting writer blocks new readers", |_, s: &State| {
                !s.reader_overtook
            }),
            Property::always("no lost wake-up", |m: &Self, s: &State| {
                !quiescent(m, s, |a| matches!(a, Action::Cancel { .. }))
                    || s.clients.iter().all(Client::finished)
            }),
            Property::sometimes(
                "a reader waits behind a waiting writer",
                |m: &Self, s: &State| {
                    (0..s.clients.len()).any(|c| {
                        let store = &s.stores[usize::from(s.asking[c])];
                        m.roles[c] == Role::Reader
                            && matches!(s.clients[c], Client::Waiting { .. })
                            && store.writer.is_none()
                            && store.waiting.iter().any(|(_, e)| *e > s.now)
                    })
                },
            ),
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
        "no reader with a writer",
        "a waiting writer blocks new readers",
        "no lost wake-up",
    ];
    const EXAMPLES: &[&str] = &[
        "a reader waits behind a waiting writer",
        "every round served",
    ];

    #[test]
    fn writer_preference_excludes_and_serves_everyone() {
        let outcome = run(
            "read-write/real",
            RwModel::three_clients(Variant::Real),
            None,
        );
        assert_holds(&outcome, SAFETY, EXAMPLES);
    }

    #[test]
    fn writer_preference_over_two_names() {
        let model = RwModel {
            names: 2,
            ..RwModel::three_clients(Variant::Real)
        };
        let outcome = run("read-write/real, 2 names", model, None);
        assert_holds(&outcome, SAFETY, EXAMPLES);
    }

    #[test]
    fn readers_that_ignore_the_waiting_record_overtake_the_writer() {
        let model = RwModel::three_clients(Variant::ReadersIgnoreWaitingWriter);
        let outcome = run("read-write/readers-ignore-record", model, None);
        assert_rejected(&outcome, "a waiting writer blocks new readers");
    }

    #[test]
    fn a_record_without_ttl_locks_readers_out_after_its_writer_dies() {
        let model = RwModel::three_clients(Variant::RecordWithoutTtl);
        let outcome = run("read-write/record-without-ttl", model, None);
        assert_rejected(&outcome, "no lost wake-up");
    }
}
