//! What a backend implements and uses: the [`Lock`] trait, the answers its operations give,
//! and the release signals it feeds.
//!
//! Users of a lock need none of this: they hold a [`Locker`](crate::Locker) over a backend and
//! its guards. A crate that adds a store (as lock-redis, lock-redlock and lock-postgres do)
//! implements [`Lock`] with these types and inherits the `Locker`'s policy: waiting, wake-ups,
//! renewal, metrics, tracing, the macro.

mod capabilities;
mod detached;
mod holder;
mod lock;
mod signal;

pub use capabilities::{Capabilities, Fencing, MultiLock, TokenScale};
pub use detached::{Detach, Detached, Work};
pub use holder::Holder;
pub use lock::{Attempt, Handover, Lock, MultiAttempt, acquire_in_order};
pub use signal::{ReleaseSignal, ReleaseWatch};
