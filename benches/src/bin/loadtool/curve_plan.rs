//! What the cost curves are asked for and what they bring back (`--only c1,c2`; see
//! [`crate::curves`]): the options, the plan, the backends and the run's record. A leaf: the
//! command line, the curves' runner, their servers, tables and charts all read it, and it reads
//! none of them.

use std::time::Duration;

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::curve_waiters::WaitersPoint;
use crate::renewal::{Backend, RenewalRun};

/// The cost curves' options.
#[derive(Debug, Clone, Args)]
pub(crate) struct CurveArgs {
    /// C1: the numbers of renewed locks held, one point each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000,3000,10000,30000,100000"
    )]
    pub(crate) curve_locks: Vec<usize>,

    /// C1: the lease, seconds (CPU is also reported scaled to 30 s leases). etcd counts
    /// leases in whole seconds and renews at 10 s or longer (E5).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub(crate) curve_lease: f64,

    /// C1: lease periods each point holds its locks for.
    #[arg(long, default_value_t = 3)]
    pub(crate) curve_periods: u32,

    /// C1: the backends, in this order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "redis,valkey,postgres,etcd,mysql"
    )]
    pub(crate) curve_backends: Vec<CurveBackend>,

    /// C2: the numbers of waiters on one name, one point each.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000,10000")]
    pub(crate) curve_waiters: Vec<usize>,

    /// C2: the backends, in this order (Redis, PostgreSQL, etcd).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "redis,postgres,etcd"
    )]
    pub(crate) curve_waiter_backends: Vec<CurveBackend>,
}

/// A backend of the curves, with the server it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum CurveBackend {
    Redis,
    Valkey,
    Postgres,
    Etcd,
    Mysql,
}

impl CurveBackend {
    /// Its name in tables and charts.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Redis => "Redis",
            Self::Valkey => "Valkey",
            Self::Postgres => "PostgreSQL",
            Self::Etcd => "etcd",
            Self::Mysql => "MariaDB",
        }
    }

    pub(crate) fn renewal_backend(self) -> Backend {
        match self {
            Self::Redis | Self::Valkey => Backend::Redis,
            Self::Postgres => Backend::PostgresTable,
            Self::Etcd => Backend::Etcd,
            Self::Mysql => Backend::Mysql,
        }
    }
}

/// The curves' points, as the options give them.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CurvePlan {
    pub(crate) locks: Vec<usize>,
    #[serde(serialize_with = "crate::stats::secs")]
    pub(crate) lease: Duration,
    pub(crate) periods: u32,
    pub(crate) backends: Vec<CurveBackend>,
    pub(crate) waiters: Vec<usize>,
    pub(crate) waiter_backends: Vec<CurveBackend>,
}

impl CurveArgs {
    /// The plan of these options, checked.
    pub(crate) fn plan(&self) -> Result<CurvePlan, String> {
        if self.curve_locks.iter().any(|n| !(1..=200_000).contains(n)) {
            return Err("--curve-locks: each between 1 and 200,000".into());
        }
        if self.curve_waiters.iter().any(|n| !(1..=20_000).contains(n)) {
            return Err("--curve-waiters: each between 1 and 20,000".into());
        }
        if !(1.0..=120.0).contains(&self.curve_lease) || !(1..=10).contains(&self.curve_periods) {
            return Err("--curve-lease: 1 to 120 s; --curve-periods: 1 to 10".into());
        }
        Ok(CurvePlan {
            locks: self.curve_locks.clone(),
            lease: Duration::from_secs_f64(self.curve_lease),
            periods: self.curve_periods,
            backends: self.curve_backends.clone(),
            waiters: self.curve_waiters.clone(),
            waiter_backends: self.curve_waiter_backends.clone(),
        })
    }
}

/// One backend's held-locks curve: a point per number of locks.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HeldCurve {
    pub(crate) backend: CurveBackend,
    pub(crate) server: String,
    pub(crate) points: Vec<RenewalRun>,
    /// Why the curve stopped early (a point failed; larger ones were not tried).
    pub(crate) stopped: Option<String>,
}

/// One backend's waiters curve.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WaitersCurve {
    pub(crate) backend: CurveBackend,
    pub(crate) points: Vec<WaitersPoint>,
    pub(crate) stopped: Option<String>,
}

/// Everything C1 and C2 measured.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct CurvesRun {
    pub(crate) held: Vec<HeldCurve>,
    pub(crate) waiters: Vec<WaitersCurve>,
}
