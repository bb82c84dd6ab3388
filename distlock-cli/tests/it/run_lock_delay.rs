//! `run --lock-delay` on every backend with leases: a `distlock run` killed outright (`kill -9`)
//! leaves the name to nobody until its lease *and* the delay have run out, `show` says
//! "delayed until" meanwhile, and a run that ends normally frees the name at once. Each test
//! prints how long after the kill the successor was granted (the figure the docs quote).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lock_testkit::{
    EtcdCluster, MariadbServer, PostgresServer, RedisServer, SEAWEEDFS_ACCESS_KEY,
    SEAWEEDFS_SECRET_KEY, SeaweedfsServer,
};

use crate::common::{eventually, json, stderr};
use crate::run_killed::{alive, pid_in};

const LEASE: Duration = Duration::from_secs(1);
const DELAY: Duration = Duration::from_secs(3);

/// One store as the command reaches it: its arguments, and the environment it needs.
pub(crate) struct Target {
    pub(crate) args: Vec<String>,
    pub(crate) env: Vec<(&'static str, String)>,
    /// Whether the store tells how much of a lease is left (object storage keeps no clock:
    /// it tells the lease's length, so `show` cannot say when the holder's lease ended).
    pub(crate) tells_time_left: bool,
}

impl Target {
    pub(crate) fn url(url: String) -> Self {
        Self {
            args: vec!["--url".into(), url],
            env: Vec::new(),
            tells_time_left: true,
        }
    }

    /// A store that needs its schema first (PostgreSQL, MariaDB): `migrate` run on it.
    pub(crate) fn migrated(url: String) -> Self {
        let target = Self::url(url);
        let migrated = target.output(&["migrate"]);
        assert!(migrated.status.success(), "{}", stderr(&migrated));
        target
    }

    /// The bucket of `server` under `cli/`, its endpoint and identity in the AWS variables.
    pub(crate) fn s3(server: &SeaweedfsServer) -> Self {
        Self {
            args: vec!["--url".into(), server.url("cli")],
            env: vec![
                ("AWS_ENDPOINT_URL", server.endpoint()),
                ("AWS_ACCESS_KEY_ID", SEAWEEDFS_ACCESS_KEY.into()),
                ("AWS_SECRET_ACCESS_KEY", SEAWEEDFS_SECRET_KEY.into()),
                ("AWS_REGION", "us-east-1".into()),
            ],
            tells_time_left: false,
        }
    }

    /// A Redlock over `urls` (the masters, comma-separated).
    pub(crate) fn redlock(urls: String) -> Self {
        let mut target = Self::url(urls);
        target.args.insert(0, "--redlock".into());
        target
    }

    pub(crate) fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_distlock"));
        command
            .args(&self.args)
            .env_remove("DISTLOCK_URL")
            .env_remove("DISTLOCK_PREFIX")
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null());
        command
    }

    /// `distlock TARGET ARGS...`, run to its end.
    pub(crate) fn output(&self, args: &[&str]) -> std::process::Output {
        self.command().args(args).output().expect("run distlock")
    }

    /// `distlock TARGET run NAME --lease 1s ARGS -- sh -c SCRIPT`, not waited for.
    fn spawn_run(&self, name: &str, args: &[&str], script: &str) -> Child {
        self.command()
            .args(["run", name, "--lease", "1s", "--wait", "30s"])
            .args(args)
            .args(["--", "sh", "-c", script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn distlock")
    }
}

/// The scenario on `target`; answers how long after the kill the successor started.
fn killed_holder_delays_its_successor(target: &Target) -> Duration {
    let dir = tempfile::tempdir().expect("tempdir");
    let (first_pid, second) = (dir.path().join("first"), dir.path().join("second"));
    let delay = format!("{}s", DELAY.as_secs());
    let mut first = target.spawn_run(
        "job:delayed",
        &["--lock-delay", &delay],
        &format!("echo $$ > {}; sleep 1000", first_pid.display()),
    );
    let shell = pid_in(&first_pid);
    first.kill().expect("SIGKILL distlock by its PID");
    let killed = Instant::now();
    let _ = first.wait();
    assert!(
        eventually(Duration::from_secs(2), || !alive(shell)),
        "the command outlived distlock"
    );
    let mut next = target.spawn_run("job:delayed", &[], &format!("date > {}", second.display()));
    // Past the lease, inside the delay: `show` says the name is delayed.
    std::thread::sleep(LEASE + Duration::from_millis(300));
    let shown = json(&target.output(&["--json", "show", "job:delayed"]))["locks"][0].clone();
    assert_eq!(shown["lock_delay_ms"], 3000, "{shown:#}");
    let text =
        String::from_utf8_lossy(&target.output(&["show", "job:delayed"]).stdout).into_owned();
    if target.tells_time_left {
        assert!(
            second.exists() || shown["delayed_until_ms"].as_u64().is_some(),
            "show, past the lease inside the delay, says nothing of it: {shown:#}"
        );
        assert!(second.exists() || text.contains("delayed until"), "{text}");
    } else {
        // Never "delayed" where the time left is not known: the lock-delay is still shown.
        assert!(shown["delayed_until_ms"].is_null(), "{shown:#}");
        assert!(text.contains("lock-delay"), "{text}");
    }
    assert!(
        eventually(Duration::from_secs(20), || second.exists()),
        "the next run never got the name"
    );
    let after = killed.elapsed();
    let _ = next.wait();
    assert!(
        after >= DELAY,
        "the next run started {after:?} after the kill: within the {DELAY:?} lock-delay"
    );
    // A run that ends normally releases at once, whatever its delay.
    let ended = target.output(&["run", "job:released", "--lock-delay", "60s", "--", "true"]);
    assert!(ended.status.success(), "{}", stderr(&ended));
    let again = target.output(&["run", "job:released", "--wait", "0s", "--", "true"]);
    assert!(
        again.status.success(),
        "a released name was kept by its lock-delay: {}",
        stderr(&again)
    );
    eprintln!("the successor started {after:?} after the kill (lease 1s, lock-delay 3s)");
    after
}

#[test]
fn redis_a_killed_holder_delays_its_successor() {
    let server = RedisServer::start().expect("redis-server");
    killed_holder_delays_its_successor(&Target::url(server.url()));
}

#[test]
fn redlock_a_killed_holder_delays_its_successor() {
    let (_servers, urls) = crate::run_backends::masters();
    killed_holder_delays_its_successor(&Target::redlock(urls));
}

#[test]
fn postgres_a_killed_holder_delays_its_successor() {
    let server = PostgresServer::start().expect("postgres");
    killed_holder_delays_its_successor(&Target::migrated(server.url()));
}

#[test]
fn mariadb_a_killed_holder_delays_its_successor() {
    let server = MariadbServer::start().expect("mariadb");
    killed_holder_delays_its_successor(&Target::migrated(server.url()));
}

#[test]
fn etcd_a_killed_holder_delays_its_successor() {
    let cluster = EtcdCluster::builder().members(1).start().expect("etcd");
    let target = Target::url(crate::etcd::urls(&cluster).join(","));
    killed_holder_delays_its_successor(&target);
}

#[test]
fn s3_a_killed_holder_delays_its_successor() {
    let server = SeaweedfsServer::start().expect("start seaweedfs");
    killed_holder_delays_its_successor(&Target::s3(&server));
}
