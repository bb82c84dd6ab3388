//! M1 and M2: S1 (one task) and S2 (S2's tasks, each its own name) on one throwaway MariaDB
//! (lock-testkit's), in rounds that interleave distlock's `MysqlLock` through its `Locker`,
//! the `MysqlLock` alone (`Lock::try_acquire` + `Lock::release`), and the hand-written
//! lease-table lock (`distlock_bench::HandMysqlLock`) on the same server and the same client
//! (sqlx's MySQL pool). The server's own CPU is not probed: client CPU only.

use std::sync::Arc;
use std::time::Duration;

use distlock_bench::HandMysqlLock;
use lock_core::Locker;
use lock_mysql::MysqlLock;
use lock_testkit::MariadbServer;
use serde::Serialize;
use tokio::runtime::Runtime;

use crate::cli::{Part, Plan};
use crate::cycles::{Client, CycleRun};
use crate::info::Probe;
use crate::interleave;
use crate::progress::Progress;
use crate::stats::ratio;
use crate::step::block;

/// distlock's lease table through its `Locker`.
pub(crate) const DISTLOCK: &str = "distlock mysql (table)";
/// The `MysqlLock` alone, without the `Locker`.
pub(crate) const BACKEND: &str = "MysqlLock alone";
/// The hand-written lease-table lock.
pub(crate) const HAND: &str = "hand-written (sqlx)";
/// Who runs M1 and M2, in this order.
pub(crate) const CLIENTS: [&str; 3] = [DISTLOCK, BACKEND, HAND];

/// Pool size of every client: enough for S2's tasks.
const POOL: u32 = 64;

/// What M1 and M2 measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct MysqlRun {
    /// `VERSION()`.
    pub(crate) version: String,
    pub(crate) m1: Vec<CycleRun>,
    pub(crate) m2: Vec<CycleRun>,
}

/// Starts MariaDB, runs M1 and M2 as planned, stops it.
pub(crate) fn run(
    plan: &Plan,
    runtime: &Runtime,
    progress: &mut Progress,
) -> Result<MysqlRun, String> {
    progress.next();
    let server = MariadbServer::start().map_err(|e| format!("starting MariaDB: {e}"))?;
    let url = server.url();
    let (clients, version) = block(runtime, Duration::ZERO, clients(&url))??;
    let mut out = MysqlRun {
        version,
        m1: Vec::new(),
        m2: Vec::new(),
    };
    let mut probe = Probe::client_only();
    if plan.has(Part::M1) {
        out.m1 = interleave::rounds(
            &interleave::Part {
                scenario: "M1",
                tasks: 1,
                labels: &CLIENTS,
                separator: ":",
            },
            plan,
            runtime,
            progress,
            &clients,
            &mut probe,
        )?;
    }
    if plan.has(Part::M2) {
        let tasks = plan.s2_tasks;
        out.m2 = interleave::rounds(
            &interleave::Part {
                scenario: "M2",
                tasks,
                labels: &CLIENTS,
                separator: ":",
            },
            plan,
            runtime,
            progress,
            &clients,
            &mut probe,
        )?;
    }
    drop(server);
    Ok(out)
}

/// The three clients on `url` (the lease table migrated) and the server's version.
async fn clients(url: &str) -> Result<(Vec<Client>, String), String> {
    let lock = || {
        MysqlLock::builder()
            .url(url)
            .pool_size(POOL)
            .build()
            .map_err(|e| e.to_string())
    };
    let table = lock()?;
    table.migrate().await.map_err(|e| e.to_string())?;
    let version: String = lock_mysql::sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(table.pool())
        .await
        .map_err(|e| e.to_string())?;
    let hand = HandMysqlLock::connect(url, POOL)
        .await
        .map_err(|e| e.to_string())?;
    Ok((
        vec![
            Client::Locker(Locker::new(table), None),
            Client::Backend(Arc::new(lock()?)),
            Client::HandMysql(hand),
        ],
        version,
    ))
}

/// M1's and M2's tables, with distlock's throughput as a share of the hand-written lock's.
pub(crate) fn report(run: Option<&MysqlRun>) {
    let Some(run) = run else {
        return;
    };
    for (runs, title) in [
        (&run.m1, "M1 uncontended (1 task)"),
        (&run.m2, "M2 parallel (each task its own name)"),
    ] {
        if runs.is_empty() {
            continue;
        }
        println!(
            "\n{title} on MariaDB {}: acquire + release cycles",
            run.version
        );
        let rows: Vec<&CycleRun> = runs.iter().collect();
        println!(
            "{}",
            crate::tables::cycle_table(&rows, "server µs/cycle (not probed)", |c| c
                .server_cpu_us_per_op)
        );
        let find = |client: &str| runs.iter().find(|r| r.client == client);
        if let (Some(d), Some(h)) = (find(DISTLOCK), find(HAND)) {
            println!(
                "  distlock: {:.2}× the hand-written lock ({:.0} of {:.0} cycles/s)",
                ratio(d.per_second, h.per_second),
                d.per_second,
                h.per_second
            );
        }
    }
}
