//! Criterion bench of S1 against a local Redis: one task takes and releases one free lock,
//! through distlock's `Locker`, through the `RedisLock` backend alone, and through the
//! hand-written redis-rs lock the load tool uses as its baseline. The server is a throwaway
//! redis-server that lock-testkit starts on a free loopback port (and kills by PID at the end);
//! without a redis-server the bench says so and measures nothing.
//!
//! `cargo bench -p distlock-bench --bench redis_s1` (the load tool gives the same figures with
//! their baselines: `cargo run --release -p distlock-bench --bin loadtool -- --only baseline,s1`)

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use distlock_bench::HandLock;
use lock_core::backend::{Attempt, Lock};
use lock_core::{DEFAULT_LEASE, Locker, Token};
use lock_redis::RedisLock;
use lock_testkit::RedisServer;

fn s1(c: &mut Criterion) {
    let server = match RedisServer::start() {
        Ok(server) => server,
        Err(error) => {
            eprintln!("redis_s1: no redis-server ({error}); skipped (run scripts/ensure-redis.sh)");
            return;
        }
    };
    let url = server.url();
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let mut group = c.benchmark_group("S1 uncontended acquire + release (loopback Redis)");

    let hand = runtime
        .block_on(HandLock::connect(&url))
        .expect("connect the hand-written lock");
    group.bench_function("hand-written (SET NX PX + EVALSHA)", |b| {
        b.to_async(&runtime).iter(|| async {
            let token = hand.try_acquire("s1:hand", DEFAULT_LEASE).await;
            let token = token.expect("no error").expect("the lock should be free");
            hand.release("s1:hand", &token).await.expect("release")
        });
    });

    let backend: Arc<dyn Lock> = Arc::new(RedisLock::from_url(&url).expect("a valid URL"));
    group.bench_function("distlock backend only (RedisLock)", |b| {
        b.to_async(&runtime).iter(|| async {
            let token = Token::generate().expect("os rng");
            match backend
                .try_acquire("s1:backend", token, DEFAULT_LEASE)
                .await
            {
                Ok(Attempt::Acquired(lease)) => backend.release(&lease).await.expect("release"),
                other => panic!("the lock should be free: {other:?}"),
            }
        });
    });

    let locker = Locker::new(RedisLock::from_url(&url).expect("a valid URL"));
    group.bench_function("distlock (Locker, default lease)", |b| {
        b.to_async(&runtime).iter(|| async {
            let guard = locker.lock("s1:distlock").try_acquire().await;
            let guard = guard.expect("no error").expect("the lock should be free");
            guard.release().await.expect("release");
        });
    });
    group.finish();
    drop(runtime);
    drop(server);
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = s1
}
criterion_main!(benches);
