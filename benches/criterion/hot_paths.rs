//! Criterion benches of distlock's hot paths that need no network to be meaningful: key
//! rendering and cluster-slot computation, token generation, and the `Locker`'s bookkeeping
//! over the in-process `MemoryLock` (so what is measured is the policy layer, not I/O).
//!
//! `cargo bench -p distlock-bench --bench hot_paths`

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use lock_core::backend::{Attempt, Lock};
use lock_core::{Locker, MemoryLock, Token};
use lock_redis::{RedisLock, key_slot};

/// Names of the three shapes that take different paths through the key layout.
fn names() -> [(&'static str, String); 3] {
    [
        ("plain", "order:42".to_owned()),
        ("hash-tagged", "{tenant-7}:order:42".to_owned()),
        ("1 KiB", "n".repeat(1024)),
    ]
}

fn keys(c: &mut Criterion) {
    // Building a RedisLock makes no connection; only key rendering is exercised here.
    let lock = RedisLock::from_url("redis://127.0.0.1:1/").expect("a valid URL");
    let mut group = c.benchmark_group("keys");
    for (shape, name) in names() {
        group.bench_with_input(BenchmarkId::new("key_slot", shape), &name, |b, name| {
            b.iter(|| key_slot(black_box(name)));
        });
        group.bench_with_input(
            BenchmarkId::new("key + fence key + release channel", shape),
            &name,
            |b, name| {
                b.iter(|| {
                    let name = black_box(name.as_str());
                    (
                        lock.key(name),
                        lock.fence_key(name),
                        lock.release_channel(name),
                    )
                });
            },
        );
    }
    group.finish();
}

fn tokens(c: &mut Criterion) {
    let mut group = c.benchmark_group("token");
    group.bench_function("Token::generate (OS CSPRNG)", |b| {
        b.iter(|| Token::generate().expect("os rng"));
    });
    let token = Token::generate().expect("os rng");
    group.bench_function("to_hex", |b| b.iter(|| black_box(&token).to_hex()));
    group.bench_function("generate + to_hex", |b| {
        b.iter(|| Token::generate().expect("os rng").to_hex());
    });
    group.finish();
}

fn locker(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let ttl = Duration::from_secs(30);
    let mut group = c.benchmark_group("locker over MemoryLock");

    let memory = MemoryLock::new();
    group.bench_function("backend only: try_acquire + release", |b| {
        b.to_async(&runtime).iter(|| async {
            let token = Token::generate().expect("os rng");
            match memory.try_acquire("bench", token, ttl).await {
                Ok(Attempt::Acquired(lease)) => memory.release(&lease).await.expect("release"),
                other => panic!("the lock should be free: {other:?}"),
            }
        });
    });

    let locker = Locker::new(MemoryLock::new());
    group.bench_function("try_acquire + release, fixed ttl", |b| {
        b.to_async(&runtime).iter(|| async {
            let guard = locker.lock("bench").fixed_ttl(ttl).try_acquire().await;
            let guard = guard.expect("no error").expect("the lock should be free");
            guard.release().await.expect("release");
        });
    });
    group.bench_function("try_acquire + release, renewed lease", |b| {
        b.to_async(&runtime).iter(|| async {
            let guard = locker.lock("bench").try_acquire().await;
            let guard = guard.expect("no error").expect("the lock should be free");
            guard.release().await.expect("release");
        });
    });
    group.bench_function("acquire (waiting path, uncontended) + release", |b| {
        b.to_async(&runtime).iter(|| async {
            let guard = locker.lock("bench").acquire().await.expect("acquire");
            guard.release().await.expect("release");
        });
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3));
    targets = keys, tokens, locker
}
criterion_main!(benches);
