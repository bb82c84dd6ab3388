#![doc = include_str!("docs/metrics.md")]

// The `Locker`'s series and the helpers around them (lock-core's `metric` module).
pub use lock_core::metric::*;

/// The Redis backend's own series (feature `redis`): lock-redis's `metric` module.
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis {
    pub use lock_redis::metric::*;
}

/// Redlock's own series (feature `redlock`): lock-redlock's `metric` module.
#[cfg(feature = "redlock")]
#[cfg_attr(docsrs, doc(cfg(feature = "redlock")))]
pub mod redlock {
    pub use lock_redlock::metric::*;
}
