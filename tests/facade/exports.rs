//! Every public name of a backend crate is in its facade module, and every public name of
//! lock-core at the facade's root.

use crate::source::{public_names, read, strip_comments};

/// The backend modules: (facade module, its crate's directory, its crate's name in Rust).
const BACKENDS: &[(&str, &str, &str)] = &[
    ("redis", "lock-redis", "lock_redis"),
    ("postgres", "lock-postgres", "lock_postgres"),
    ("etcd", "lock-etcd", "lock_etcd"),
    ("object_store", "lock-object-store", "lock_object_store"),
    ("mysql", "lock-mysql", "lock_mysql"),
    ("redlock", "lock-redlock", "lock_redlock"),
];

/// The names every backend module has, so that switching a backend changes no name but the
/// lock's: (facade module, the names).
const COMMON: &[(&str, &[&str])] = &[
    (
        "redis",
        &[
            "BACKEND",
            "DEFAULT_CONNECT_TIMEOUT",
            "DEFAULT_OPERATION_TIMEOUT",
            "MAX_NOTE_BYTES",
            "LockError",
            "metric",
        ],
    ),
    (
        "postgres",
        &[
            "BACKEND",
            "DEFAULT_CONNECT_TIMEOUT",
            "DEFAULT_OPERATION_TIMEOUT",
            "MAX_NOTE_BYTES",
            "LockError",
            "metric",
        ],
    ),
    (
        "etcd",
        &[
            "BACKEND",
            "DEFAULT_CONNECT_TIMEOUT",
            "DEFAULT_OPERATION_TIMEOUT",
            "MAX_NOTE_BYTES",
            "LockError",
            "metric",
        ],
    ),
    (
        "mysql",
        &[
            "BACKEND",
            "DEFAULT_CONNECT_TIMEOUT",
            "DEFAULT_OPERATION_TIMEOUT",
            "MAX_NOTE_BYTES",
            "LockError",
            "metric",
        ],
    ),
    // No connect phase of its own: the request bound covers the client's connection.
    (
        "object_store",
        &[
            "BACKEND",
            "DEFAULT_OPERATION_TIMEOUT",
            "MAX_NOTE_BYTES",
            "LockError",
            "metric",
        ],
    ),
    // Its nodes' timeouts are derived from each lease (`default_node_timeout`).
    ("redlock", &["BACKEND", "MAX_NOTE_BYTES", "LockError"]),
];

/// Every backend module has the common names ([`COMMON`]), and every backend crate's
/// `BACKEND` is what its lock's `Lock::backend` answers (checked by the crates' own tests).
#[test]
fn every_backend_module_has_the_common_names() {
    assert_eq!(
        COMMON.len(),
        BACKENDS.len(),
        "a backend without its common names"
    );
    for &(module, names) in COMMON {
        let listed = public_names(&strip_comments(&read(format!("src/{module}.rs"))));
        let missing: Vec<_> = names.iter().filter(|n| !listed.contains(**n)).collect();
        assert!(
            missing.is_empty(),
            "src/{module}.rs lacks the common {missing:?}"
        );
    }
    let labels = [
        distlock::redis::BACKEND,
        distlock::postgres::BACKEND,
        distlock::etcd::BACKEND,
        distlock::mysql::BACKEND,
        distlock::object_store::BACKEND,
        distlock::redlock::BACKEND,
    ];
    assert_eq!(
        labels,
        [
            "redis",
            "postgres",
            "etcd",
            "mysql",
            "object-store",
            "redlock"
        ]
    );
}

/// lock-core's names that the root shows under another name: (lock-core's, the root's).
const RENAMED_AT_ROOT: &[(&str, &str)] = &[("metric", "metrics")];

/// A facade module re-exports its crate with a glob (hidden), so every name of the crate
/// resolves there, also one added or renamed there before the facade names it; and its
/// documented list names every public name of the crate's lib.rs (types, constants, metric
/// names, error helpers, client crates), so none is missing from the docs.
#[test]
fn each_backend_module_exports_every_name_of_its_crate() {
    for &(module, dir, krate) in BACKENDS {
        let facade = strip_comments(&read(format!("src/{module}.rs")));
        let glob = format!("pub use {krate}::*;");
        assert!(
            facade.lines().any(|line| line.trim() == glob),
            "src/{module}.rs must re-export all of {dir} with `{glob}`"
        );
        let names = public_names(&read(format!("{dir}/src/lib.rs")));
        assert!(
            names.len() > 5,
            "too few public names read from {dir}/src/lib.rs: {names:?}"
        );
        let listed = public_names(&facade);
        let missing: Vec<_> = names.difference(&listed).collect();
        assert!(
            missing.is_empty(),
            "src/{module}.rs does not list {dir}'s {missing:?}: add them to its `pub use {krate}::{{..}}`"
        );
    }
}

/// The names are really there: a few of each crate's, including those the glob was brought
/// in for (constants, metric names, the client crates), resolve through the facade.
#[test]
fn the_glob_exports_resolve() {
    use distlock::{etcd, postgres, redis, redlock};
    let _ = (redis::DEFAULT_GRACE, redis::CLUSTER_GRACE_REFRESH);
    let _ = redis::metric::GRACE_SECONDS;
    let _: Option<redis::EvictionRisk> = None;
    let _ = redis::redis::Client::open("redis://127.0.0.1/");
    let _: Option<redis::deadpool_redis::Pool> = None;
    let _ = (postgres::DEFAULT_POOL_SIZE, postgres::MIGRATION);
    let _: Option<postgres::tokio_postgres::NoTls> = None;
    let _: Option<postgres::deadpool_postgres::Pool> = None;
    let _ = (etcd::DEFAULT_PREFIX, etcd::MAX_NOTE_BYTES);
    let _: Option<etcd::etcd_client::Client> = None;
    let _ = (
        redlock::PING_TIMEOUT,
        redlock::metric::NODE_GRANTS,
        redlock::quorum(5),
    );
}

/// The root shows every name of lock-core (the backend-neutral types, limits and helpers).
#[test]
fn the_root_exports_every_name_of_lock_core() {
    let root = public_names(&read("src/lib.rs"));
    let missing: Vec<_> = public_names(&read("lock-core/src/lib.rs"))
        .into_iter()
        .map(|name| {
            RENAMED_AT_ROOT
                .iter()
                .find(|(core, _)| *core == name)
                .map_or(name.clone(), |(_, root)| (*root).to_owned())
        })
        .filter(|name| !root.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "src/lib.rs does not re-export lock-core's {missing:?}"
    );
}
