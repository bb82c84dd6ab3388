//! `FaultProxy` against a real `redis-server`: each fault does what it says.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use lock_testkit::{FaultProxy, RedisServer};

/// How long a read waits before the test calls it "no answer".
const SILENT: Duration = Duration::from_millis(300);
/// Generous bound for things that must happen "at once".
const PROMPT: Duration = Duration::from_secs(2);

fn server() -> RedisServer {
    RedisServer::start().expect("start redis-server")
}

fn proxy(to: &RedisServer) -> FaultProxy {
    FaultProxy::start(to.addr()).expect("start proxy")
}

/// A raw RESP connection, so the test sees exactly which bytes arrive.
struct Raw(TcpStream);

impl Raw {
    fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect_timeout(&addr, PROMPT).expect("TCP connect to the proxy");
        stream
            .set_write_timeout(Some(PROMPT))
            .expect("write timeout");
        Raw(stream)
    }

    fn send(&mut self, line: &str) {
        self.0
            .write_all(format!("{line}\r\n").as_bytes())
            .expect("send");
    }

    /// Reads until a `\r\n` arrives, the peer closes (`Ok` with what came so
    /// far, possibly empty), or `wait` passes (`Err(TimedOut)`).
    fn read_line(&mut self, wait: Duration) -> io::Result<Vec<u8>> {
        let deadline = Instant::now() + wait;
        let mut got = Vec::new();
        let mut buf = [0_u8; 256];
        for _ in 0..1_000 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.0.set_read_timeout(Some(left))?;
            match self.0.read(&mut buf) {
                Ok(0) => return Ok(got),
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    if got.ends_with(b"\r\n") {
                        return Ok(got);
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(io::ErrorKind::TimedOut, "no complete reply"))
    }

    fn ping(&mut self, wait: Duration) -> io::Result<Vec<u8>> {
        self.send("PING");
        self.read_line(wait)
    }

    /// Whether the proxy closed this connection (EOF or reset) within `wait`.
    fn closed_within(&mut self, wait: Duration) -> bool {
        match self.read_line(wait) {
            Ok(bytes) => bytes.is_empty(),
            Err(e) => e.kind() != io::ErrorKind::TimedOut,
        }
    }
}

fn pong(reply: io::Result<Vec<u8>>) -> bool {
    matches!(reply, Ok(bytes) if bytes == b"+PONG\r\n")
}

fn timed_out(reply: &io::Result<Vec<u8>>) -> bool {
    matches!(reply, Err(e) if e.kind() == io::ErrorKind::TimedOut)
}

/// Polls `cond` every 10 ms for at most `PROMPT`.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PROMPT;
    for _ in 0..1_000 {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    cond()
}

#[test]
fn forwards_and_counts_connections() {
    let redis = server();
    let proxy = proxy(&redis);
    assert_eq!(
        proxy.url(),
        format!("redis://127.0.0.1:{}", proxy.addr().port())
    );
    assert_ne!(proxy.addr(), redis.addr());
    assert_eq!(proxy.upstream(), redis.addr());

    let client = redis::Client::open(proxy.url()).expect("client");
    let mut con = client.get_connection_with_timeout(PROMPT).expect("connect");
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("through")
        .query(&mut con)
        .expect("SET");
    assert_eq!(redis.command(&["GET", "k"]).expect("GET direct"), "through");
    assert!(eventually(|| proxy.connections() == 1), "{proxy:?}");
    drop(con);
    assert!(eventually(|| proxy.connections() == 0), "{proxy:?}");
}

#[test]
fn latency_delays_every_round_trip_until_healed() {
    let redis = server();
    let proxy = proxy(&redis);
    let mut raw = Raw::connect(proxy.addr());
    assert!(pong(raw.ping(PROMPT)));

    let one_way = Duration::from_millis(150);
    proxy.set_latency(one_way);
    for _ in 0..2 {
        let started = Instant::now();
        assert!(pong(raw.ping(PROMPT)));
        let took = started.elapsed();
        assert!(
            took >= 2 * one_way,
            "round trip {took:?} with {one_way:?} each way"
        );
    }

    proxy.heal();
    let started = Instant::now();
    assert!(pong(raw.ping(PROMPT)));
    let took = started.elapsed();
    assert!(took < 2 * one_way, "round trip {took:?} after heal");
}

#[test]
fn latency_keeps_pipelined_requests_in_flight() {
    let redis = server();
    let proxy = proxy(&redis);
    let one_way = Duration::from_millis(200);
    proxy.set_latency(one_way);
    let mut raw = Raw::connect(proxy.addr());
    let started = Instant::now();
    // Three requests sent in three separate writes, then three replies read:
    // delayed side by side, not one after the other.
    for _ in 0..3 {
        raw.send("PING");
        thread::sleep(Duration::from_millis(5));
    }
    let mut replies = Vec::new();
    for _ in 0..10 {
        if replies.len() >= 3 * b"+PONG\r\n".len() {
            break;
        }
        replies.extend(raw.read_line(PROMPT).expect("replies"));
    }
    assert_eq!(replies, b"+PONG\r\n+PONG\r\n+PONG\r\n");
    let took = started.elapsed();
    assert!(took >= 2 * one_way, "{took:?}");
    assert!(
        took < 6 * one_way,
        "pipelined requests were serialised: {took:?}"
    );
}

#[test]
fn stall_holds_bytes_and_heal_delivers_them() {
    let redis = server();
    let proxy = proxy(&redis);
    let mut open = Raw::connect(proxy.addr());
    assert!(pong(open.ping(PROMPT)));

    proxy.stall();
    assert!(
        timed_out(&open.ping(SILENT)),
        "a stalled connection answered"
    );
    // New connections are accepted (no refusal) but stay silent too.
    let mut fresh = Raw::connect(proxy.addr());
    assert!(timed_out(&fresh.ping(SILENT)));
    assert!(eventually(|| proxy.connections() == 2), "{proxy:?}");

    proxy.heal();
    // The held request reaches the server, its reply the client: nothing is lost.
    assert_eq!(open.read_line(PROMPT).expect("held reply"), b"+PONG\r\n");
    assert_eq!(fresh.read_line(PROMPT).expect("held reply"), b"+PONG\r\n");
    assert!(pong(open.ping(PROMPT)));
}

#[test]
fn partition_times_out_then_heal_closes_the_connections_it_held() {
    let redis = server();
    let proxy = proxy(&redis);
    let mut open = Raw::connect(proxy.addr());
    assert!(pong(open.ping(PROMPT)));

    proxy.partition();
    assert!(
        timed_out(&open.ping(SILENT)),
        "a partitioned connection answered"
    );
    let mut during = Raw::connect(proxy.addr());
    assert!(
        timed_out(&during.ping(SILENT)),
        "connect must succeed, PING time out"
    );
    let client = redis::Client::open(proxy.url()).expect("client");
    let err = client
        .get_connection_with_timeout(SILENT)
        .and_then(|mut con| {
            con.set_read_timeout(Some(SILENT))?;
            redis::cmd("PING").query::<String>(&mut con)
        })
        .expect_err("PING through a partition");
    assert!(err.is_timeout(), "expected a timeout, not a refusal: {err}");

    proxy.heal();
    assert!(
        open.closed_within(PROMPT),
        "connection held through the partition stays open"
    );
    assert!(during.closed_within(PROMPT));
    assert!(pong(Raw::connect(proxy.addr()).ping(PROMPT)));
}

#[test]
fn a_partition_drops_the_requests_it_held() {
    let redis = server();
    let proxy = proxy(&redis);
    let mut open = Raw::connect(proxy.addr());
    assert!(pong(open.ping(PROMPT)));

    proxy.partition();
    open.send("SET held-back 1");
    let mut during = Raw::connect(proxy.addr());
    during.send("SET held-back-new 1");
    thread::sleep(Duration::from_millis(50));
    proxy.heal();
    assert!(open.closed_within(PROMPT));
    assert!(during.closed_within(PROMPT));
    for key in ["held-back", "held-back-new"] {
        assert_eq!(
            redis.command(&["EXISTS", key]).expect("EXISTS"),
            "0",
            "{key} reached the server after the partition healed"
        );
    }
}

#[test]
fn a_partition_healed_at_once_still_closes_its_connections() {
    let redis = server();
    let proxy = proxy(&redis);
    let mut open = Raw::connect(proxy.addr());
    assert!(pong(open.ping(PROMPT)));
    proxy.partition();
    proxy.heal();
    assert!(open.closed_within(PROMPT));
}

#[test]
fn refuse_closes_open_connections_and_fails_new_ones_fast() {
    let redis = server();
    let proxy = proxy(&redis);
    let mut open = Raw::connect(proxy.addr());
    assert!(pong(open.ping(PROMPT)));

    proxy.refuse();
    assert!(open.closed_within(PROMPT));
    let started = Instant::now();
    let client = redis::Client::open(proxy.url()).expect("client");
    let result = client
        .get_connection_with_timeout(PROMPT)
        .and_then(|mut con| {
            con.set_read_timeout(Some(PROMPT))?;
            redis::cmd("PING").query::<String>(&mut con)
        });
    assert!(result.is_err(), "PING through a refusing proxy: {result:?}");
    assert!(
        started.elapsed() < PROMPT,
        "refusal took {:?}",
        started.elapsed()
    );
    assert!(eventually(|| proxy.connections() == 0), "{proxy:?}");

    proxy.heal();
    assert!(pong(Raw::connect(proxy.addr()).ping(PROMPT)));
}

#[test]
fn reset_connections_closes_open_ones_once() {
    let redis = server();
    let proxy = proxy(&redis);
    let mut a = Raw::connect(proxy.addr());
    let mut b = Raw::connect(proxy.addr());
    assert!(pong(a.ping(PROMPT)) && pong(b.ping(PROMPT)));

    proxy.reset_connections();
    assert!(a.closed_within(PROMPT));
    assert!(b.closed_within(PROMPT));
    assert!(pong(Raw::connect(proxy.addr()).ping(PROMPT)));
}

#[test]
fn sever_silences_open_connections_for_good_and_forwards_new_ones() {
    let redis = server();
    let proxy = proxy(&redis);
    let mut open = Raw::connect(proxy.addr());
    assert!(pong(open.ping(PROMPT)));

    proxy.sever();
    // No answer, and no close either: a half-open connection.
    assert!(
        timed_out(&open.ping(SILENT)),
        "a severed connection answered"
    );
    assert!(
        !open.closed_within(SILENT),
        "a severed connection was closed"
    );
    // New connections work, and a heal does not revive the severed one.
    assert!(pong(Raw::connect(proxy.addr()).ping(PROMPT)));
    proxy.heal();
    assert!(timed_out(&open.ping(SILENT)), "healed a severed connection");
    // Its request never reached the server.
    open.send("SET severed 1");
    thread::sleep(Duration::from_millis(50));
    assert_eq!(redis.command(&["EXISTS", "severed"]).expect("EXISTS"), "0");
    // A reset still closes it.
    proxy.reset_connections();
    assert!(open.closed_within(PROMPT));
}

#[test]
fn cut_next_reply_truncates_one_reply_and_closes_its_connection() {
    let redis = server();
    let value = "v".repeat(100);
    redis.command(&["SET", "big", &value]).expect("SET");
    let proxy = proxy(&redis);
    let mut raw = Raw::connect(proxy.addr());
    assert!(pong(raw.ping(PROMPT)));

    proxy.cut_next_reply(10);
    raw.send("GET big");
    let mut got = Vec::new();
    let mut buf = [0_u8; 256];
    raw.0.set_read_timeout(Some(PROMPT)).expect("timeout");
    for _ in 0..100 {
        match raw.0.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    assert_eq!(got, b"$100\r\nvvvv", "the first 10 bytes, then the end");

    // Only one reply is cut; through a `redis` client the same fault is an error.
    let client = redis::Client::open(proxy.url()).expect("client");
    let mut con = client.get_connection_with_timeout(PROMPT).expect("connect");
    con.set_read_timeout(Some(PROMPT)).expect("timeout");
    let whole: String = redis::cmd("GET").arg("big").query(&mut con).expect("GET");
    assert_eq!(whole, value);
    proxy.cut_next_reply(3);
    let err = redis::cmd("GET")
        .arg("big")
        .query::<String>(&mut con)
        .expect_err("a reply cut mid-way");
    assert!(!err.is_timeout(), "a cut reply must fail at once: {err}");
}

#[test]
fn set_upstream_follows_a_server_to_another_port() {
    let mut first = server();
    first.command(&["SET", "who", "first"]).expect("SET");
    let proxy = proxy(&first);
    let get_who = || -> String {
        let client = redis::Client::open(proxy.url()).expect("client");
        let mut con = client.get_connection_with_timeout(PROMPT).expect("connect");
        con.set_read_timeout(Some(PROMPT)).expect("timeout");
        redis::cmd("GET").arg("who").query(&mut con).expect("GET")
    };
    assert_eq!(get_who(), "first");

    first.stop();
    let second = server();
    second.command(&["SET", "who", "second"]).expect("SET");
    proxy.set_upstream(second.addr());
    assert_eq!(proxy.upstream(), second.addr());
    assert_eq!(get_who(), "second");
}

#[test]
fn dropping_the_proxy_closes_its_connections() {
    let redis = server();
    let proxy = proxy(&redis);
    let addr = proxy.addr();
    let mut open = Raw::connect(addr);
    assert!(pong(open.ping(PROMPT)));
    drop(proxy);
    assert!(open.closed_within(PROMPT));
    assert!(
        TcpStream::connect_timeout(&addr, SILENT).is_err(),
        "still listening"
    );
}
