//! Integration tests of [`RedisCluster`] against the real `redis-server`.

use std::io;
use std::time::{Duration, Instant};

use crate::common::refuses;
use lock_testkit::{CLUSTER_SLOTS, RedisCluster, Role};

fn start() -> RedisCluster {
    RedisCluster::start().expect("start cluster")
}

/// `SET key value` on `url`, then `WAIT 1 5000` on the same connection
/// (`WAIT` only covers writes made on its own connection), so the write has
/// reached a replica.
fn set_replicated(url: &str, key: &str, value: &str) {
    let mut con = redis::Client::open(url)
        .expect("client")
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("connect");
    let (acked,): (i64,) = redis::pipe()
        .cmd("SET")
        .arg(key)
        .arg(value)
        .ignore()
        .cmd("WAIT")
        .arg(1)
        .arg(5_000)
        .query(&mut con)
        .expect("SET + WAIT");
    assert_eq!(acked, 1, "the write did not reach the replica");
}

fn other_master(cluster: &RedisCluster, not: usize) -> usize {
    cluster
        .masters()
        .into_iter()
        .find(|m| *m != not)
        .expect("another master")
}

#[test]
fn cluster_forms_and_routes_keys() {
    let began = Instant::now();
    let cluster = start();
    eprintln!("cluster formed in {:.1?}", began.elapsed());

    let nodes = cluster.nodes();
    assert_eq!(nodes.len(), 6);
    let urls = cluster.urls();
    assert_eq!(urls.len(), 6);
    for (node, url) in nodes.iter().zip(&urls) {
        assert_ne!(node.port(), 6379);
        assert_eq!(*url, format!("redis://127.0.0.1:{}/", node.port()));
        assert_eq!(node.id().len(), 40, "{}", node.id());
        assert!(node.is_live());
    }
    assert_eq!(cluster.masters(), vec![0, 1, 2]);
    assert_eq!(cluster.replicas(), vec![3, 4, 5]);
    assert_eq!(cluster.master_urls().len(), 3);

    // Every slot belongs to exactly one master; replicas own none.
    let mut covered = 0_u32;
    for (i, node) in nodes.iter().enumerate() {
        let slots = node.slots().expect("slots");
        if i < 3 {
            assert_eq!(node.role().expect("role"), Role::Master);
            assert!(!slots.is_empty());
            covered += slots
                .iter()
                .map(|r| u32::from(*r.end()) - u32::from(*r.start()) + 1)
                .sum::<u32>();
            assert_eq!(cluster.replica_of(i).expect("replica"), 3 + i);
        } else {
            assert_eq!(node.role().expect("role"), Role::Replica);
            assert!(slots.is_empty());
            assert!(cluster.replica_of(i).is_err(), "a replica has no replica");
        }
    }
    assert_eq!(covered, u32::from(CLUSTER_SLOTS));

    // Keys route to the master of their slot, and only there.
    assert_eq!(cluster.slot_of("foo").expect("slot"), 12182);
    for key in ["foo", "bar", "lock:{orders}", "lock:{users}"] {
        let slot = cluster.slot_of(key).expect("slot");
        let master = cluster.master_for_slot(slot).expect("master");
        assert!(
            cluster.nodes()[master]
                .slots()
                .expect("slots")
                .iter()
                .any(|r| r.contains(&slot))
        );
        assert_eq!(
            cluster.nodes()[master]
                .command(&["SET", key, "v"])
                .expect("SET"),
            "OK"
        );
        let err = cluster.nodes()[other_master(&cluster, master)]
            .command(&["GET", key])
            .expect_err("another master redirects");
        assert!(
            err.to_string()
                .contains(&cluster.nodes()[master].port().to_string()),
            "{err}"
        );
    }
    assert_eq!(
        cluster
            .master_for_slot(CLUSTER_SLOTS)
            .expect_err("bad slot")
            .kind(),
        io::ErrorKind::InvalidInput
    );

    let ports: Vec<u16> = cluster.nodes().iter().map(|n| n.port()).collect();
    drop(cluster);
    for port in ports {
        assert!(refuses(port), "port {port} still accepts after drop");
    }
}

#[test]
fn manual_failover_swaps_roles() {
    let cluster = start();
    let slot = cluster.slot_of("lock:{failover}").expect("slot");
    let master = cluster.master_for_slot(slot).expect("master");
    let replica = cluster.replica_of(master).expect("replica");
    set_replicated(&cluster.nodes()[master].url(), "lock:{failover}", "token");

    assert_eq!(
        cluster.failover(master).expect_err("not a replica").kind(),
        io::ErrorKind::InvalidInput
    );
    let began = Instant::now();
    cluster.failover(replica).expect("failover");
    eprintln!("manual failover took {:.1?}", began.elapsed());

    assert_eq!(cluster.nodes()[replica].role().expect("role"), Role::Master);
    assert_eq!(cluster.nodes()[master].role().expect("role"), Role::Replica);
    assert_eq!(cluster.master_for_slot(slot).expect("master"), replica);
    assert_eq!(cluster.replica_of(replica).expect("replica"), master);
    assert_eq!(
        cluster.nodes()[replica]
            .command(&["GET", "lock:{failover}"])
            .expect("GET"),
        "token"
    );
}

#[test]
fn killed_and_paused_masters_are_replaced() {
    let mut cluster = start();

    // Killed: its replica takes over; started again, it comes back as a replica.
    let slot = cluster.slot_of("lock:{killed}").expect("slot");
    let master = cluster.master_for_slot(slot).expect("master");
    let replica = cluster.replica_of(master).expect("replica");
    set_replicated(&cluster.nodes()[master].url(), "lock:{killed}", "token");
    cluster.kill(master);
    assert!(!cluster.nodes()[master].is_live());
    let began = Instant::now();
    let new = cluster
        .wait_for_failover(slot)
        .expect("failover after kill");
    eprintln!("failover after kill took {:.1?}", began.elapsed());
    assert_eq!(new, replica);
    assert_eq!(cluster.nodes()[new].role().expect("role"), Role::Master);
    assert_eq!(
        cluster.nodes()[new]
            .command(&["GET", "lock:{killed}"])
            .expect("GET"),
        "token",
        "log of node {new}:\n{}",
        cluster.nodes()[new].server().log_tail()
    );
    let began = Instant::now();
    cluster.start_again(master).expect("start again");
    eprintln!("rejoin took {:.1?}", began.elapsed());
    assert_eq!(cluster.nodes()[master].role().expect("role"), Role::Replica);
    assert_eq!(cluster.replica_of(new).expect("replica"), master);

    // Paused: treated as down, failed over; resumed, it rejoins as a replica.
    let slot = cluster.slot_of("lock:{paused}").expect("slot");
    let master = cluster.master_for_slot(slot).expect("master");
    let replica = cluster.replica_of(master).expect("replica");
    cluster.nodes()[master].server().pause().expect("pause");
    assert!(!cluster.nodes()[master].is_live());
    let began = Instant::now();
    let new = cluster
        .wait_for_failover(slot)
        .expect("failover after pause");
    eprintln!("failover after pause took {:.1?}", began.elapsed());
    assert_eq!(new, replica);
    cluster.nodes()[master].server().resume().expect("resume");
    cluster.wait_until_healthy().expect("healthy after resume");
    assert_eq!(cluster.nodes()[master].role().expect("role"), Role::Replica);
    assert_eq!(cluster.master_for_slot(slot).expect("master"), new);
}

#[test]
fn slot_migration_moves_keys_with_ask_in_between() {
    let cluster = start();
    let slot = cluster.slot_of("{mig}held").expect("slot");
    assert_eq!(cluster.slot_of("{mig}new").expect("slot"), slot);
    let from = cluster.master_for_slot(slot).expect("master");
    let to = other_master(&cluster, from);
    let (source, target) = (&cluster.nodes()[from], &cluster.nodes()[to]);
    source.command(&["SET", "{mig}held", "v1"]).expect("SET");

    // Misuse is refused before anything changes.
    let invalid = |r: io::Result<lock_testkit::SlotMigration>| r.expect_err("invalid").kind();
    assert_eq!(
        invalid(cluster.begin_migration(slot, from, from)),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        invalid(cluster.begin_migration(slot, to, from)),
        io::ErrorKind::InvalidInput
    );
    let replica = cluster.replica_of(to).expect("replica");
    assert_eq!(
        invalid(cluster.begin_migration(slot, from, replica)),
        io::ErrorKind::InvalidInput
    );

    let migration = cluster.begin_migration(slot, from, to).expect("begin");
    assert_eq!(
        (migration.slot(), migration.from(), migration.to()),
        (slot, from, to)
    );
    // Mid-migration: the source still serves the keys it has, and sends
    // new keys to the target with -ASK; the target takes them after ASKING.
    assert_eq!(source.command(&["GET", "{mig}held"]).expect("GET"), "v1");
    let ask = source.command(&["SET", "{mig}new", "v2"]).expect_err("ASK");
    assert!(
        ask.to_string().contains(&target.port().to_string()),
        "{ask}"
    );
    let moved = target
        .command(&["GET", "{mig}new"])
        .expect_err("MOVED without ASKING");
    assert!(
        moved.to_string().contains(&source.port().to_string()),
        "{moved}"
    );
    let mut con = redis::Client::open(target.url())
        .expect("client")
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("connect");
    let (set,): (String,) = redis::pipe()
        .cmd("ASKING")
        .ignore()
        .cmd("SET")
        .arg("{mig}new")
        .arg("v2")
        .query(&mut con)
        .expect("ASKING + SET");
    assert_eq!(set, "OK");

    // Moving the keys early: the source now redirects for them too.
    assert_eq!(cluster.migrate_keys(&migration).expect("migrate keys"), 1);
    assert!(source.command(&["GET", "{mig}held"]).is_err());
    assert_eq!(cluster.master_for_slot(slot).expect("master"), from);

    let began = Instant::now();
    assert_eq!(cluster.finish_migration(migration).expect("finish"), 0);
    eprintln!("finishing the migration took {:.1?}", began.elapsed());
    assert_eq!(cluster.master_for_slot(slot).expect("master"), to);
    assert_eq!(target.command(&["GET", "{mig}held"]).expect("GET"), "v1");
    assert_eq!(target.command(&["GET", "{mig}new"]).expect("GET"), "v2");
    assert!(source.command(&["GET", "{mig}held"]).is_err());
    assert!(
        target
            .slots()
            .expect("slots")
            .iter()
            .any(|r| r.contains(&slot))
    );

    // And back in one go.
    assert_eq!(
        cluster.migrate_slot(slot, to, from).expect("migrate back"),
        2
    );
    assert_eq!(cluster.master_for_slot(slot).expect("master"), from);
    assert_eq!(
        cluster.nodes()[from]
            .command(&["GET", "{mig}held"])
            .expect("GET"),
        "v1"
    );
}

#[test]
fn builder_shapes() {
    let cluster = RedisCluster::builder()
        .masters(3)
        .replicas_per_master(0)
        .node_timeout(Duration::from_millis(1_500))
        .wait_timeout(Duration::from_secs(30))
        .start()
        .expect("start masters only");
    assert_eq!(cluster.nodes().len(), 3);
    assert_eq!(cluster.masters(), vec![0, 1, 2]);
    assert!(cluster.replicas().is_empty());
    assert_eq!(
        cluster.nodes()[0]
            .command(&["CONFIG", "GET", "cluster-node-timeout"])
            .expect("CONFIG GET"),
        "cluster-node-timeout\n1500"
    );
    assert_eq!(
        RedisCluster::builder()
            .masters(0)
            .start()
            .expect_err("no masters")
            .kind(),
        io::ErrorKind::InvalidInput
    );
}

#[test]
fn cluster_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<RedisCluster>();
}
