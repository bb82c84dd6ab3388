//! Runs the suite's table rows: each case on a fresh server, then the checks every row shares.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use lock_core::{LockError, Locker, TimeoutPhase};
use lock_redis::RedisLock;
use lock_testkit::{FaultProxy, RedisServer};
use redis::aio::MultiplexedConnection;

/// The subject lock's connect and command timeouts: failures show within these.
pub(crate) const TIMEOUT: Duration = Duration::from_millis(500);
/// Longest any case may take, faults and repairs included; past it the case hung.
const CASE_BOUND: Duration = Duration::from_secs(10);
/// How long a lock a case left behind may take to go: cleanup after a failed acquire runs in
/// the background, and a write delivered late (after a stall or a pause) lives out its TTL,
/// which fault cases keep at [`SHORT_TTL`].
const LEAK_GRACE: Duration = Duration::from_secs(3);
/// The TTL fault cases lock with, so a late-delivered grant expires within [`LEAK_GRACE`].
pub(crate) const SHORT_TTL: Duration = Duration::from_secs(1);
/// A fencing counter key ends with this; counters are kept by design, not leaked.
const FENCE_SUFFIX: &str = ":distlock-fence";

/// What a case's operation answered when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The lock was granted (and released again by the case).
    Granted,
    /// The lock was busy (`try_acquire` gave `None`).
    Busy,
    /// A release answered this (`false`: the lease was no longer ours).
    Released(bool),
}

/// What a case's operation gave.
pub(crate) type Outcome = Result<Answer, LockError>;

/// What a row expects.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Expect {
    /// Success with this answer.
    Ok(Answer),
    /// `LockError::InvalidInput`.
    InvalidInput,
    /// `LockError::WrongType`.
    WrongType,
    /// `LockError::NotOwned`.
    NotOwned,
    /// `LockError::Timeout` in this phase.
    Timeout(TimeoutPhase),
    /// `LockError::Backend` that is (or is not) retryable.
    Backend {
        /// `LockError::is_retryable`.
        retryable: bool,
    },
}

impl Expect {
    fn matches(self, outcome: &Outcome) -> bool {
        match (self, outcome) {
            (Self::Ok(want), Ok(got)) => want == *got,
            (Self::InvalidInput, Err(LockError::InvalidInput { reason })) => !reason.is_empty(),
            (Self::WrongType, Err(LockError::WrongType { .. })) => true,
            (Self::NotOwned, Err(LockError::NotOwned { .. })) => true,
            (Self::Timeout(want), Err(LockError::Timeout { phase, .. })) => want == *phase,
            (Self::Backend { retryable }, Err(err @ LockError::Backend { .. })) => {
                err.is_retryable() == retryable
            }
            _ => false,
        }
    }
}

/// The server a case runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setup {
    /// A plain server; the subject connects directly.
    Plain,
    /// A server with a password (`s3cret`); the subject has the right one.
    Password,
    /// A plain server behind a [`FaultProxy`]; the subject connects through the proxy.
    Proxied,
}

/// After the case, who must still be able to lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    /// The case's own locker: the fault was transient and it recovered.
    Subject,
    /// A correctly configured locker on the same server: the case's locker was misconfigured
    /// on purpose (wrong password, no rights), and the server must be unharmed.
    Server,
}

/// Everything a case may use. Shared with the case by `Arc` so a case is a plain function.
pub(crate) struct Env {
    server: Mutex<RedisServer>,
    /// The direct URL, credentials included.
    pub(crate) url: String,
    /// The proxy in front of the server for [`Setup::Proxied`].
    pub(crate) proxy: Option<FaultProxy>,
    /// The locker under test, with [`TIMEOUT`]s (through the proxy when there is one).
    pub(crate) subject: Locker,
}

impl Env {
    fn new(setup: Setup) -> Self {
        let server = match setup {
            Setup::Password => RedisServer::builder().password("s3cret").start(),
            Setup::Plain | Setup::Proxied => RedisServer::start(),
        }
        .expect("start redis-server");
        let url = server.url();
        let proxy = (setup == Setup::Proxied)
            .then(|| FaultProxy::start(server.addr()).expect("start the fault proxy"));
        let subject_url = proxy.as_ref().map_or_else(|| url.clone(), FaultProxy::url);
        Self {
            server: Mutex::new(server),
            subject: Locker::new(lock_at(&subject_url)),
            url,
            proxy,
        }
    }

    /// The server, to stop, start, pause or query it. Not to be held across an await.
    pub(crate) fn server(&self) -> MutexGuard<'_, RedisServer> {
        self.server.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The proxy of a [`Setup::Proxied`] case.
    pub(crate) fn proxy(&self) -> &FaultProxy {
        self.proxy.as_ref().expect("a Proxied case")
    }

    /// Another locker, connected directly and correctly: a second client.
    pub(crate) fn other(&self) -> Locker {
        Locker::new(lock_at(&self.url))
    }

    /// A direct connection for planting keys and looking at the server.
    pub(crate) async fn raw(&self) -> MultiplexedConnection {
        redis::Client::open(self.url.as_str())
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect")
    }

    /// Runs one command on a direct connection, panicking on failure (setup steps only).
    pub(crate) async fn cmd(&self, args: &[&str]) {
        let mut conn = self.raw().await;
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query_async::<redis::Value>(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }
}

/// A lock with the suite's short timeouts, and no store grace period: the cases that restart
/// the server are about the error they give (the grace is `grace.rs`'s subject). No key
/// tracking either: its connection rides the same proxy, and the proxy's "cut the next
/// reply" would hit whichever connection answers first, not the operation under test
/// (tracking's own faults are `loss_tracking.rs`'s subject).
pub(crate) fn lock_at(url: &str) -> RedisLock {
    RedisLock::builder()
        .url(url)
        .connect_timeout(TIMEOUT)
        .command_timeout(TIMEOUT)
        .grace(Duration::ZERO)
        .track_losses(false)
        .build()
        .expect("valid URL")
}

/// A case: given its environment, do the bad thing and report what the operation gave. A case
/// repairs what it broke (restarts, resumes, heals) before it returns.
pub(crate) type Run = fn(Arc<Env>) -> BoxFuture<'static, Outcome>;

/// Writes a case body as a [`Run`].
macro_rules! run {
    (|$env:ident| $body:block) => {
        (|$env: std::sync::Arc<$crate::bad_input_suite::harness::Env>| -> futures::future::BoxFuture<'static, $crate::bad_input_suite::harness::Outcome> {
            Box::pin(async move $body)
        }) as $crate::bad_input_suite::harness::Run
    };
}

/// One row of the table.
pub(crate) struct Case {
    /// What the case is, for the report.
    pub(crate) name: &'static str,
    /// The bad input or the fault, in words.
    pub(crate) input: &'static str,
    /// The server it runs against.
    pub(crate) setup: Setup,
    /// The typed answer it must give.
    pub(crate) expect: Expect,
    /// Who must be able to lock afterwards.
    pub(crate) after: After,
    /// The case itself.
    pub(crate) run: Run,
}

/// A row on a plain server after which its own locker must work; see [`Case::on`] and
/// [`Case::then`] for the others.
pub(crate) fn row(name: &'static str, input: &'static str, expect: Expect, run: Run) -> Case {
    Case {
        name,
        input,
        setup: Setup::Plain,
        expect,
        after: After::Subject,
        run,
    }
}

impl Case {
    /// Runs the case against `setup`'s server.
    pub(crate) fn on(self, setup: Setup) -> Self {
        Self { setup, ..self }
    }

    /// After the case, `after` must be able to lock.
    pub(crate) fn then(self, after: After) -> Self {
        Self { after, ..self }
    }
}

/// Runs every case in turn, each on its own server, and fails listing every row that broke a
/// rule, with a table of what each row gave.
pub(crate) async fn run_table(table: &str, cases: Vec<Case>) {
    let mut failures = Vec::new();
    let mut report = format!("\n{table}: {} cases\n", cases.len());
    for case in cases {
        let started = Instant::now();
        let (got, problems) = run_case(&case).await;
        report.push_str(&format!(
            "  {:<48} {:<10} {:>6} ms  {}\n",
            case.name,
            if problems.is_empty() { "ok" } else { "FAILED" },
            started.elapsed().as_millis(),
            got
        ));
        failures.extend(problems.into_iter().map(|p| format!("{}: {p}", case.name)));
    }
    eprintln!("{report}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

async fn run_case(case: &Case) -> (String, Vec<String>) {
    let env = Arc::new(Env::new(case.setup));
    let mut problems = Vec::new();
    let started = Instant::now();
    let outcome = tokio::time::timeout(
        CASE_BOUND,
        AssertUnwindSafe((case.run)(Arc::clone(&env))).catch_unwind(),
    )
    .await;
    let got = match outcome {
        Err(_) => {
            problems.push(format!("hung: no answer within {CASE_BOUND:?}"));
            return ("(hung)".into(), problems);
        }
        Ok(Err(panic)) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            problems.push(format!("panicked: {message}"));
            return ("(panic)".into(), problems);
        }
        Ok(Ok(outcome)) => outcome,
    };
    let shown = match &got {
        Ok(answer) => format!("Ok({answer:?})"),
        Err(err) => short(err),
    };
    if !case.expect.matches(&got) {
        problems.push(format!("expected {:?}, got {got:?}", case.expect));
    }
    if let Some(leaked) = leaked_locks(&env).await {
        problems.push(format!("lock keys left behind: {leaked:?}"));
    }
    let recovered = match case.after {
        After::Subject => env.subject.clone(),
        After::Server => env.other(),
    };
    if let Err(err) = still_works(&recovered).await {
        problems.push(format!(
            "the {:?} cannot lock afterwards: {err:?}",
            case.after
        ));
    }
    if started.elapsed() > CASE_BOUND {
        problems.push(format!("took {:?}", started.elapsed()));
    }
    (shown, problems)
}

/// The error's variant with its telling fields, for the report.
fn short(err: &LockError) -> String {
    match err {
        LockError::Backend { op, retryable, .. } => format!("Backend({op}, retryable={retryable})"),
        LockError::Timeout { phase, .. } => format!("Timeout({phase:?})"),
        other => {
            let text = format!("{other:?}");
            text.split([' ', '{', '('])
                .next()
                .unwrap_or_default()
                .to_owned()
        }
    }
}

async fn still_works(locker: &Locker) -> Result<(), LockError> {
    let guard = locker
        .lock("suite:afterwards")
        .fixed_ttl(Duration::from_secs(5))
        .wait(Duration::from_secs(3))
        .await?;
    guard.release().await
}

/// Lock keys on the server — strings holding `dl:` and a 32-hex-digit token, what distlock
/// writes —
/// that are still there after [`LEAK_GRACE`]. Fencing counters and keys a case planted (of
/// other types or values) are not locks.
async fn leaked_locks(env: &Env) -> Option<Vec<String>> {
    let mut conn = env.raw().await;
    let deadline = Instant::now() + LEAK_GRACE;
    loop {
        let locks = token_keys(&mut conn).await;
        if locks.is_empty() {
            return None;
        }
        if Instant::now() >= deadline {
            return Some(locks);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn token_keys(conn: &mut MultiplexedConnection) -> Vec<String> {
    let mut found = Vec::new();
    let mut cursor = 0_u64;
    // Bounded: a case leaves a handful of keys; 1,000 SCAN pages would be millions.
    for _ in 0..1_000 {
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1_000)
            .query_async(conn)
            .await
            .expect("SCAN");
        for key in keys {
            let shown = String::from_utf8_lossy(&key).into_owned();
            if shown.ends_with(FENCE_SUFFIX) {
                continue;
            }
            let value: redis::RedisResult<Option<String>> =
                redis::cmd("GET").arg(&key).query_async(conn).await;
            // WRONGTYPE: a planted hash, list, ...; not a lock.
            if let Ok(Some(value)) = value
                && let Some(hex) = value.strip_prefix(lock_redis::TOKEN_PREFIX)
                && hex.len() == 32
                && hex.bytes().all(|b| b.is_ascii_hexdigit())
            {
                found.push(shown);
            }
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    found
}
