//! The conformance suite over `MemoryLock` on a paused clock: every check of every module,
//! one test per module (`memory::read_write`), from the suite's one list and
//! `MemoryLock`'s capability table.

mod memory {
    use std::sync::Arc;

    use lock_core::{Locker, MemoryLock};
    use lock_testkit::conformance::Backend;

    /// Lockers over one fresh store, as several processes over one server would be. Nothing
    /// sits between a `MemoryLock` and its store: answers are delayed around it.
    fn memory() -> Backend {
        let store = Arc::new(MemoryLock::new());
        Backend::new(move || Locker::new(Arc::clone(&store))).with_late_answers_around_the_lock()
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(start_paused = true)]
        ((), memory())
    );
}

/// The matrix in lock-testkit's README (runner × module → the checks that run), written from
/// the suite's list of runners (`RUNNERS`), its list of checks (`Module::checks`) and each
/// backend's own capability table, so the README cannot drift from what the runners run.
/// `DISTLOCK_BLESS=1` rewrites it.
mod matrix {
    use std::fmt::Write as _;
    use std::sync::Arc;

    use lock_core::MemoryLock;
    use lock_core::backend::{Capabilities, Fencing, Lock, MultiLock, TokenScale};
    use lock_etcd::EtcdLock;
    use lock_object_store::ObjectStoreLock;
    use lock_object_store::object_store::memory::InMemory;
    use lock_postgres::{PostgresAdvisoryLock, PostgresLock};
    use lock_redis::RedisLock;
    use lock_redlock::Redlock;
    use lock_testkit::conformance::{Module, RUNNERS, Runner};

    const START: &str = "<!-- conformance-matrix:start (written by lock-testkit's test matrix::the_readme_shows_what_runs) -->";
    const END: &str = "<!-- conformance-matrix:end -->";

    /// A URL nothing is asked of: building a lock connects to nothing.
    const REDIS: &str = "redis://127.0.0.1:1";
    const POSTGRES: &str = "postgres://distlock@127.0.0.1:1/distlock";
    const ETCD: &str = "http://127.0.0.1:1";
    const MYSQL: &str = "mysql://distlock@127.0.0.1:1/distlock";

    fn redis() -> RedisLock {
        RedisLock::builder()
            .url(REDIS)
            .pubsub_url(REDIS)
            .build()
            .expect("valid URL")
    }

    /// The lock `runner` runs the suite over, built as the runner builds it (connecting to
    /// nothing), for its capability table.
    fn lock_of(runner: &Runner) -> Arc<dyn Lock> {
        let memory_nodes = || (0..3).map(|_| MemoryLock::new());
        let cluster = || {
            RedisLock::builder()
                .cluster_urls(vec![REDIS.to_owned()])
                .build()
                .expect("valid URLs")
        };
        match (runner.package, runner.module) {
            ("lock-testkit", "memory") => Arc::new(MemoryLock::new()),
            ("lock-redis", "redis" | "valkey") => Arc::new(redis()),
            ("lock-redis", "cluster" | "valkey_cluster") => Arc::new(cluster()),
            ("lock-redlock", "redis") => Arc::new(
                Redlock::builder()
                    .nodes((0..3).map(|_| redis()))
                    .build()
                    .expect("three nodes"),
            ),
            ("lock-redlock", "memory") => Arc::new(
                Redlock::builder()
                    .nodes(memory_nodes())
                    .build()
                    .expect("three nodes"),
            ),
            ("lock-postgres", "table") => {
                Arc::new(PostgresLock::builder().url(POSTGRES).build().expect("URL"))
            }
            ("lock-postgres", "advisory") => Arc::new(
                PostgresAdvisoryLock::builder()
                    .url(POSTGRES)
                    .build()
                    .expect("URL"),
            ),
            ("lock-postgres", "pgbouncer") => Arc::new(
                PostgresLock::builder()
                    .url(POSTGRES)
                    .listen_url(POSTGRES)
                    .prepared_statements(false)
                    .build()
                    .expect("URL"),
            ),
            ("lock-etcd", "one_member") => Arc::new(EtcdLock::new([ETCD]).expect("valid endpoint")),
            ("lock-object-store", "memory" | "seaweedfs") => Arc::new(ObjectStoreLock::new(
                Arc::new(InMemory::new()),
                "locks",
                std::time::Duration::from_secs(1),
            )),
            ("lock-mysql", "table") => {
                Arc::new(lock_mysql::MysqlLock::from_url(MYSQL).expect("URL"))
            }
            ("lock-mysql", "advisory") => {
                Arc::new(lock_mysql::MysqlAdvisoryLock::from_url(MYSQL).expect("URL"))
            }
            _ => panic!(
                "the matrix does not know the lock of the runner {}: add how it builds it \
                 to `lock_of`",
                runner.name()
            ),
        }
    }

    fn cell(module: Module, caps: &Capabilities) -> String {
        let n = module.checks().len();
        if !module.offered_by(caps) && module == Module::Guarded {
            return "none".to_owned();
        }
        if !module.offered_by(caps) {
            return "`Unsupported`".to_owned();
        }
        match (module, caps.multi) {
            (Module::Multi, MultiLock::Atomic) => format!("{n} (one step)"),
            (Module::Multi, MultiLock::InOrder) => format!("{n} (in order)"),
            (Module::Election, _) if !caps.holders => format!("{n} (observers `Unsupported`)"),
            _ => n.to_string(),
        }
    }

    fn fencing(caps: &Capabilities) -> &'static str {
        match caps.fencing {
            Fencing::Strict(TokenScale::Clock) => "strict (clock µs)",
            Fencing::Strict(TokenScale::Counter) => "strict (counter)",
            Fencing::AfterHolding => "after holding",
            Fencing::Unordered => "unordered",
            Fencing::None => "none (0)",
            _ => "?",
        }
    }

    /// The matrix, in Markdown.
    fn render() -> String {
        let mut out = String::new();
        let modules = Module::ALL;
        let total: usize = modules.iter().map(|m| m.checks().len()).sum();
        let _ = writeln!(
            out,
            "Every backend runs all {total} checks, one test per module (its checks share one \
             server, a few at a time); a number is the checks of that module run against the \
             backend, `Unsupported` the module's one check that its kind is refused before any \
             I/O instead, `none` a backend that ships no fence for guarded writes (its \
             README says why).\n"
        );
        let _ = write!(out, "| backend | runner |");
        for module in modules {
            let _ = write!(out, " `{}` |", module.name());
        }
        let _ = writeln!(out, " fencing | announces releases |");
        let _ = writeln!(out, "|{}", "---|".repeat(modules.len() + 4));
        for runner in RUNNERS {
            let caps = lock_of(runner).capabilities();
            let _ = write!(out, "| {} | {} |", runner.backend, runner.name());
            for module in modules {
                let _ = write!(out, " {} |", cell(module, &caps));
            }
            let announces = if caps.announces_releases { "yes" } else { "no" };
            let _ = writeln!(out, " {} | {announces} |", fencing(&caps));
        }
        out
    }

    #[tokio::test]
    async fn the_readme_shows_what_runs() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
        let readme = std::fs::read_to_string(path).expect("lock-testkit/README.md");
        let (Some(start), Some(end)) = (readme.find(START), readme.find(END)) else {
            panic!("README.md lacks the markers {START} … {END}");
        };
        let head = &readme[..start + START.len()];
        let tail = &readme[end..];
        let wanted = format!("{head}\n\n{}\n{tail}", render());
        if wanted == readme {
            return;
        }
        if std::env::var_os("DISTLOCK_BLESS").is_some_and(|v| v == "1") {
            std::fs::write(path, wanted).expect("write README.md");
            return;
        }
        panic!(
            "lock-testkit/README.md's conformance matrix differs from what runs; rewrite it \
             with `DISTLOCK_BLESS=1 cargo test -p lock-testkit matrix`.\n\
             Wanted:\n{}",
            render()
        );
    }

    /// Every `conformance_tests!` call in the workspace's tests is a runner of `RUNNERS`, and
    /// every runner of `RUNNERS` is such a call: read from the sources, so a runner whose
    /// package's tests are not run here (or a listed runner that was removed) is noticed too.
    /// Each call also checks itself (`listed_in_the_matrix`); this is the other direction.
    #[test]
    fn the_runners_are_the_calls() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the workspace");
        let mut calls = Vec::new();
        for package in std::fs::read_dir(root).expect("the workspace") {
            let dir = package.expect("an entry").path();
            let tests = dir.join("tests");
            let Some(name) = cargo_package_name(&dir) else {
                continue;
            };
            for file in rust_files(&tests) {
                let source = std::fs::read_to_string(&file).expect("a test file");
                calls.extend(
                    runner_modules(&source)
                        .into_iter()
                        .map(|m| (name.clone(), m)),
                );
            }
        }
        let mut listed: Vec<(String, String)> = RUNNERS
            .iter()
            .map(|r| (r.package.to_owned(), r.module.to_owned()))
            .collect();
        calls.sort();
        listed.sort();
        assert_eq!(
            calls, listed,
            "the `conformance_tests!` calls in the tests (left) and \
             lock_testkit::conformance::RUNNERS (right)"
        );
    }

    /// The `name` of the package whose manifest is in `dir`, if any.
    fn cargo_package_name(dir: &std::path::Path) -> Option<String> {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
        let package = manifest.split("[package]").nth(1)?;
        let line = package
            .lines()
            .find(|l| l.trim_start().starts_with("name"))?;
        Some(line.split('"').nth(1)?.to_owned())
    }

    /// Every `.rs` file under `dir`, at any depth.
    fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut files = Vec::new();
        for entry in entries {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                files.extend(rust_files(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
        files
    }

    /// The module of each `conformance_tests!(` call in `source`: the innermost `mod name {`
    /// around it, told by indentation (the sources are rustfmt's).
    fn runner_modules(source: &str) -> Vec<String> {
        let mut open: Vec<(usize, &str)> = Vec::new();
        let mut found = Vec::new();
        for line in source.lines() {
            let code = line.trim_start();
            let indent = line.len() - code.len();
            let declared = code
                .trim_start_matches("pub(super) ")
                .trim_start_matches("pub ")
                .strip_prefix("mod ")
                .and_then(|rest| rest.strip_suffix(" {"));
            let call = code.starts_with("lock_testkit::conformance_tests!(");
            if declared.is_some() || call {
                while open.last().is_some_and(|(i, _)| *i >= indent) {
                    open.pop();
                }
            }
            if let Some(name) = declared {
                open.push((indent, name));
            }
            if call && let Some((_, name)) = open.last() {
                found.push((*name).to_owned());
            }
        }
        found
    }

    /// The suite's list names every check its modules define (a `pub async fn` of a module
    /// that is not in the list would run nowhere).
    #[test]
    fn the_list_names_every_check() {
        for module in Module::ALL {
            let path = format!(
                "{}/src/checks/conformance/{}.rs",
                env!("CARGO_MANIFEST_DIR"),
                module.name()
            );
            let source = std::fs::read_to_string(&path).expect("module source");
            // Defined in the module's file, or in a file of its own and re-exported there
            // (`pub use super::lost_answer::lost_answer_leaves_nothing;`).
            let mut defined: Vec<&str> = source
                .lines()
                .filter_map(|line| {
                    let defined = line.strip_prefix("pub async fn ");
                    defined.and_then(|rest| rest.split('(').next()).or_else(|| {
                        let used = line.strip_prefix("pub use super::")?.strip_suffix(';')?;
                        used.rsplit("::").next()
                    })
                })
                .collect();
            let mut listed = module.checks().to_vec();
            defined.sort_unstable();
            listed.sort_unstable();
            assert_eq!(defined, listed, "{path} and the suite's list");
        }
    }
}

/// The check that a kind is refused before any I/O notices a backend that does I/O first.
mod refused {
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;
    use lock_core::backend::{Attempt, Lock};
    use lock_core::{Kind, Lease, LockError, Locker, MemoryLock, Token};
    use lock_testkit::conformance::{Backend, Module, refused};
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "an unsupported kind reached the store")]
    async fn a_refusal_after_a_round_trip_fails() {
        let backend = mutex_only(Answer::AfterARoundTrip);
        assert!(!backend.offers(Module::ReadWrite));
        refused(&backend, Module::ReadWrite, "late").await;
    }

    /// How [`MutexOnly`] answers a kind other than the mutex.
    #[derive(Clone, Copy, PartialEq)]
    enum Answer {
        /// `Unsupported` at once, as the trait's default does.
        RefusesAtOnce,
        /// `Unsupported` after a round trip (a yield, here): I/O before the refusal.
        AfterARoundTrip,
        /// Served, while only the mutex is declared.
        ServesAll,
    }

    /// A store that declares only the mutex and answers the other kinds as `answer` says.
    struct MutexOnly {
        store: MemoryLock,
        answer: Answer,
    }

    #[async_trait]
    impl Lock for MutexOnly {
        fn backend(&self) -> &'static str {
            "mutex-only"
        }
        async fn try_acquire(
            &self,
            name: &str,
            token: Token,
            ttl: Duration,
        ) -> Result<Attempt, LockError> {
            self.store.try_acquire(name, token, ttl).await
        }
        async fn try_acquire_kind(
            &self,
            name: &str,
            kind: Kind,
            token: Token,
            ttl: Duration,
        ) -> Result<Attempt, LockError> {
            if self.answer == Answer::AfterARoundTrip {
                tokio::task::yield_now().await;
            }
            match kind {
                Kind::Mutex => self.store.try_acquire(name, token, ttl).await,
                _ if self.answer == Answer::ServesAll => {
                    self.store.try_acquire_kind(name, kind, token, ttl).await
                }
                other => Err(LockError::Unsupported {
                    backend: "mutex-only",
                    kind: other.label(),
                }),
            }
        }
        async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
            self.store.extend(lease, ttl).await
        }
        async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
            self.store.release(lease).await
        }
    }

    fn mutex_only(answer: Answer) -> Backend {
        let store = Arc::new(MutexOnly {
            store: MemoryLock::new(),
            answer,
        });
        Backend::new(move || Locker::new(Arc::clone(&store)))
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_at_once_passes() {
        let backend = mutex_only(Answer::RefusesAtOnce);
        for module in [Module::ReadWrite, Module::Fair] {
            assert!(!backend.offers(module));
            refused(&backend, module, "at-once").await;
        }
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "on a backend that does not offer it")]
    async fn a_grant_of_an_undeclared_kind_fails() {
        refused(&mutex_only(Answer::ServesAll), Module::Fair, "undeclared").await;
    }
}
