//! Model 4: the store grace period after a restart that lost the keys.
//!
//! A Redis restarted without persistence forgets every key; its holders do not know and keep
//! working until their lease's `valid_until`, by their own clocks. Each client's process sees the
//! restart on its next connection (a new `run_id`: `GraceState::record` in
//! `lock-redis/src/safety/grace.rs`) and from then on grants nothing there for the grace period
//! (`GraceState::verdict`: the attempt answers busy for the time left), which must be at least
//! the longest lease. Two names on the one server: the grace covers both. Processes that never
//! saw the old server (a first connection after the restart) are not modelled: without strict
//! mode they grant at once (the README of lock-redis says so).

use stateright::{Model, Property};

use crate::check::quiescent;
use crate::client::Client;

/// How long a lease lasts, in ticks.
pub const TTL: u8 = 2;

/// Which policy the model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The code's default: a grace as long as the longest lease.
    Real,
    /// `grace(Duration::ZERO)`: grants at once after the restart.
    Disabled,
    /// A grace shorter than the lease (a `fixed_ttl` longer than the configured grace).
    ShorterThanLease,
}

impl Variant {
    fn grace(self) -> u8 {
        match self {
            Self::Real => TTL,
            Self::Disabled => 0,
            Self::ShorterThanLease => TTL - 1,
        }
    }
}

/// The model.
#[derive(Clone, Debug)]
pub struct GraceModel {
    /// The policy.
    pub variant: Variant,
    /// `names[c]`: the name client `c` asks for (0 or 1).
    pub names: Vec<u8>,
    /// `rounds[c]`: how many times client `c` asks.
    pub rounds: Vec<u8>,
    /// How many times the store may restart.
    pub restarts: u8,
}

impl GraceModel {
    /// Two clients on name 0, one on name 1, one restart: the case the tests check.
    pub fn three_clients(variant: Variant) -> Self {
        Self {
            variant,
            names: vec![0, 0, 1],
            rounds: vec![1, 1, 1],
            restarts: 1,
        }
    }
}

/// One client's process's view of the server (`GraceState`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct View {
    /// The server's `run_id` it last saw (every process connected before the first tick).
    pub run: u8,
    /// The end of its grace episode (`State::until`); 0: none.
    pub until: u8,
}

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The tick.
    pub now: u8,
    /// The server's `run_id`: restarts so far.
    pub run: u8,
    /// Per name: the key, (client, expires).
    pub keys: [Option<(u8, u8)>; 2],
    /// Per client.
    pub clients: Vec<Client>,
    /// Per client.
    pub views: Vec<View>,
    /// Ghost: an attempt was refused for the grace period.
    pub refused: bool,
}

/// A step of the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The client starts asking.
    Join(u8),
    /// One attempt: learn the server's facts, the grace verdict, then `SET NX PX`.
    Attempt(u8),
    /// The holder releases (compare-and-delete); `announced`: the waiters of the name hear of it.
    Release {
        /// The client.
        client: u8,
        /// Whether the announcement is delivered.
        announced: bool,
    },
    /// The waiter gives up.
    Cancel(u8),
    /// The server restarts without persistence: every key is lost.
    Restart,
    /// Time passes.
    Tick,
}

impl GraceModel {
    fn attempt(&self, state: &mut State, c: u8, left: u8) {
        let now = state.now;
        let ci = usize::from(c);
        let view = &mut state.views[ci];
        // `GraceState::record`: a new run_id starts an episode of `grace` from now.
        if view.run != state.run {
            view.run = state.run;
            let grace = self.variant.grace();
            if grace > 0 {
                view.until = view.until.max(now + grace);
            }
        }
        // `GraceState::verdict`: busy for the time left.
        if view.until > now {
            state.refused = true;
            state.clients[ci] = Client::Waiting {
                wake_at: view.until,
                left,
            };
            return;
        }
        let name = usize::from(self.names[ci]);
        match state.keys[name] {
            Some((_, expires)) if expires > now => {
                state.clients[ci] = Client::Waiting {
                    wake_at: expires,
                    left,
                };
            }
            _ => {
                state.keys[name] = Some((c, now + TTL));
                state.clients[ci] = Client::Holding {
                    until: now + TTL,
                    left,
                };
            }
        }
    }

    fn has_deadline(state: &State) -> bool {
        let now = state.now;
        state.clients.iter().any(|c| c.deadline_after(now))
            || state.keys.iter().flatten().any(|(_, e)| *e > now)
            || state.views.iter().any(|v| v.until > now)
    }
}

impl Model for GraceModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            run: 0,
            keys: [None, None],
            clients: self
                .rounds
                .iter()
                .map(|r| Client::Idle { left: *r })
                .collect(),
            views: vec![View::default(); self.rounds.len()],
            refused: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, client) in state.clients.iter().enumerate() {
            let c = u8::try_from(c).unwrap_or(u8::MAX);
            match client {
                Client::Idle { left } if *left > 0 => actions.push(Action::Join(c)),
                Client::Waiting { wake_at, .. } => {
                    if *wake_at <= state.now {
                        actions.push(Action::Attempt(c));
                    }
                    actions.push(Action::Cancel(c));
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
        if state.run < self.restarts {
            actions.push(Action::Restart);
        }
        if Self::has_deadline(state) {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Join(c) => {
                let Client::Idle { left } = state.clients[usize::from(c)] else {
                    return None;
                };
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
                let ci = usize::from(client);
                let Client::Holding { left, .. } = state.clients[ci] else {
                    return None;
                };
                state.clients[ci] = Client::Idle { left };
                let name = self.names[ci];
                let key = &mut state.keys[usize::from(name)];
                // Only our own live key is deleted and announced (NotOwned after a restart).
                if key.is_some_and(|(h, e)| h == client && e > state.now) {
                    *key = None;
                    if announced {
                        let now = state.now;
                        for (other, n) in state.clients.iter_mut().zip(&self.names) {
                            if *n == name
                                && let Client::Waiting { wake_at, .. } = other
                            {
                                *wake_at = now;
                            }
                        }
                    }
                }
            }
            Action::Cancel(c) => state.clients[usize::from(c)] = Client::Gone,
            Action::Restart => {
                state.run += 1;
                state.keys = [None, None];
            }
            Action::Tick => state.now += 1,
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("mutual exclusion", |m: &Self, s: &State| {
                (0..2).all(|name| {
                    s.clients
                        .iter()
                        .zip(&m.names)
                        .filter(|(c, n)| **n == name && c.holds_valid(s.now))
                        .count()
                        <= 1
                })
            }),
            Property::always("no lost wake-up", |m: &Self, s: &State| {
                !quiescent(m, s, |a| matches!(a, Action::Cancel(_)))
                    || s.clients.iter().all(Client::finished)
            }),
            Property::sometimes("a grant refused for the grace", |_, s: &State| s.refused),
            Property::sometimes("every round served after a restart", |_, s: &State| {
                s.run > 0
                    && s.clients
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

    const SAFETY: &[&str] = &["mutual exclusion", "no lost wake-up"];
    const EXAMPLES: &[&str] = &[
        "a grant refused for the grace",
        "every round served after a restart",
    ];

    #[test]
    fn a_grace_as_long_as_the_lease_keeps_mutual_exclusion_across_a_restart() {
        let outcome = run("grace/real", GraceModel::three_clients(Variant::Real), None);
        assert_holds(&outcome, SAFETY, EXAMPLES);
    }

    #[test]
    fn without_grace_a_restart_grants_a_held_lock_again() {
        let model = GraceModel::three_clients(Variant::Disabled);
        let outcome = run("grace/disabled", model, None);
        let path = assert_rejected(&outcome, "mutual exclusion");
        assert!(path.contains("Restart"), "{path}");
    }

    #[test]
    fn a_grace_shorter_than_the_lease_grants_a_held_lock_again() {
        let model = GraceModel::three_clients(Variant::ShorterThanLease);
        let outcome = run("grace/shorter-than-lease", model, None);
        let path = assert_rejected(&outcome, "mutual exclusion");
        assert!(path.contains("Restart"), "{path}");
    }
}
