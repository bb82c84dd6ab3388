//! The conformance modules and their checks, as values: what the matrix in the README is
//! written from, from the same list [`conformance_tests!`](crate::conformance_tests) writes
//! the tests from.

use lock_core::backend::{Capabilities, Fencing};

/// One module of the conformance suite, and the kind it checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Module {
    /// [`mutex`](super::mutex): the exclusive lock, offered by every backend.
    Mutex,
    /// [`read_write`](super::read_write): the read-write lock.
    ReadWrite,
    /// [`semaphore`](super::semaphore): the counting semaphore.
    Semaphore,
    /// [`fair`](super::fair): the fair lock.
    Fair,
    /// [`multi`](super::multi): the multi-lock, offered by every backend.
    Multi,
    /// [`election`](super::election): leader election, offered by every backend whose fencing
    /// tokens can be terms (strict, or after holding).
    Election,
    /// [`inspect`](super::inspect): the operator reads every backend offers (list, inspect,
    /// release by token).
    Inspect,
    /// [`errors`](super::errors): the same mistake, the same typed error (a refused port, a
    /// silent one, a server of another kind).
    Errors,
    /// [`guarded`](super::guarded): the fence the backend's crate ships for its store (guarded
    /// writes taking a [`Fence`](lock_core::Fence)).
    Guarded,
    /// [`lock_delay`](super::lock_delay): a lease that ends by expiry keeps its name for the
    /// request's lock-delay, offered by every backend that keeps a lease for its whole TTL.
    LockDelay,
    /// [`revocation`](super::revocation): another process asks a revocable holder to give the
    /// lock up; offered by every backend that describes its holders and whose fencing tokens
    /// are ordered.
    Revocation,
    /// [`latch`](super::latch): the count-down latch whose parties hold leases, offered by
    /// every backend with semaphores.
    Latch,
    /// [`barrier`](super::barrier): the double barrier whose members hold leases, offered by
    /// every backend with semaphores.
    Barrier,
}

impl Module {
    /// Every module, in the order of the suite's list.
    pub const ALL: [Module; 13] = [
        Module::Mutex,
        Module::ReadWrite,
        Module::Semaphore,
        Module::Fair,
        Module::Multi,
        Module::Inspect,
        Module::Errors,
        Module::Guarded,
        Module::LockDelay,
        Module::Revocation,
        Module::Latch,
        Module::Barrier,
        Module::Election,
    ];

    /// The module's name in `lock_testkit::conformance` (`"read_write"`), which is also the
    /// name of the module of tests [`conformance_tests!`](crate::conformance_tests) writes.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Module::Mutex => "mutex",
            Module::ReadWrite => "read_write",
            Module::Semaphore => "semaphore",
            Module::Fair => "fair",
            Module::Multi => "multi",
            Module::Election => "election",
            Module::Inspect => "inspect",
            Module::Errors => "errors",
            Module::Guarded => "guarded",
            Module::LockDelay => "lock_delay",
            Module::Revocation => "revocation",
            Module::Latch => "latch",
            Module::Barrier => "barrier",
        }
    }

    /// Whether a backend with capabilities `caps` offers this module's kind.
    #[must_use]
    pub fn offered_by(self, caps: &Capabilities) -> bool {
        match self {
            Module::Mutex | Module::Multi | Module::Inspect | Module::Errors => true,
            Module::ReadWrite => caps.read_write,
            Module::Semaphore | Module::Latch | Module::Barrier => caps.semaphore,
            Module::Fair => caps.fair,
            Module::Election => matches!(caps.fencing, Fencing::Strict(_) | Fencing::AfterHolding),
            Module::Guarded => caps.guarded_writes,
            Module::LockDelay => caps.lock_delay,
            Module::Revocation => caps.offers_revocation(),
        }
    }
}

/// Writes [`Module::checks`] from the suite's list.
macro_rules! module_checks {
    (; $($module:ident $variant:ident [$($check:ident),+ $(,)?])+) => {
        impl Module {
            /// The names of this module's checks (its functions), in the order of the
            /// suite's list, all run by one test per backend's runner.
            #[must_use]
            pub fn checks(self) -> &'static [&'static str] {
                match self {
                    $(Module::$variant => &[$(stringify!($check)),+],)+
                }
            }
        }
    };
}

crate::__conformance_checks!(module_checks;);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_has_checks_and_its_name() {
        let total: usize = Module::ALL.iter().map(|m| m.checks().len()).sum();
        assert_eq!(total, 69);
        assert_eq!(Module::ReadWrite.name(), "read_write");
        assert!(Module::Multi.offered_by(&Capabilities::MUTEX));
        assert!(!Module::Fair.offered_by(&Capabilities::MUTEX));
    }
}
