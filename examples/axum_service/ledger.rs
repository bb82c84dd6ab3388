//! The resource the lock protects: settle counts per order, each write carrying the holder's
//! fencing token; a write with a token smaller than the largest one written is refused, an
//! equal one accepted (one holder writes many times): the fence's rule, as `lock_core::Fence`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::error::AppError;

/// Per order: how many times it was settled and the last fencing token written.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    orders: Mutex<HashMap<u64, (u64, u64)>>,
}

impl Ledger {
    pub(crate) fn settled(&self, id: u64) -> u64 {
        self.orders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .map_or(0, |&(count, _)| count)
    }

    /// Writes `count` for `id` if `fence` is at least every token written before.
    pub(crate) fn write(&self, id: u64, count: u64, fence: u64) -> Result<(), AppError> {
        let mut orders = self.orders.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = orders.entry(id).or_default();
        if fence < entry.1 {
            return Err(AppError::StaleFence {
                fence,
                last: entry.1,
            });
        }
        *entry = (count, fence);
        Ok(())
    }
}
