#![forbid(unsafe_code)]
//! Throwaway `redis-server` processes for distlock's integration tests.
//!
//! The kit has two halves, one folder each, and every public name is re-exported here: the
//! servers a test starts and stops (`src/servers/`: Redis, Valkey, Redis Cluster, Sentinel,
//! PostgreSQL, PgBouncer, etcd, the fault proxy, and their launch helpers), and the checks
//! the backends' tests share (`src/checks/`: the conformance suite, and the exclusion, fair
//! order, leader election and holder checks).
//!
//! Every test starts the servers it needs with [`RedisServer::start`] (or
//! [`RedisServer::builder`]): each one listens on a free port on
//! `127.0.0.1`, keeps its data and log in its own temporary directory, and is
//! killed by its own PID (`SIGKILL`, then reaped) when it is dropped. Servers
//! can be stopped, started again on the same port, restarted with or without
//! their data, and paused/resumed with `SIGSTOP`/`SIGCONT` to simulate a hung
//! node. Every wait is bounded in both attempts and time.
//!
//! With the `tls` feature a server can serve TLS only (`RedisServerBuilder::tls`,
//! `mutual_tls`): it gets a throwaway CA and certificates (`TestCertificates`) in
//! its directory, a `rediss://` URL, and the kit's own commands speak TLS to it.
//!
//! The binary is taken from `DISTLOCK_REDIS_SERVER` if set, else from `PATH`
//! (see [`redis_server_binary`]); `scripts/ensure-redis.sh` installs it. A Valkey server
//! runs the same way ([`RedisServerBuilder::valkey`]); `scripts/ensure-valkey.sh` installs it.
//!
//! Two multi-node topologies are built from such servers:
//!
//! - [`RedisCluster`]: a real Redis Cluster, by default 3 masters and 3
//!   replicas with a short `cluster-node-timeout`. It can fail a replica over
//!   by hand ([`RedisCluster::failover`]), kill or pause a master and wait
//!   for its replica to take over ([`RedisCluster::wait_for_failover`]), and
//!   move a slot between masters, all at once
//!   ([`RedisCluster::migrate_slot`]) or stopping half-way
//!   ([`RedisCluster::begin_migration`]) so that clients meet `-ASK`
//!   redirections.
//! - [`RedisSentinelSet`]: a primary, a replica and 3 Redis Sentinels. The
//!   primary can be killed ([`RedisSentinelSet::kill_primary`]) or failed over
//!   on request ([`RedisSentinelSet::failover`]), and
//!   [`RedisSentinelSet::wait_for_failover`] returns the address every
//!   Sentinel then reports.
//!
//! Both wait (bounded, 30 s by default) until the topology is fully formed
//! before returning, query the nodes for their current roles rather than
//! remembering them, and kill every process by its PID when dropped.
//!
//! [`PostgresServer`] does the same for PostgreSQL: `initdb` in a temporary
//! directory, `postgres` on a free loopback port, ready once its
//! `postmaster.pid` says so, stopped by its PID (immediate shutdown, like a
//! crash) and started again on the same port with the same data. As root,
//! where `initdb` and `postgres` refuse to run, both run as the unprivileged
//! user `postgres` (`DISTLOCK_PG_USER` names another); the binaries are found
//! through `DISTLOCK_PG_BINDIR`, `pg_config --bindir` or
//! `/usr/lib/postgresql/*/bin` (`scripts/ensure-postgres.sh` installs them).
//! [`PgBouncer`] puts a PgBouncer (transaction mode by default) on a free loopback port in
//! front of one, stopped by its PID too.
//!
//! [`MariadbServer`] does the same for MariaDB: a data directory copied from a template made
//! once per machine by `mariadb-install-db`, `mariadbd` on a free loopback port with its socket
//! in the temporary directory (as root: `--user=root`), a user `distlock` with a password and
//! its database, killed by its PID (`SIGKILL`, a crash) and started again on the same data;
//! `sql_as_root` runs SQL as root over the socket (`KILL CONNECTION`). A MariaDB already running
//! on this machine is never used (`scripts/ensure-mariadb.sh` installs the binaries).
//!
//! [`EtcdCluster`] runs 1 or 3 (any odd count) etcd members, each in a network namespace of its
//! own on a private bridge (`10.213.S.0/24`) when the process has root (or CAP_NET_ADMIN and
//! CAP_SYS_ADMIN) and iproute2, else on loopback ports ([`EtcdNetwork`]; a throwaway etcd
//! asks for loopback): a member can be killed, restarted on its data, paused, or (in a
//! namespace only) partitioned both ways (its link taken down), and the cluster says which
//! member leads (`scripts/ensure-etcd.sh` installs etcd).
//!
//! [`FaultProxy`] sits between clients and one server and injects network
//! faults while a test runs: latency, stalls, full partitions, refused and
//! reset connections, replies cut mid-way.
//!
//! [`run_test_in_processes`] runs an `#[ignore]`d test of the current test binary in several
//! OS processes and waits for them; [`spawn_test_process`] starts one and hands it back, for a
//! test that kills it by its PID.
//!
//! [`conformance`] is one behaviour suite for the exclusive lock's contract and the lock kinds
//! (read-write lock, semaphore, fair lock, multi-lock): async checks that take fresh
//! `lock_core::Locker`s on any backend and panic when a rule breaks, so every backend is held
//! to the same rules; what a backend offers (and keeps less of) it declares once, in its
//! capability table (`lock_core::backend::Capabilities`), and one
//! [`conformance_tests!`] call per backend runs every check, asserting `Unsupported` for the
//! kinds it does not offer. `README.md` shows the matrix of what runs where.
//! [`exclusion`] is the counter-under-the-lock check the Redis-based backends share: many
//! tasks or OS processes update one counter under one name, and it must end exact.
//! [`fair_order`] is the fair lock's order check across OS processes that the backends share:
//! the contended loop, the mark of a queued request, and the judge of the grant records.
//! [`history`] is the history checker: mutual exclusion over valid leases per kind,
//! fencing-token growth, and the linearizability of the fenced resource as a register (a
//! Wing & Gong search with Lowe's memoisation), over a recorded history of grants and fenced
//! writes; the torture suite's verdicts and the process tests' come from it.
//! [`election_processes`] is leader election across OS processes, judged by an independent
//! witness, [`coordination_processes`] a latch's party and a barrier's member SIGKILLed in
//! another process, and [`holders`] the holder-description checks (`Lock::describe_holder`,
//! `Lock::annotate`) that the backends describing their holders share.
//!
//! ```no_run
//! use lock_testkit::{KeepData, RedisServer};
//!
//! let mut server = RedisServer::start()?;
//! assert_eq!(server.command(&["PING"])?, "PONG");
//! server.command(&["SET", "k", "v"])?;
//! server.restart(KeepData::Keep)?;
//! assert_eq!(server.command(&["GET", "k"])?, "v");
//!
//! let secured = RedisServer::builder().password("s3cret").start()?;
//! let client = redis::Client::open(secured.url());
//! # drop(client);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! ```no_run
//! use lock_testkit::{RedisCluster, RedisSentinelSet};
//!
//! let mut cluster = RedisCluster::start()?;
//! let slot = cluster.slot_of("lock:{orders}")?;
//! let master = cluster.master_for_slot(slot)?;
//! cluster.nodes()[master].command(&["SET", "lock:{orders}", "token"])?;
//! cluster.kill(master);
//! let successor = cluster.wait_for_failover(slot)?;
//!
//! let mut sentinels = RedisSentinelSet::start()?;
//! let seeds = sentinels.sentinel_urls();
//! sentinels.kill_primary()?;
//! let new_primary = sentinels.wait_for_failover()?;
//! # drop((successor, seeds, new_primary));
//! # Ok::<(), std::io::Error>(())
//! ```

mod checks;
mod processes;
mod servers;
mod signal;

pub use checks::{
    conformance, coordination_processes, election_processes, exclusion, fair_order, history,
    holders,
};
pub use processes::{run_test_in_processes, spawn_test_process};
#[cfg(feature = "tls")]
pub use servers::TestCertificates;
pub use servers::{
    CLUSTER_SLOTS, ClusterNode, ETCD_VERSION, EtcdCluster, EtcdClusterBuilder, EtcdMember,
    EtcdNetwork, FakeClock, Faked, FaultProxy, KeepData, MariadbServer, MariadbServerBuilder,
    PgBouncer, PgBouncerBuilder, PoolMode, PostgresServer, PostgresServerBuilder, RedisCluster,
    RedisClusterBuilder, RedisSentinelSet, RedisSentinelSetBuilder, RedisServer,
    RedisServerBuilder, Role, SlotMigration, VALKEY_VERSION, cache_dir, etcd_install_dir,
    free_port, pgbouncer_binary, postgres_bin_dir, redis_server_binary, try_etcd_binary,
    try_faketime_library, try_redis_server_binary, try_valkey_server_binary, valkey_install_dir,
};
pub use servers::{
    FakeS3, SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_BUCKET, SEAWEEDFS_SECRET_KEY, SEAWEEDFS_VERSION,
    SeaweedfsServer, seaweedfs_install_dir, try_weed_binary,
};
