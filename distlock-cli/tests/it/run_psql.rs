//! The README's nightly job: `distlock run` holds a lock on Redis while its command writes to
//! PostgreSQL with `psql` alone, fenced by `distlock_fence` (which `distlock migrate`
//! installed) with `$DISTLOCK_FENCING_TOKEN`. The fence is the store's, whatever backend the
//! lock is on: a job that resumes with an older token after a newer run wrote is refused, and
//! nothing of its transaction applies.

use std::process::{Command, Output};

use lock_testkit::{PostgresServer, RedisServer};

use crate::common::{distlock, stderr};

/// The job: one transaction, the fence first (`$DISTLOCK_FENCING_TOKEN` expanded by `sh`).
fn job(psql: &str, url: &str, token_file: &str) -> String {
    format!(
        "echo \"$DISTLOCK_FENCING_TOKEN\" > {token_file} && \
         {psql} '{url}' -X -q -v ON_ERROR_STOP=1 -c \"BEGIN; \
         SELECT distlock_fence('nightly', $DISTLOCK_FENCING_TOKEN); \
         UPDATE report SET body = 'run $DISTLOCK_FENCING_TOKEN', token = $DISTLOCK_FENCING_TOKEN \
         WHERE id = 1; COMMIT\""
    )
}

fn sh(script: &str, token: Option<&str>) -> Output {
    let mut command = Command::new("sh");
    command.args(["-c", script]);
    if let Some(token) = token {
        command.env("DISTLOCK_FENCING_TOKEN", token);
    }
    command.output().expect("sh")
}

#[test]
fn a_psql_job_under_run_writes_fenced_and_a_stale_one_is_refused() {
    let redis = RedisServer::start().expect("redis-server");
    let pg = PostgresServer::start().expect("postgres");
    let migrated = distlock(&[pg.url()], &["migrate"]);
    assert!(migrated.status.success(), "{}", stderr(&migrated));
    let psql = lock_testkit::postgres_bin_dir()
        .expect("PostgreSQL's binaries")
        .join("psql")
        .display()
        .to_string();
    let url = pg.url();
    let query = |sql: &str| {
        let out = sh(
            &format!("{psql} '{url}' -X -q -t -A -v ON_ERROR_STOP=1 -c \"{sql}\""),
            None,
        );
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    query(
        "CREATE TABLE report (id int PRIMARY KEY, body text, token numeric); INSERT INTO report VALUES (1, '', 0)",
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let mut tokens = Vec::new();
    for run in 0..2 {
        let file = dir.path().join(format!("token-{run}"));
        let script = job(&psql, &url, &file.display().to_string());
        let out = distlock(
            &[redis.url()],
            &[
                "run", "nightly", "--lease", "10s", "--", "sh", "-c", &script,
            ],
        );
        assert!(out.status.success(), "run {run}: {}", stderr(&out));
        let token = std::fs::read_to_string(&file).expect("the job's token");
        tokens.push(token.trim().to_owned());
        assert_eq!(
            query("SELECT token FROM report WHERE id = 1"),
            tokens[run],
            "run {run} wrote with its token"
        );
    }
    let newer: u64 = tokens[1].parse().expect("a token");
    assert!(newer > tokens[0].parse().expect("a token"));

    // The first run's job, resumed after the second wrote (a paused holder): refused.
    let file = dir.path().join("token-stale");
    let stale = sh(
        &job(&psql, &url, &file.display().to_string()),
        Some(&tokens[0]),
    );
    assert!(!stale.status.success(), "a stale token was accepted");
    let err = stderr(&stale);
    assert!(err.contains("nightly") && err.contains(&tokens[0]), "{err}");
    assert_eq!(
        query("SELECT body || ' ' || token FROM report WHERE id = 1"),
        format!("run {} {}", tokens[1], tokens[1]),
        "nothing of the stale transaction applied"
    );
    assert_eq!(
        query("SELECT token FROM distlock_fences WHERE resource = 'nightly'"),
        tokens[1]
    );
}
