//! The one list of the suite's runners: every [`conformance_tests!`](crate::conformance_tests)
//! call in the workspace, with the backend it runs over. The README's matrix writes one row per
//! entry, and every runner checks that it is listed (the `listed_in_the_matrix` test each call
//! writes), so a runner cannot run without a row.

/// One runner of the suite: a [`conformance_tests!`](crate::conformance_tests) call in a module
/// of a package's tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Runner {
    /// The package whose tests hold the call (`"lock-redis"`).
    pub package: &'static str,
    /// The module that holds the call (`"valkey_cluster"`): the first part of its tests'
    /// names (`valkey_cluster::mutex::fencing_increases`).
    pub module: &'static str,
    /// The backend it runs over, as the README's matrix names it.
    pub backend: &'static str,
}

/// Every runner of the suite, in the order of the README's matrix. A runner added to a
/// package's tests is added here, or its `listed_in_the_matrix` test fails.
pub const RUNNERS: &[Runner] = &[
    runner("lock-testkit", "memory", "`MemoryLock`"),
    runner("lock-redis", "redis", "`RedisLock`, one server"),
    runner("lock-redis", "valkey", "`RedisLock`, one Valkey 9.1 server"),
    runner("lock-redis", "cluster", "`RedisLock`, Redis Cluster"),
    runner(
        "lock-redis",
        "valkey_cluster",
        "`RedisLock`, Valkey 9.1 Cluster",
    ),
    runner("lock-redlock", "redis", "`Redlock` over 3 `RedisLock`s"),
    runner("lock-redlock", "memory", "`Redlock` over 3 `MemoryLock`s"),
    runner("lock-postgres", "table", "`PostgresLock`"),
    runner("lock-postgres", "advisory", "`PostgresAdvisoryLock`"),
    runner(
        "lock-postgres",
        "pgbouncer",
        "`PostgresLock` behind PgBouncer",
    ),
    runner("lock-etcd", "one_member", "`EtcdLock`, one etcd 3.5 member"),
    runner(
        "lock-object-store",
        "memory",
        "`ObjectStoreLock`, `object_store`'s in-memory store",
    ),
    runner(
        "lock-object-store",
        "seaweedfs",
        "`ObjectStoreLock`, SeaweedFS 4.48 (S3)",
    ),
    runner("lock-mysql", "table", "`MysqlLock`, MariaDB 10.11"),
    runner(
        "lock-mysql",
        "advisory",
        "`MysqlAdvisoryLock`, MariaDB 10.11",
    ),
];

const fn runner(package: &'static str, module: &'static str, backend: &'static str) -> Runner {
    Runner {
        package,
        module,
        backend,
    }
}

impl Runner {
    /// The runner of [`RUNNERS`] whose call is in `module_path` (the call's `module_path!()`,
    /// `"it::conformance::valkey_cluster"`: its last part is the runner's module) of `package`.
    #[must_use]
    pub fn find(package: &str, module_path: &str) -> Option<&'static Runner> {
        let module = module_path.rsplit("::").next().unwrap_or(module_path);
        RUNNERS
            .iter()
            .find(|r| r.package == package && r.module == module)
    }

    /// The runner's name in the matrix: its package and module (``lock-redis `valkey` ``).
    #[must_use]
    pub fn name(&self) -> String {
        format!("{} `{}`", self.package, self.module)
    }
}

/// What the `listed_in_the_matrix` test of a [`conformance_tests!`](crate::conformance_tests)
/// call runs: panics unless the call (in `module_path` of `package`) is in [`RUNNERS`].
#[doc(hidden)]
pub fn assert_listed(package: &str, module_path: &str) {
    assert!(
        Runner::find(package, module_path).is_some(),
        "the conformance runner {module_path} of {package} is not in \
         lock_testkit::conformance::RUNNERS, so the README's matrix has no row for it: add it \
         there, then rewrite the matrix with `DISTLOCK_BLESS=1 cargo test -p lock-testkit matrix`"
    );
}

#[cfg(test)]
mod tests {
    use super::{RUNNERS, Runner};

    #[test]
    fn a_runner_is_found_by_its_package_and_module() {
        let found = Runner::find("lock-redis", "it::conformance::valkey_cluster");
        assert_eq!(found.map(|r| r.module), Some("valkey_cluster"));
        assert!(Runner::find("lock-etcd", "it::conformance::valkey_cluster").is_none());
        assert_eq!(RUNNERS[0].name(), "lock-testkit `memory`");
    }

    #[test]
    fn every_runner_is_listed_once() {
        for (i, runner) in RUNNERS.iter().enumerate() {
            assert!(
                !RUNNERS[..i]
                    .iter()
                    .any(|r| (r.package, r.module) == (runner.package, runner.module)),
                "{} listed twice",
                runner.name()
            );
        }
    }
}
