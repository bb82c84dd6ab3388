//! The servers, proxies and resource one run uses, and the faults applied to them.

mod clock;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use distlock::mysql::MysqlLock;
use distlock::postgres::PostgresLock;
use distlock::postgres::tokio_postgres::{self, NoTls};
use lock_testkit::{
    EtcdCluster, FakeClock, FaultProxy, KeepData, MariadbServer, PostgresServer, RedisCluster,
    RedisServer, SeaweedfsServer,
};

use crate::resource::FenceStore;
use crate::scenario::{Clocks, Topology};
use crate::schedule::Net;
use crate::worker::Backend;

/// `cluster-node-timeout` of the cluster scenarios: how long before a silent master is failed
/// over.
const CLUSTER_NODE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the lock master's replica lags (stopped, its link cut) before the master is
/// killed in the cluster scenarios: a few of the workers' grants and renewals.
const REPLICA_LAG: Duration = Duration::from_millis(500);

/// Members of the etcd scenarios' cluster: 3 survives the loss of any one.
const ETCD_MEMBERS: usize = 3;

/// The lock objects' prefix in the object-storage scenarios' bucket.
const S3_PREFIX: &str = "torture-locks";
/// How long a restarted etcd cluster may take to become healthy again.
const ETCD_HEALTHY_WITHIN: Duration = Duration::from_secs(30);
/// How long the members may take to agree on a leader (an election, on a loaded machine).
const ETCD_LEADER_WITHIN: Duration = Duration::from_secs(15);

/// Which server binary plays the Redis of a single-server or Redlock scenario (the lock's
/// stores; the protected resource and a Redis Cluster stay on `redis-server`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Server {
    /// `redis-server`.
    #[default]
    Redis,
    /// Valkey's `valkey-server` (`scripts/ensure-valkey.sh` installs it).
    Valkey,
}

impl Drop for Lab {
    fn drop(&mut self) {
        // SeaweedFS takes ~15 s to exit on SIGTERM after a restart on its data; its data is
        // thrown away with the lab, so a crash is as good as a stop.
        if let Some(server) = &mut self.s3 {
            server.kill();
        }
    }
}

/// Everything a run's workers talk to.
#[derive(Debug)]
pub(crate) struct Lab {
    /// The lock's servers (single or Redlock): the workers reach them through `proxies`.
    servers: Vec<RedisServer>,
    /// `proxies[worker][server]`: each worker's own path to each server.
    proxies: Vec<Vec<FaultProxy>>,
    /// The Redis Cluster, reached directly.
    cluster: Option<RedisCluster>,
    /// The PostgreSQL server (reached through `proxies`, as node 0).
    postgres: Option<PostgresServer>,
    /// The etcd cluster, reached through its members' client proxies.
    etcd: Option<EtcdCluster>,
    /// The MariaDB server (reached through `proxies`, as node 0).
    mysql: Option<MariadbServer>,
    /// The SeaweedFS of the object-storage scenarios (its S3 endpoint reached through
    /// `proxies`, as node 0, by the lock and the fenced log alike).
    s3: Option<SeaweedfsServer>,
    /// The etcd member killed or partitioned by the last etcd fault.
    etcd_faulted: Option<usize>,
    /// The cluster node killed by the last `kill_lock_master`.
    killed: Option<usize>,
    /// The protected resource's server, which no fault touches: the counter, and the fenced
    /// log of the Redis-family scenarios.
    resource: RedisServer,
    /// The PostgreSQL scenarios' fenced log, on a server of its own that no fault touches.
    resource_postgres: Option<PostgresServer>,
    /// The MySQL scenarios' fenced log, on a MariaDB of its own that no fault touches.
    resource_mysql: Option<MariadbServer>,
    /// `clocks[node]`: the libfaketime clock lock server `node` runs on, if any.
    clocks: Vec<Option<FakeClock>>,
    /// The clock every worker runs on, if any.
    workers_clock: Option<FakeClock>,
}

impl Lab {
    /// Starts the servers of `topology` and a proxy per worker and server.
    /// `store_args` are extra command-line arguments of the lock's own Redis stores (a
    /// `maxmemory`, say); `clocks` says which processes run on libfaketime.
    pub(crate) fn start(
        topology: Topology,
        workers: u32,
        server: Server,
        store_args: &[&str],
        clocks: Clocks,
    ) -> io::Result<Lab> {
        let resource = RedisServer::start()?;
        let node_clocks = clock::node_clocks(topology, clocks)?;
        // The lock's own stores: redis-server, or valkey-server.
        let store = |node: usize| {
            let clock = node_clocks.get(node).and_then(Option::as_ref);
            let builder = match (server, clock) {
                (Server::Redis, None) => RedisServer::builder(),
                (Server::Valkey, None) => RedisServer::builder().valkey(),
                // Debian's redis-server links jemalloc, which libfaketime cannot be preloaded
                // into (libfaketime #130: it recurses in clock_gettime at start); the Valkey of
                // scripts/ensure-valkey.sh uses the C library's malloc.
                (_, Some(clock)) => RedisServer::builder().valkey().fake_clock(clock),
            };
            store_args.iter().fold(builder, |b, a| b.arg(*a)).start()
        };
        let (postgres, resource_postgres) = match topology {
            Topology::Postgres => (
                Some(start_postgres(
                    node_clocks.first().and_then(Option::as_ref),
                )?),
                Some(PostgresServer::start()?),
            ),
            _ => (None, None),
        };
        let etcd = match topology {
            Topology::Etcd => Some(EtcdCluster::builder().members(ETCD_MEMBERS).start()?),
            _ => None,
        };
        let (mysql, resource_mysql) = match topology {
            Topology::Mysql => (Some(start_mariadb()?), Some(MariadbServer::start()?)),
            _ => (None, None),
        };
        let s3 = match topology {
            Topology::ObjectStore => Some(SeaweedfsServer::start()?),
            _ => None,
        };
        let (servers, cluster) = match topology {
            Topology::Single => (vec![store(0)?], None),
            Topology::Postgres | Topology::Etcd | Topology::Mysql | Topology::ObjectStore => {
                (Vec::new(), None)
            }
            Topology::Redlock(n) => ((0..n).map(store).collect::<io::Result<Vec<_>>>()?, None),
            Topology::Cluster => {
                let builder = RedisCluster::builder()
                    .masters(3)
                    .replicas_per_master(1)
                    .node_timeout(CLUSTER_NODE_TIMEOUT);
                // The cluster's nodes are the chosen server too: a Valkey Cluster for `valkey`.
                let builder = match server {
                    Server::Redis => builder,
                    Server::Valkey => builder.valkey(),
                };
                (Vec::new(), Some(builder.start()?))
            }
        };
        let addrs: Vec<_> = servers
            .iter()
            .map(RedisServer::addr)
            .chain(postgres.iter().map(PostgresServer::addr))
            .chain(mysql.iter().map(MariadbServer::addr))
            .chain(
                s3.iter()
                    .map(|s3| SocketAddr::from((Ipv4Addr::LOCALHOST, s3.s3_port()))),
            )
            .collect();
        let proxies = (0..workers)
            .map(|_| {
                addrs
                    .iter()
                    .map(|addr| FaultProxy::start(*addr))
                    .collect::<io::Result<Vec<_>>>()
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Lab {
            servers,
            proxies,
            cluster,
            postgres,
            etcd,
            mysql,
            s3,
            etcd_faulted: None,
            killed: None,
            resource,
            resource_postgres,
            resource_mysql,
            clocks: node_clocks,
            workers_clock: clock::workers_clock(clocks)?,
        })
    }

    /// The resource server's URL.
    pub(crate) fn resource_url(&self) -> String {
        self.resource.url()
    }

    /// Where the fenced log lives: behind the fence of the scenario's own backend.
    pub(crate) fn fence_store(&self) -> FenceStore {
        if let Some(server) = &self.resource_postgres {
            return FenceStore::Postgres { url: server.url() };
        }
        if let Some(server) = &self.resource_mysql {
            return FenceStore::Mysql { url: server.url() };
        }
        if let Some(server) = &self.s3 {
            return FenceStore::ObjectStore {
                endpoint: server.endpoint(),
                url: server.url(S3_PREFIX),
            };
        }
        match &self.etcd {
            Some(etcd) => FenceStore::Etcd {
                endpoints: etcd.endpoints(),
            },
            None => FenceStore::Redis,
        }
    }

    /// Where `worker` writes the fenced log: as [`fence_store`](Self::fence_store) says, but
    /// the object store's through the worker's own proxy. That log is an object on the lock's
    /// own server, so a worker cut off from the server is cut off from both, and its late
    /// write reaches the fence only after the heal, as a real client's would.
    pub(crate) fn worker_fence_store(&self, worker: u32) -> FenceStore {
        match self.fence_store() {
            FenceStore::ObjectStore { url, .. } => FenceStore::ObjectStore {
                endpoint: self.s3_endpoint(worker),
                url,
            },
            store => store,
        }
    }

    /// `worker`'s S3 endpoint: its proxy in front of SeaweedFS's S3 port. The S3 API answers
    /// every request itself (SeaweedFS's gateway reads from its volume servers on the
    /// client's behalf, and answers no redirect), so nothing bypasses the proxy.
    fn s3_endpoint(&self, worker: u32) -> String {
        format!("http://127.0.0.1:{}", self.first_proxy_port(worker))
    }

    /// The port of `worker`'s proxy in front of node 0 (PostgreSQL, MariaDB, SeaweedFS).
    fn first_proxy_port(&self, worker: u32) -> u16 {
        self.proxies
            .get(worker as usize)
            .and_then(|proxies| proxies.first())
            .map(|proxy| proxy.addr().port())
            .unwrap_or_default()
    }

    /// How `worker` reaches the lock.
    pub(crate) fn backend(&self, worker: u32) -> Backend {
        if let Some(cluster) = &self.cluster {
            return Backend::Cluster {
                urls: cluster.urls(),
            };
        }
        if let Some(server) = &self.s3 {
            return Backend::ObjectStore {
                endpoint: self.s3_endpoint(worker),
                url: server.url(S3_PREFIX),
            };
        }
        if let Some(etcd) = &self.etcd {
            return Backend::Etcd {
                endpoints: etcd.endpoints(),
            };
        }
        if self.postgres.is_some() {
            let port = self.first_proxy_port(worker);
            return Backend::Postgres {
                url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            };
        }
        if let Some(server) = &self.mysql {
            let port = self.first_proxy_port(worker);
            let url = server.url();
            return Backend::Mysql {
                url: url.replace(&format!(":{}/", server.port()), &format!(":{port}/")),
            };
        }
        let urls: Vec<String> = self.proxies[worker as usize]
            .iter()
            .map(FaultProxy::url)
            .collect();
        if urls.len() == 1 {
            Backend::Single {
                url: urls.into_iter().next().unwrap_or_default(),
            }
        } else {
            Backend::Redlock { urls }
        }
    }

    /// Applies `fault` on the proxies between `workers` and `nodes`.
    pub(crate) fn net(&self, workers: &[u32], nodes: &[usize], fault: Net) {
        for &w in workers {
            for &n in nodes {
                if let Some(proxy) = self.proxies.get(w as usize).and_then(|p| p.get(n)) {
                    match fault {
                        Net::Latency(d) => proxy.set_latency(d),
                        Net::Partition => proxy.partition(),
                        Net::Heal => proxy.heal(),
                    }
                }
            }
        }
    }

    /// How many lock servers there are (not counting a cluster's).
    pub(crate) fn node_count(&self) -> usize {
        self.servers.len()
            + usize::from(self.postgres.is_some())
            + usize::from(self.mysql.is_some())
            + usize::from(self.s3.is_some())
    }

    /// Shuts PostgreSQL down: fast (`SIGINT`) or immediate (`SIGQUIT`).
    pub(crate) fn stop_postgres(&mut self, fast: bool) -> io::Result<()> {
        let server = self.postgres_mut()?;
        if fast {
            server.stop_fast();
        } else {
            server.stop();
        }
        Ok(())
    }

    /// Starts PostgreSQL again with its data.
    pub(crate) fn start_postgres(&mut self) -> io::Result<()> {
        self.postgres_mut()?.start_again()
    }

    /// `pg_terminate_backend` on every session of the workers (application name `distlock`).
    pub(crate) fn terminate_backends(&mut self) -> io::Result<()> {
        let url = self.postgres_mut()?.url();
        on_postgres(&url, |client| async move {
            client
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE application_name = 'distlock' AND pid <> pg_backend_pid()",
                    &[],
                )
                .await
                .map(drop)
        })
    }

    /// `SIGKILL`s MariaDB (a crash).
    pub(crate) fn stop_mysql(&mut self) -> io::Result<()> {
        self.mysql_mut()?.stop();
        Ok(())
    }

    /// Starts MariaDB again with its data.
    pub(crate) fn start_mysql(&mut self) -> io::Result<()> {
        self.mysql_mut()?.start_again()
    }

    fn mysql_mut(&mut self) -> io::Result<&mut MariadbServer> {
        self.mysql.as_mut().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "a MariaDB step in a scenario without MariaDB",
            )
        })
    }

    /// `SIGKILL`s SeaweedFS (a crash); its data stays.
    pub(crate) fn kill_s3(&mut self) -> io::Result<()> {
        self.s3_mut()?.kill();
        Ok(())
    }

    /// Starts SeaweedFS again on its data.
    pub(crate) fn start_s3(&mut self) -> io::Result<()> {
        self.s3_mut()?.start_again()
    }

    fn s3_mut(&mut self) -> io::Result<&mut SeaweedfsServer> {
        self.s3.as_mut().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "a SeaweedFS step in a scenario without SeaweedFS",
            )
        })
    }

    fn postgres_mut(&mut self) -> io::Result<&mut PostgresServer> {
        self.postgres.as_mut().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "a PostgreSQL step in a scenario without PostgreSQL",
            )
        })
    }

    /// `SIGKILL`s server `n`.
    pub(crate) fn kill(&mut self, n: usize) -> io::Result<()> {
        self.server(n)?.stop();
        Ok(())
    }

    /// Starts server `n` again with no data.
    pub(crate) fn restart_empty(&mut self, n: usize) -> io::Result<()> {
        self.server(n)?.restart(KeepData::Discard)
    }

    /// Writes `mb` MB of other keys (100 KB values) to server `n`, one connection a key.
    pub(crate) fn fill(&mut self, n: usize, mb: u32) -> io::Result<()> {
        let value = "x".repeat(100 * 1024);
        let server = self.server(n)?;
        for i in 0..mb * 10 {
            let key = format!("filler:{}:{i}", fastrand::u64(..));
            server.command(&["SET", &key, &value])?;
        }
        Ok(())
    }

    /// `SIGSTOP`s server `n`.
    pub(crate) fn pause(&mut self, n: usize) -> io::Result<()> {
        self.server(n)?.pause()
    }

    /// `SIGCONT`s server `n`.
    pub(crate) fn resume(&mut self, n: usize) -> io::Result<()> {
        self.server(n)?.resume()
    }

    /// `SIGKILL`s the cluster master that owns `lock`'s slot; returns the slot.
    ///
    /// Its replica lags first: it is stopped and its link cut (a stopped process still
    /// receives into its socket buffer) for [`REPLICA_LAG`] while the workers grant and renew
    /// on the master, and resumed once the master is dead, so it is promoted without the
    /// grants of that window: the failover that loses grants.
    pub(crate) fn kill_lock_master(&mut self, lock: &str) -> io::Result<u16> {
        let cluster = self.cluster_mut()?;
        let slot = cluster.slot_of(lock)?;
        let master = cluster.master_for_slot(slot)?;
        let replica = cluster.replica_of(master)?;
        cluster.nodes()[replica].server().pause()?;
        let cut = cluster.nodes()[master].command(&["CLIENT", "KILL", "TYPE", "replica"]);
        if cut.is_ok() {
            std::thread::sleep(REPLICA_LAG);
        }
        cluster.kill(master);
        cluster.nodes()[replica].server().resume()?;
        self.killed = Some(master);
        cut.map(|_| slot)
    }

    /// Waits until a live master owns `lock`'s slot again.
    pub(crate) fn await_failover(&mut self, slot: u16) -> io::Result<()> {
        self.cluster_mut()?.wait_for_failover(slot).map(|_| ())
    }

    /// Starts the killed master again (it rejoins as a replica) and waits for a healthy
    /// cluster.
    pub(crate) fn restart_killed_master(&mut self) -> io::Result<()> {
        let Some(node) = self.killed.take() else {
            return Ok(());
        };
        self.cluster_mut()?.start_again(node)
    }

    /// `SIGKILL`s the etcd member that leads now.
    pub(crate) fn kill_etcd_leader(&mut self) -> io::Result<()> {
        let etcd = self.etcd_mut()?;
        let leader = etcd.leader_within(ETCD_LEADER_WITHIN)?;
        etcd.kill(leader);
        self.etcd_faulted = Some(leader);
        Ok(())
    }

    /// Waits until the running members agree on a leader.
    pub(crate) fn await_etcd_leader(&mut self) -> io::Result<()> {
        self.etcd_mut()?.leader_within(ETCD_LEADER_WITHIN).map(drop)
    }

    /// Starts the killed etcd member again on its data.
    pub(crate) fn restart_etcd_member(&mut self) -> io::Result<()> {
        let member = self.etcd_faulted.take().ok_or_else(|| {
            io::Error::other("no etcd member was killed: the cycle needs KillEtcdLeader first")
        })?;
        self.etcd_mut()?.restart(member)
    }

    /// Partitions the etcd member that leads now from its clients and peers.
    pub(crate) fn partition_etcd_leader(&mut self) -> io::Result<()> {
        let etcd = self.etcd_mut()?;
        let leader = etcd.leader_within(ETCD_LEADER_WITHIN)?;
        etcd.partition(leader)?;
        self.etcd_faulted = Some(leader);
        Ok(())
    }

    /// Heals the partitioned etcd member.
    pub(crate) fn heal_etcd_partition(&mut self) -> io::Result<()> {
        let member = self.etcd_faulted.take().ok_or_else(|| {
            io::Error::other(
                "no etcd member was partitioned: the cycle needs PartitionEtcdLeader first",
            )
        })?;
        self.etcd_mut()?.heal(member)
    }

    /// `SIGKILL`s every etcd member.
    pub(crate) fn stop_etcd(&mut self) -> io::Result<()> {
        let etcd = self.etcd_mut()?;
        for member in 0..etcd.len() {
            etcd.kill(member);
        }
        Ok(())
    }

    /// Starts every etcd member again on its data and waits until each is healthy.
    pub(crate) fn start_etcd(&mut self) -> io::Result<()> {
        let etcd = self.etcd_mut()?;
        for member in 0..etcd.len() {
            if !etcd.member(member).is_running() {
                etcd.restart(member)?;
            }
        }
        etcd.wait_healthy(ETCD_HEALTHY_WITHIN)
    }

    fn etcd_mut(&mut self) -> io::Result<&mut EtcdCluster> {
        self.etcd.as_mut().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "an etcd step in a scenario without etcd",
            )
        })
    }

    fn server(&mut self, n: usize) -> io::Result<&mut RedisServer> {
        let count = self.servers.len();
        self.servers.get_mut(n).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no server {n} (there are {count})"),
            )
        })
    }

    fn cluster_mut(&mut self) -> io::Result<&mut RedisCluster> {
        self.cluster.as_mut().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "a cluster step in a scenario without a cluster",
            )
        })
    }
}

/// A PostgreSQL server, on `clock` if given, with the lease table created.
fn start_postgres(clock: Option<&FakeClock>) -> io::Result<PostgresServer> {
    let builder = PostgresServer::builder();
    let server = match clock {
        Some(clock) => builder.fake_clock(clock),
        None => builder,
    }
    .start()?;
    // Setup, not the run: the migration's statements get 10 s, not the default 1 s, which a
    // server on a libfaketime clock (every clock read goes through its file) on a busy machine
    // can exceed.
    let lock = PostgresLock::builder()
        .url(server.url())
        .connect_timeout(Duration::from_secs(10))
        .statement_timeout(Duration::from_secs(10))
        .build()
        .map_err(io::Error::other)?;
    runtime()?
        .block_on(lock.migrate())
        .map_err(io::Error::other)?;
    Ok(server)
}

/// A MariaDB server with the lease table created (setup: 10 s per statement).
fn start_mariadb() -> io::Result<MariadbServer> {
    let server = MariadbServer::start()?;
    let lock = MysqlLock::builder()
        .url(server.url())
        .connect_timeout(Duration::from_secs(10))
        .statement_timeout(Duration::from_secs(10))
        .build()
        .map_err(io::Error::other)?;
    runtime()?
        .block_on(lock.migrate())
        .map_err(io::Error::other)?;
    Ok(server)
}

/// Runs `work` on a client of its own (application name `torture`) connected to `url`.
fn on_postgres<F, Fut>(url: &str, work: F) -> io::Result<()>
where
    F: FnOnce(tokio_postgres::Client) -> Fut,
    Fut: std::future::Future<Output = Result<(), tokio_postgres::Error>>,
{
    let mut config: tokio_postgres::Config = url.parse().map_err(io::Error::other)?;
    config
        .application_name("torture")
        .connect_timeout(Duration::from_secs(5));
    runtime()?.block_on(async move {
        let (client, connection) = config.connect(NoTls).await.map_err(io::Error::other)?;
        let driver = tokio::spawn(connection);
        let done = tokio::time::timeout(Duration::from_secs(5), work(client)).await;
        driver.abort();
        match done {
            Ok(result) => result.map_err(io::Error::other),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "PostgreSQL did not answer",
            )),
        }
    })
}

fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
