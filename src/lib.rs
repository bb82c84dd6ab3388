#![doc = include_str!("docs/crate.md")]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The repository README is no longer the crate's front page (that is `docs/crate.md`); its
// examples still compile as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// The guide (the README's longer sections) is doc-tested too.
#[cfg(doctest)]
#[doc = include_str!("../GUIDE.md")]
struct GuideDoctests;

// `#[distributed_lock]`'s reference (lock-macros' REFERENCE.md, the attribute's documentation)
// is doc-tested here, against the facade its examples name: as lock-macros' own doc tests it
// needed the facade as a dev-dependency, which cargo built a second time, with lock-core, for
// the host (a proc-macro crate's tests are host code).
#[cfg(doctest)]
#[doc = include_str!("../lock-macros/REFERENCE.md")]
struct MacroReferenceDoctests;

// The backend-neutral names: lock-core's user-facing types, limits and helpers (the facade's
// `exports` test checks that every name of lock-core's lib.rs is here).
pub use lock_core::{
    Backoff, BoxError, DEFAULT_LEASE, DEFAULT_RETRY_ERRORS_FOR, DEFAULT_WAIT, FAIR_ENTRY_TTL,
    Fence, Guard, Kind, Lease, LeaseWatch, LockError, LockRequest, Locker, LockerBuilder,
    MAX_MULTI, MAX_NAME_LEN, MAX_NOTE_BYTES, MAX_PERMITS, MAX_TTL, MIN_TTL, MemoryLock, MultiGuard,
    MultiRequest, Op, ParseTokenError, TimeoutPhase, Token, TokenHex, check_name, check_note,
    check_ttl, fair_entry_ttl, valid_until,
};
// Leader election, the stop margin and adopting a kept lease (lock-core).
pub use lock_core::{
    AdoptRequest, DEFAULT_OBSERVE_POLL, Election, ElectionRun, Leader, Leadership, ParseLeaseError,
    TermEnd, TermEvent, VISIBLE_AFTER, default_stop_margin, shutdown, waiter_record_of,
};
// Count-down latches and double barriers whose parties hold leases (lock-core).
pub use lock_core::{
    Barrier, BarrierMember, BarrierState, Coordination, CoordinationRecord, DEFAULT_LATCH_KEEP,
    Latch, LatchParty, LatchState,
};

// Every metric series, the `Locker`'s and the backends'.
pub mod metrics;

// What a backend implements and uses (the `Lock` trait, attempts, release signals): users of a
// lock need none of it, so it has a module of its own.
pub use lock_core::backend;

// One module per backend, as in sqlx: everything its crate exports, under the crate's own names
// (`distlock::redis::RedisLock`, `distlock::postgres::DEFAULT_POOL_SIZE`), and the client crates
// it is built on under theirs (`distlock::postgres::tokio_postgres`).
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub mod etcd;
#[cfg(feature = "mysql")]
#[cfg_attr(docsrs, doc(cfg(feature = "mysql")))]
pub mod mysql;
#[cfg(feature = "object-store")]
#[cfg_attr(docsrs, doc(cfg(feature = "object-store")))]
pub mod object_store;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;
#[cfg(feature = "redlock")]
#[cfg_attr(docsrs, doc(cfg(feature = "redlock")))]
pub mod redlock;

#[cfg(feature = "postgres")]
#[doc(hidden)]
pub use lock_postgres::{deadpool_postgres, tokio_postgres};
#[cfg(feature = "redis")]
#[doc(hidden)]
pub use lock_redis::deadpool_redis;

// `#[distributed_lock]` on async functions, the process-wide default locker it uses and the
// lease of the running locked function (feature `macros`, on by default).
#[cfg(feature = "macros")]
mod macros;
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use lock_macros::distributed_lock;
#[cfg(feature = "macros")]
#[doc(hidden)]
pub use macros::support as __private;
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use macros::{
    current_lease, current_leases, default_locker, set_default_locker, take_default_locker,
};
