//! Running a test of the current test binary in other OS processes (the self-re-exec pattern).

use std::future::Future;
use std::io;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// The command that runs only the `#[ignore]`d test `test` of the test binary `exe`, with
/// `env` set; the child is killed by its PID if it is dropped still running.
fn test_command(exe: &Path, test: &str, env: &[(String, String)]) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args([
        test,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    .kill_on_drop(true);
    cmd
}

/// Starts the `#[ignore]`d test `test` of the current test binary in one child process with
/// `env` set, and returns it without waiting: for tests that must kill a participant
/// (`child.start_kill()` sends `SIGKILL` to its PID) or watch it die. Its output is
/// discarded; a child still running when the returned [`Child`] is dropped is killed by its
/// PID.
///
/// # Errors
/// When the test binary's path is unknown or the process cannot be started.
pub fn spawn_test_process(test: &str, env: &[(&str, String)]) -> io::Result<Child> {
    let exe = std::env::current_exe()?;
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    test_command(&exe, test, &env)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

/// Runs the `#[ignore]`d test `test` of the current test binary in `count` child processes at
/// once, each with `env` set, and waits (at most `limit`) until all have finished.
///
/// `Ok(())` when every child exited successfully *and* actually ran the test body (its harness
/// printed `1 passed`); otherwise `Err` with what the failing child printed. Children still
/// running at the limit are killed by their PID. The returned future owns its inputs, so it can
/// be spawned and awaited later, while the parent goes on with its side of the test.
pub fn run_test_in_processes(
    test: &str,
    env: &[(&str, String)],
    count: usize,
    limit: Duration,
) -> impl Future<Output = Result<(), String>> + Send + 'static {
    let test = test.to_owned();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    async move {
        let exe = std::env::current_exe().map_err(|e| format!("test binary path: {e}"))?;
        let children = (0..count).map(|_| {
            let mut cmd = test_command(&exe, &test, &env);
            async move { cmd.output().await }
        });
        let outputs = tokio::time::timeout(limit, futures::future::join_all(children))
            .await
            .map_err(|_| format!("the {test} processes did not finish within {limit:?}"))?;
        for output in outputs {
            let out = output.map_err(|e| format!("spawning a {test} process: {e}"))?;
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if !out.status.success() {
                return Err(format!("a {test} process failed: {text}"));
            }
            if !String::from_utf8_lossy(&out.stdout).contains("1 passed") {
                return Err(format!("a {test} process did not run its body: {text}"));
            }
        }
        Ok(())
    }
}

/// The libtest name of the test fn `$test` in the calling module of an integration-test binary
/// (`module::test`, the crate's own name left out): what a parent test hands
/// [`run_test_in_processes`] or [`spawn_test_process`] (which run it with `--exact`) to re-run
/// it in child processes. Naming the fn rather than writing a string makes a renamed or moved
/// child test a compile error, not a child that runs nothing.
///
/// ```ignore
/// #[tokio::test]
/// #[ignore = "a child process of workers_exclude_each_other"]
/// async fn worker() { /* ... */ }
///
/// let name = lock_testkit::child_test!(worker); // "exclusion::worker"
/// ```
#[macro_export]
macro_rules! child_test {
    ($test:ident) => {{
        let _: fn() = $test;
        let module = module_path!()
            .split_once("::")
            .map_or("", |(_crate, module)| module);
        format!("{module}::{}", stringify!($test))
    }};
}
