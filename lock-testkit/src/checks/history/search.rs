//! Linearizability of one object's history: Wing & Gong's search with Lowe's memoisation, the
//! algorithm of Knossos and porcupine, for a model that may be nondeterministic.
//!
//! The history's call and return events are put in time order in a doubly linked list. The
//! search walks it: at a call, it tries to linearize that operation now (the model must accept
//! it from the current state); at a return, the operation that returns must already be
//! linearized, so the search backtracks to the last choice and tries the next call instead.
//! The history is linearizable when every event is taken out of the list. Lowe's memoisation
//! keeps every (set of linearized operations, state) pair reached: a pair seen before was
//! already explored, so the search never explores it again. That bounds the work by the number
//! of distinct pairs, which is small when few operations are concurrent, and a step budget
//! bounds it whatever the history.
//!
//! A nondeterministic model (an operation whose outcome is unknown may or may not have taken
//! effect) is searched on sets of states, as porcupine does: the state after an operation is
//! every state some choice leads to.

use std::collections::HashSet;
use std::hash::Hash;

/// A sequential specification: the states an operation may lead to from a state.
pub trait Model {
    /// The object's state.
    type State: Clone + Ord + Hash;
    /// An operation, with the outcome it was recorded with.
    type Op;

    /// The state before any operation.
    fn init(&self) -> Self::State;

    /// Every state `op` (with its recorded outcome) may lead to from `state`; empty when the
    /// object could not have answered that from `state`.
    fn step(&self, state: &Self::State, op: &Self::Op) -> Vec<Self::State>;
}

/// An operation with the times it was called and returned, ns on one clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timed<Op> {
    /// The operation and its outcome.
    pub op: Op,
    /// When the client invoked it.
    pub call_ns: u64,
    /// When its answer arrived; `None` when none did (a timeout, a crash): it may take effect
    /// at any time after its call, or never.
    pub return_ns: Option<u64>,
}

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Search {
    /// Some order of the operations, within their call and return times, is one the model
    /// accepts.
    Linearizable {
        /// Search steps taken.
        steps: usize,
    },
    /// No order is.
    NotLinearizable {
        /// The most operations any attempt linearized.
        most_linearized: usize,
        /// The operation (its index in the input) whose return the deepest attempt could not
        /// pass: it could not be placed before its answer arrived.
        blocked: usize,
        /// Search steps taken.
        steps: usize,
    },
    /// The step budget ran out before an answer.
    Undecided {
        /// Search steps taken (the budget).
        steps: usize,
    },
}

impl Search {
    /// Whether the history was shown linearizable.
    pub fn is_linearizable(&self) -> bool {
        matches!(self, Search::Linearizable { .. })
    }
}

/// The end of the list.
const NIL: usize = usize::MAX;
/// The list's head: a sentinel node before every event.
const HEAD: usize = 0;

/// One call or return event; node `0` is the head.
#[derive(Debug, Clone, Copy)]
struct Event {
    op: usize,
    call: bool,
    /// The node of the same operation's other event.
    other: usize,
}

/// The events as a doubly linked list over a vector, so an operation's two events can be
/// taken out and put back in place.
struct Events {
    events: Vec<Event>,
    prev: Vec<usize>,
    next: Vec<usize>,
}

impl Events {
    /// The events of `ops` in time order; at equal times calls come first (the two operations
    /// are then concurrent, the lenient reading of a tie). An operation without a return
    /// returns after everything.
    fn new<Op>(ops: &[Timed<Op>]) -> Events {
        let mut order: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * ops.len());
        for (i, t) in ops.iter().enumerate() {
            order.push((t.call_ns, true, i));
            let ret = t.return_ns.map_or(u64::MAX, |r| r.max(t.call_ns));
            order.push((ret, false, i));
        }
        // (time, calls before returns, operation)
        order.sort_by_key(|&(at, call, op)| (at, !call, op));
        let mut events = vec![Event {
            op: NIL,
            call: false,
            other: NIL,
        }];
        let mut node_of = vec![(NIL, NIL); ops.len()];
        for &(_, call, op) in &order {
            let node = events.len();
            if call {
                node_of[op].0 = node;
            } else {
                node_of[op].1 = node;
            }
            events.push(Event {
                op,
                call,
                other: NIL,
            });
        }
        for event in events.iter_mut().skip(1) {
            let (call, ret) = node_of[event.op];
            event.other = if event.call { ret } else { call };
        }
        let n = events.len();
        let prev = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let next = (0..n)
            .map(|i| if i + 1 < n { i + 1 } else { NIL })
            .collect();
        Events { events, prev, next }
    }

    /// Takes the call `node` and its return out of the list.
    fn lift(&mut self, node: usize) {
        for n in [node, self.events[node].other] {
            let (p, x) = (self.prev[n], self.next[n]);
            self.next[p] = x;
            if x != NIL {
                self.prev[x] = p;
            }
        }
    }

    /// Puts the call `node` and its return back, in the reverse order of [`lift`](Self::lift).
    fn unlift(&mut self, node: usize) {
        for n in [self.events[node].other, node] {
            let (p, x) = (self.prev[n], self.next[n]);
            self.next[p] = n;
            if x != NIL {
                self.prev[x] = n;
            }
        }
    }
}

/// A set of operations, one bit each.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

/// Every state `op` leads to from any of `states`, sorted and without repeats.
fn step_all<M: Model>(model: &M, states: &[M::State], op: &M::Op) -> Vec<M::State> {
    let mut next: Vec<M::State> = states.iter().flat_map(|s| model.step(s, op)).collect();
    next.sort();
    next.dedup();
    next
}

/// Searches for a linearization of `ops` under `model`, taking at most `budget` steps (one
/// step per event visited).
pub fn linearize<M: Model>(model: &M, ops: &[Timed<M::Op>], budget: usize) -> Search {
    let mut list = Events::new(ops);
    let mut linearized = Bits::new(ops.len());
    let mut seen: HashSet<(Bits, Vec<M::State>)> = HashSet::new();
    let mut stack: Vec<(usize, Vec<M::State>)> = Vec::new();
    let mut state = vec![model.init()];
    let (mut most, mut blocked) = (0, 0);
    let mut entry = list.next[HEAD];
    for steps in 0..budget {
        if list.next[HEAD] == NIL {
            return Search::Linearizable { steps };
        }
        let event = list.events[entry];
        if event.call {
            let after = step_all(model, &state, &ops[event.op].op);
            if !after.is_empty() {
                linearized.set(event.op);
                if seen.insert((linearized.clone(), after.clone())) {
                    stack.push((entry, std::mem::replace(&mut state, after)));
                    list.lift(entry);
                    entry = list.next[HEAD];
                    continue;
                }
                linearized.clear(event.op);
            }
            entry = list.next[entry];
        } else {
            if stack.len() >= most {
                (most, blocked) = (stack.len(), event.op);
            }
            let Some((call, before)) = stack.pop() else {
                return Search::NotLinearizable {
                    most_linearized: most,
                    blocked,
                    steps,
                };
            };
            state = before;
            linearized.clear(list.events[call].op);
            list.unlift(call);
            entry = list.next[call];
        }
    }
    Search::Undecided { steps: budget }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read-write register of small integers, starting at 0.
    struct Register;

    #[derive(Debug, Clone, Copy)]
    enum RegOp {
        Write(u8),
        Read(u8),
    }

    impl Model for Register {
        type State = u8;
        type Op = RegOp;
        fn init(&self) -> u8 {
            0
        }
        fn step(&self, state: &u8, op: &RegOp) -> Vec<u8> {
            match *op {
                RegOp::Write(v) => vec![v],
                RegOp::Read(v) if v == *state => vec![v],
                RegOp::Read(_) => Vec::new(),
            }
        }
    }

    fn op(op: RegOp, call_ns: u64, return_ns: Option<u64>) -> Timed<RegOp> {
        Timed {
            op,
            call_ns,
            return_ns,
        }
    }

    #[test]
    fn a_sequential_history_is_checked_in_order() {
        let good = [
            op(RegOp::Write(1), 0, Some(10)),
            op(RegOp::Read(1), 20, Some(30)),
        ];
        assert!(linearize(&Register, &good, 1_000).is_linearizable());
        let stale = [
            op(RegOp::Write(1), 0, Some(10)),
            op(RegOp::Read(0), 20, Some(30)),
        ];
        assert!(matches!(
            linearize(&Register, &stale, 1_000),
            Search::NotLinearizable { blocked: 1, .. }
        ));
    }

    /// Two writes overlap; reads during and after them see the two values in one order only
    /// (1 then 2): linearizable, but only with the writes placed against their call order.
    #[test]
    fn concurrent_operations_may_take_effect_in_either_order() {
        let history = [
            op(RegOp::Write(2), 0, Some(100)),
            op(RegOp::Write(1), 10, Some(90)),
            op(RegOp::Read(1), 20, Some(30)),
            op(RegOp::Read(2), 110, Some(120)),
        ];
        assert!(linearize(&Register, &history, 1_000).is_linearizable());
    }

    /// The classic non-linearizable history: after a write of 1 returned, one read sees 1 and a
    /// later one sees the old 0 again.
    #[test]
    fn a_value_that_goes_back_is_not_linearizable() {
        let history = [
            op(RegOp::Write(1), 0, Some(50)),
            op(RegOp::Read(1), 10, Some(20)),
            op(RegOp::Read(0), 30, Some(40)),
        ];
        let found = linearize(&Register, &history, 1_000);
        assert!(
            matches!(found, Search::NotLinearizable { blocked: 2, .. }),
            "{found:?}"
        );
    }

    #[test]
    fn an_operation_without_an_answer_may_take_effect_late_or_never() {
        let late = [
            op(RegOp::Write(1), 0, None),
            op(RegOp::Read(0), 10, Some(20)),
            op(RegOp::Read(1), 30, Some(40)),
        ];
        assert!(linearize(&Register, &late, 1_000).is_linearizable());
        // It took effect at most once: 0, 1, then 0 again cannot be.
        let back = [
            op(RegOp::Write(1), 0, None),
            op(RegOp::Read(1), 10, Some(20)),
            op(RegOp::Read(0), 30, Some(40)),
        ];
        assert!(!linearize(&Register, &back, 1_000).is_linearizable());
    }

    /// Many concurrent writes and a read that no order explains: the memoisation keeps the
    /// search small, and a budget too small for it answers undecided, not a verdict.
    #[test]
    fn the_search_is_bounded() {
        let mut history: Vec<Timed<RegOp>> = (1..=12)
            .map(|v| op(RegOp::Write(v), 0, Some(1_000)))
            .collect();
        history.push(op(RegOp::Read(99), 2_000, Some(2_001)));
        let found = linearize(&Register, &history, 1_000_000);
        let Search::NotLinearizable { steps, .. } = found else {
            panic!("{found:?}");
        };
        // 2^12 sets of linearized writes, each with one state: memoised, not 12! orders.
        assert!(steps < 200_000, "{steps} steps");
        assert_eq!(
            linearize(&Register, &history, 100),
            Search::Undecided { steps: 100 }
        );
    }
}
