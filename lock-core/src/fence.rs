//! What a holder hands to the store it writes to: the resource and the fencing token.

use std::fmt;

/// A fenced write's credentials: the resource the lock protects and the grant's fencing token.
///
/// The store the holder writes to keeps, per resource, the largest token it has accepted (the
/// *fence*). A write carrying `token` applies only if `token` is **greater than or equal to**
/// that record, and it raises the record in the same atomic step. An equal token is accepted,
/// since one holder writes many times under one grant; a smaller one is refused with
/// [`LockError::Fenced`](crate::LockError::Fenced) and nothing of the write applies. This is
/// the check of Kleppmann's "How to do distributed locking" (2016), which stops a holder that
/// was paused past its lease (GC, `SIGSTOP`, a stopped VM) from overwriting its successor's
/// writes.
///
/// A resource is fenced by **one** lock name: tokens of two names are not ordered against each
/// other. The resource is the lock's name by default ([`Guard::fence`](crate::Guard::fence));
/// [`Fence::for_resource`] names another.
///
/// The stores' fences: `distlock_fence(resource, token)` in PostgreSQL (lock-postgres) and, as
/// a procedure (`CALL`), in MySQL and MariaDB (lock-mysql), `FCALL distlock_fenced_set` /
/// `distlock_fenced_del` in Redis and Valkey (lock-redis), the object's fence metadata in an
/// object store (lock-object-store's `fenced_put`), and an etcd transaction that compares the
/// lock key's revision (lock-etcd).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fence {
    /// The fenced resource: by default the lock name.
    pub resource: String,
    /// The grant's fencing token ([`Lease::fencing_token`](crate::Lease::fencing_token)).
    pub token: u64,
}

impl Fence {
    /// A fence for `resource` with `token`.
    #[must_use]
    pub fn new(resource: impl Into<String>, token: u64) -> Self {
        Self {
            resource: resource.into(),
            token,
        }
    }

    /// The same token for another resource name (a table, a cache key) that this lock, and
    /// only this lock, protects.
    #[must_use]
    pub fn for_resource(self, resource: impl Into<String>) -> Self {
        Self {
            resource: resource.into(),
            token: self.token,
        }
    }

    /// Whether a write with this fence may apply over a record of `recorded`, the largest token
    /// the resource accepted so far (`None`: never fenced): equal is accepted, smaller is not.
    #[must_use]
    pub fn admits(&self, recorded: Option<u64>) -> bool {
        recorded.is_none_or(|recorded| self.token >= recorded)
    }
}

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} @ token {}", self.resource, self.token)
    }
}

#[cfg(test)]
mod tests {
    use super::Fence;

    #[test]
    fn equal_tokens_are_admitted_and_smaller_ones_refused() {
        let fence = Fence::new("acct", 7);
        assert!(fence.admits(None));
        assert!(fence.admits(Some(6)));
        assert!(fence.admits(Some(7)));
        assert!(!fence.admits(Some(8)));
    }

    #[test]
    fn for_resource_keeps_the_token() {
        let fence = Fence::new("lock", 3).for_resource("table:accounts");
        assert_eq!(fence, Fence::new("table:accounts", 3));
        assert_eq!(fence.to_string(), "table:accounts @ token 3");
    }
}
