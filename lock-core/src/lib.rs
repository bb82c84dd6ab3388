#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod backend;
mod backoff;
mod coordination;
mod election;
mod error;
mod fence;
mod guard;
mod kind;
mod lease;
mod lease_text;
mod locker;
mod memory;
pub mod metric;
#[cfg(feature = "axum")]
mod response;
mod runtime;
mod shutdown;
mod token;
mod validate;

pub use backoff::Backoff;
pub use coordination::{
    Barrier, BarrierMember, BarrierState, Coordination, CoordinationRecord, DEFAULT_LATCH_KEEP,
    Latch, LatchParty, LatchState,
};
pub use election::{
    DEFAULT_OBSERVE_POLL, Election, ElectionRun, Leader, Leadership, TermEnd, TermEvent,
};
pub use error::{BoxError, LockError, Op, TimeoutPhase};
pub use fence::Fence;
pub use guard::{Guard, LeaseWatch};
pub use kind::{FAIR_ENTRY_TTL, Kind, MAX_PERMITS, fair_entry_ttl};
pub use lease::{Lease, valid_until};
pub use lease_text::ParseLeaseError;
pub use locker::{
    AdoptRequest, DEFAULT_LEASE, DEFAULT_RETRY_ERRORS_FOR, DEFAULT_WAIT, LockRequest, Locker,
    LockerBuilder, MAX_MULTI, MultiGuard, MultiRequest, VISIBLE_AFTER, default_stop_margin,
    waiter_record_of,
};
pub use memory::MemoryLock;
pub use shutdown::shutdown;
pub use token::{ParseTokenError, Token, TokenHex};
pub use validate::{
    MAX_NAME_LEN, MAX_NOTE_BYTES, MAX_TTL, MIN_TTL, check_name, check_note, check_ttl,
};
