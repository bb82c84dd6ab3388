//! Loss watches: how a backend tells a holder at once that its key is gone, rather than at the
//! next renewal.

use std::any::Any;
use std::fmt;

/// What a backend calls when it sees that a held lease's key was deleted or now holds another
/// token: the [`Locker`](crate::Locker) marks the lease lost, so
/// [`Guard::lost`](crate::Guard::lost) fires. It may be called more than once and after the
/// guard was released (both are ignored), and must not block: it only sets a flag and wakes
/// waiters.
pub type OnLoss = Box<dyn Fn() + Send + Sync>;

/// A backend's watch on the key of one held lease, from
/// [`Lock::watch_loss`](crate::backend::Lock::watch_loss). Dropping it ends the watch: the backend's
/// `keep` value is dropped with it, and the [`OnLoss`] it holds is never called again.
pub struct LossWatch {
    _keep: Box<dyn Any + Send + Sync>,
}

impl LossWatch {
    /// A watch that lasts as long as `keep` (the backend's registration).
    pub fn new(keep: impl Any + Send + Sync) -> Self {
        Self {
            _keep: Box::new(keep),
        }
    }
}

impl fmt::Debug for LossWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LossWatch").finish_non_exhaustive()
    }
}
