//! What a backend implements and uses: the [`Lock`] trait, the answers its operations give,
//! and the release signals it feeds.
//!
//! Users of a lock need none of this: they hold a [`Locker`](crate::Locker) over a backend and
//! its guards. A crate that adds a store (as lock-redis, lock-redlock and lock-postgres do)
//! implements [`Lock`] with these types and inherits the `Locker`'s policy: waiting, wake-ups,
//! renewal, metrics, tracing, the macro.
//!
//! Besides the contract, the pieces every backend would otherwise write again:
//! - [`Detached`]: work driven by its caller and finished in the background if dropped;
//! - [`PerRuntime`]: one connection or task per tokio runtime, dropped with the runtime;
//! - [`SignalTable`]: the release signals of the names this process watches, with their
//!   watcher counts.

mod capabilities;
mod detached;
mod exports;
mod forward;
mod holder;
mod inspect;
mod lock;
mod loss;
mod pattern;
mod per_runtime;
mod signal;
mod signal_table;

pub use capabilities::{Capabilities, Fencing, MultiLock, TokenScale};
pub use detached::{Detach, Detached, Work};
pub use holder::Holder;
pub use inspect::{
    HeldKind, HeldLock, HolderView, Inspect, ListOptions, Listing, MAX_HOLDERS_SHOWN, MemberAnswer,
    QuorumView, ReleaseFeed,
};
pub use lock::{Attempt, Handover, Lock, MultiAttempt, acquire_in_order};
pub use loss::{LossWatch, OnLoss};
pub use pattern::NamePattern;
pub use per_runtime::PerRuntime;
pub use signal::{ReleaseSignal, ReleaseWatch};
pub use signal_table::{SignalTable, SignalWatcher};
