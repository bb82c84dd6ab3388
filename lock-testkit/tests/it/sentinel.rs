//! Integration tests of [`RedisSentinelSet`] against the real `redis-server`.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common::refuses;
use lock_testkit::{RedisSentinelSet, RedisServer};

fn start() -> RedisSentinelSet {
    let began = Instant::now();
    let set = RedisSentinelSet::start().expect("start sentinel set");
    eprintln!("sentinel set formed in {:.1?}", began.elapsed());
    set
}

/// What one sentinel says the primary is.
fn reported_by(sentinel: &RedisServer, name: &str) -> SocketAddr {
    let text = sentinel
        .command(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", name])
        .expect("GET-MASTER-ADDR-BY-NAME");
    let (ip, port) = text.split_once('\n').expect("ip and port");
    SocketAddr::new(ip.parse().expect("ip"), port.parse().expect("port"))
}

/// `SET key value` on `server`, then `WAIT 1 5000` on the same connection
/// (`WAIT` only covers writes made on its own connection).
fn set_replicated(server: &RedisServer, key: &str, value: &str) {
    let mut con = redis::Client::open(server.url())
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

fn role(server: &RedisServer) -> String {
    let role = server.command(&["ROLE"]).expect("ROLE");
    role.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn sentinel_set_forms() {
    let set = start();
    assert_eq!(set.master_name(), "mymaster");
    assert_eq!(set.servers().len(), 2);
    assert_eq!(set.sentinels().len(), 3);
    let (primary, replica) = (&set.servers()[0], &set.servers()[1]);
    assert_eq!(set.primary().expect("primary"), primary.addr());
    assert_eq!(set.primary_index().expect("primary index"), 0);
    assert_eq!(
        set.primary_server().expect("primary").port(),
        primary.port()
    );
    assert_eq!(set.replicas().expect("replicas"), vec![replica.addr()]);
    assert_eq!(set.replica().expect("replica"), replica.addr());
    assert_eq!(role(primary), "master");
    assert_eq!(role(replica), "slave");

    let addrs = set.sentinel_addrs();
    let urls = set.sentinel_urls();
    assert_eq!(addrs.len(), 3);
    for ((sentinel, addr), url) in set.sentinels().iter().zip(&addrs).zip(&urls) {
        assert_ne!(addr.port(), 6379);
        assert_eq!(*url, format!("redis://127.0.0.1:{}/", addr.port()));
        assert_eq!(role(sentinel), "sentinel");
        assert_eq!(reported_by(sentinel, "mymaster"), primary.addr());
        assert!(sentinel.dir().join("sentinel.conf").is_file());
    }

    set_replicated(primary, "k", "v");
    assert_eq!(replica.command(&["GET", "k"]).expect("GET"), "v");

    let ports: Vec<u16> = set
        .servers()
        .iter()
        .chain(set.sentinels())
        .map(RedisServer::port)
        .collect();
    drop(set);
    for port in ports {
        assert!(refuses(port), "port {port} still accepts after drop");
    }
}

#[test]
fn killed_primary_fails_over_to_the_replica() {
    let mut set = start();
    let old = set.primary().expect("primary");
    let replica = set.replica().expect("replica");
    let primary = set.primary_server().expect("primary");
    set_replicated(primary, "lock", "token");

    assert_eq!(set.kill_primary().expect("kill"), old);
    assert!(refuses(old.port()));
    let began = Instant::now();
    let new = set.wait_for_failover().expect("failover");
    eprintln!("sentinel failover after kill took {:.1?}", began.elapsed());
    assert_eq!(new, replica);
    for sentinel in set.sentinels() {
        assert_eq!(reported_by(sentinel, set.master_name()), new);
    }
    assert_eq!(set.primary().expect("primary"), new);
    let new_primary = set.primary_server().expect("new primary");
    assert_eq!(role(new_primary), "master");
    assert_eq!(new_primary.command(&["GET", "lock"]).expect("GET"), "token");

    // The old primary comes back as a replica of the new one.
    let began = Instant::now();
    set.start_again(0).expect("start again");
    eprintln!("old primary rejoined in {:.1?}", began.elapsed());
    assert_eq!(role(&set.servers()[0]), "slave");
    assert_eq!(
        set.servers()[0].command(&["GET", "lock"]).expect("GET"),
        "token"
    );
    assert_eq!(set.primary().expect("primary"), new);
}

#[test]
fn forced_failover_swaps_roles() {
    let set = start();
    let old = set.primary().expect("primary");
    let replica = set.replica().expect("replica");
    let began = Instant::now();
    let new = set.failover().expect("failover");
    eprintln!("SENTINEL FAILOVER took {:.1?}", began.elapsed());
    assert_eq!(new, replica);
    for sentinel in set.sentinels() {
        assert_eq!(reported_by(sentinel, set.master_name()), new);
    }
    assert_eq!(role(&set.servers()[1]), "master");
    assert_eq!(role(&set.servers()[0]), "slave");

    // And back: the sentinels may need a moment to see the old primary as a
    // usable replica; `failover` retries until they do.
    let began = Instant::now();
    assert_eq!(set.failover().expect("failover back"), old);
    eprintln!("second SENTINEL FAILOVER took {:.1?}", began.elapsed());
    assert_eq!(role(&set.servers()[0]), "master");
    assert_eq!(role(&set.servers()[1]), "slave");
}

#[test]
fn paused_primary_is_replaced_and_rejoins() {
    let set = start();
    let old = set.primary_index().expect("primary");
    let replica = set.replica().expect("replica");
    set.servers()[old].pause().expect("pause");
    let began = Instant::now();
    let new = set.wait_for_failover().expect("failover");
    eprintln!("sentinel failover after pause took {:.1?}", began.elapsed());
    assert_eq!(new, replica);

    set.servers()[old].resume().expect("resume");
    assert_eq!(set.wait_until_healthy().expect("healthy"), new);
    assert_eq!(role(&set.servers()[old]), "slave");
    assert_eq!(set.primary().expect("primary"), new);
}

#[test]
fn builder_validates() {
    let kind = |b: lock_testkit::RedisSentinelSetBuilder| b.start().expect_err("invalid").kind();
    assert_eq!(
        kind(RedisSentinelSet::builder().sentinels(0)),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(RedisSentinelSet::builder().quorum(4)),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(RedisSentinelSet::builder().master_name("my master")),
        io::ErrorKind::InvalidInput
    );
}

#[test]
fn sentinel_set_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<RedisSentinelSet>();
}
