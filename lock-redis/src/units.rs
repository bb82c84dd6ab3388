//! Unit conversions the commands need: a leaf, so that any module may use them without an
//! import running back up (the grace watch and the executor both send milliseconds).

use std::time::Duration;

/// `d` in whole milliseconds, saturating.
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
