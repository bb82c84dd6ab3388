//! The fence of guarded writes, `distlock_fence(resource, token)` (schema version 4): its
//! contract from `psql` alone, its row lock (a rolled-back fence changes nothing, two fences
//! of one resource serialize, concurrent read-modify-writes never interleave), bad input, a
//! database without the migration or of version 3, the Rust wrappers (tokio-postgres and sqlx)
//! and the table-per-resource variant (`WHERE fence_column <= $token`).

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lock_core::{Fence, LockError};
use lock_postgres::{FENCED_SQLSTATE, MissingTable, fence};
use lock_testkit::PostgresServer;
use tokio_postgres::Client;

use crate::common;

/// A migrated server and a client on it, with `acct(id, balance)` holding account 1.
async fn migrated() -> (PostgresServer, Client) {
    let server = common::server();
    drop(common::lock(&server).await);
    let client = common::client(&server.url()).await;
    client
        .batch_execute(
            "CREATE TABLE acct (id int PRIMARY KEY, balance int NOT NULL);
             INSERT INTO acct VALUES (1, 0);",
        )
        .await
        .expect("the user's table");
    (server, client)
}

/// The recorded token of `resource`, if any.
async fn recorded(client: &Client, resource: &str) -> Option<String> {
    client
        .query_opt(
            "SELECT token::text FROM distlock_fences WHERE resource = $1",
            &[&resource],
        )
        .await
        .expect("read the record")
        .map(|row| row.get(0))
}

async fn balance(client: &Client) -> i32 {
    client
        .query_one("SELECT balance FROM acct WHERE id = 1", &[])
        .await
        .expect("balance")
        .get(0)
}

/// Runs `psql` (PostgreSQL's own client, nothing of distlock) with `script` on stdin;
/// (succeeded, stderr).
fn psql(server: &PostgresServer, script: &str) -> (bool, String) {
    let bin = lock_testkit::postgres_bin_dir()
        .expect("bin dir")
        .join("psql");
    let mut child = Command::new(bin)
        .args([
            server.url().as_str(),
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-v",
            "VERBOSITY=verbose",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("psql");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write the script");
    let out = child.wait_with_output().expect("psql's end");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fenced_update(token: &str, balance: i32) -> String {
    format!(
        "BEGIN;\nSELECT distlock_fence('acct', {token});\n\
         UPDATE acct SET balance = {balance} WHERE id = 1;\nCOMMIT;\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_alone_writes_fenced_and_is_refused_when_stale() {
    let (server, client) = migrated().await;
    let (ok, err) = psql(&server, &fenced_update("42", 10));
    assert!(ok, "the first fenced write: {err}");
    assert_eq!(balance(&client).await, 10);
    let (ok, err) = psql(&server, &fenced_update("43", 20));
    assert!(ok, "a larger token: {err}");
    let (ok, err) = psql(&server, &fenced_update("43", 30));
    assert!(ok, "an equal token is accepted: {err}");
    assert_eq!(balance(&client).await, 30);

    let (ok, err) = psql(&server, &fenced_update("42", 99));
    assert!(!ok, "a stale token is refused");
    assert!(err.contains(FENCED_SQLSTATE), "{err}");
    assert!(
        err.contains("stale token 42 for resource 'acct': it has accepted token 43"),
        "{err}"
    );
    assert!(err.contains("token=42 current=43 resource=acct"), "{err}");
    assert_eq!(balance(&client).await, 30, "nothing of the stale write");
    assert_eq!(recorded(&client, "acct").await.as_deref(), Some("43"));

    // The same through the Rust wrapper: equal accepted, smaller refused with the tokens.
    fence(&client, &Fence::new("acct", 43))
        .await
        .expect("equal");
    let err = fence(&client, &Fence::new("acct", 7))
        .await
        .expect_err("stale");
    assert!(
        matches!(&err, LockError::Fenced { resource, token: 7, current: 43 } if resource == "acct"),
        "{err:?}"
    );
    assert!(!err.is_retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_fence_leaves_the_record_unchanged() {
    let (_server, mut client) = migrated().await;
    fence(&client, &Fence::new("acct", 10)).await.expect("10");
    let tx = client.transaction().await.expect("begin");
    fence(&tx, &Fence::new("acct", 50)).await.expect("50");
    tx.execute("UPDATE acct SET balance = 50 WHERE id = 1", &[])
        .await
        .expect("write");
    tx.rollback().await.expect("rollback");
    assert_eq!(recorded(&client, "acct").await.as_deref(), Some("10"));
    assert_eq!(balance(&client).await, 0);
    // 50 was never accepted: a token between passes.
    fence(&client, &Fence::new("acct", 20))
        .await
        .expect("20 after the rolled-back 50");
}

/// The backend process of `client` is waiting for a lock (polled, bounded: 10 s).
async fn until_waiting_on_a_lock(admin: &Client, pid: i32) -> bool {
    for _ in 0..200 {
        let waiting: bool = admin
            .query_one(
                "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity \
                 WHERE pid = $1",
                &[&pid],
            )
            .await
            .expect("pg_stat_activity")
            .get(0);
        if waiting {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// `first` holds its fence open in a transaction; a second transaction fences `second` and
/// must wait for the first's commit. Returns the second's outcome.
async fn second_waits_for_the_first(
    server: &PostgresServer,
    first: u64,
    second: u64,
) -> Result<(), LockError> {
    let admin = common::client(&server.url()).await;
    let mut one = common::client(&server.url()).await;
    let mut two = common::client(&server.url()).await;
    let two_pid: i32 = two
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    let tx = one.transaction().await.expect("begin 1");
    fence(&tx, &Fence::new("acct", first)).await.expect("first");
    let pending = tokio::spawn(async move {
        let tx = two.transaction().await.expect("begin 2");
        let answer = fence(&tx, &Fence::new("acct", second)).await;
        if answer.is_ok() {
            tx.execute("UPDATE acct SET balance = balance * 10 WHERE id = 1", &[])
                .await
                .expect("write 2");
            tx.commit().await.expect("commit 2");
        }
        answer
    });
    assert!(until_waiting_on_a_lock(&admin, two_pid).await, "2 waits");
    // The first does more work while the second waits: it is still pending after it.
    tx.execute("UPDATE acct SET balance = balance + 1 WHERE id = 1", &[])
        .await
        .expect("write 1");
    assert!(!pending.is_finished(), "2 went past 1's open fence");
    assert!(
        until_waiting_on_a_lock(&admin, two_pid).await,
        "2 still waits"
    );
    tx.commit().await.expect("commit 1");
    pending.await.expect("no panic")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_transactions_with_tokens_22_and_23_serialize() {
    let (server, client) = migrated().await;
    second_waits_for_the_first(&server, 22, 23)
        .await
        .expect("23 accepted after 22 committed");
    // 1's +1 committed first, then 2's ×10: in that order.
    assert_eq!(balance(&client).await, 10);
    assert_eq!(recorded(&client, "acct").await.as_deref(), Some("23"));

    // The other way round: 30 held open, 24 waits and is then refused by the committed 30.
    let err = second_waits_for_the_first(&server, 30, 24)
        .await
        .expect_err("24 refused after 30 committed");
    assert!(
        matches!(
            err,
            LockError::Fenced {
                token: 24,
                current: 30,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(balance(&client).await, 11, "only 30's write applied");
}

/// One writer: `rounds` fenced read-modify-writes of the counter, each with the next token
/// of `tokens`, yielding between the read and the write. Returns how many were accepted.
async fn writer(url: String, tokens: Arc<AtomicU64>, rounds: u32) -> u64 {
    let mut client = common::client(&url).await;
    let mut accepted = 0;
    for _ in 0..rounds {
        let token = tokens.fetch_add(1, Ordering::SeqCst);
        let tx = client.transaction().await.expect("begin");
        match fence(&tx, &Fence::new("counter", token)).await {
            Ok(()) => {}
            Err(LockError::Fenced { current, .. }) => {
                assert!(current > token, "refused by {current}");
                continue; // dropping `tx` rolls it back
            }
            Err(err) => panic!("{err}"),
        }
        let seen: i64 = tx
            .query_one("SELECT n FROM counter", &[])
            .await
            .expect("read")
            .get(0);
        tokio::time::sleep(Duration::from_millis(1)).await;
        tx.execute("UPDATE counter SET n = $1", &[&(seen + 1)])
            .await
            .expect("write");
        tx.execute(
            "INSERT INTO accepted (token) VALUES ($1)",
            &[&i64::try_from(token).expect("small")],
        )
        .await
        .expect("log");
        tx.commit().await.expect("commit");
        accepted += 1;
    }
    accepted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_with_rising_tokens_never_interleave_check_and_write() {
    const WRITERS: usize = 6;
    const ROUNDS: u32 = 15;
    let (server, client) = migrated().await;
    // `accepted` in commit order: the fence serializes the writers, so insertion order (the
    // identity) is commit order.
    client
        .batch_execute(
            "CREATE TABLE counter (n int8 NOT NULL); INSERT INTO counter VALUES (0);
             CREATE TABLE accepted (seq int8 GENERATED ALWAYS AS IDENTITY, token int8 NOT NULL);",
        )
        .await
        .expect("tables");
    let tokens = Arc::new(AtomicU64::new(1));
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| tokio::spawn(writer(server.url(), Arc::clone(&tokens), ROUNDS)))
        .collect();
    let mut accepted = 0;
    for w in writers {
        accepted += w.await.expect("no panic");
    }
    let n: i64 = client
        .query_one("SELECT n FROM counter", &[])
        .await
        .expect("n")
        .get(0);
    assert_eq!(u64::try_from(n).ok(), Some(accepted), "a lost update");
    let log: Vec<i64> = client
        .query("SELECT token FROM accepted ORDER BY seq", &[])
        .await
        .expect("log")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(u64::try_from(log.len()).ok(), Some(accepted));
    assert!(
        log.windows(2).all(|w| w[0] <= w[1]),
        "accepted tokens out of order: {log:?}"
    );
    assert!(accepted > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_naming_the_cause() {
    let (_server, client) = migrated().await;
    let err = fence(&client, &Fence::new("", 1)).await.expect_err("empty");
    assert!(
        matches!(&err, LockError::InvalidInput { reason } if reason.contains("empty")),
        "{err:?}"
    );
    let err = fence(&client, &Fence::new("a\0b", 1))
        .await
        .expect_err("NUL");
    assert!(matches!(err, LockError::InvalidInput { .. }), "{err:?}");
    // Raw SQL, as another language's client would send it.
    for (sql, says) in [
        ("SELECT distlock_fence('', 1)", "resource name is empty"),
        ("SELECT distlock_fence(NULL, 1)", "resource name is empty"),
        (
            "SELECT distlock_fence('acct', -1)",
            "token -1 of resource 'acct' is not an integer",
        ),
        (
            "SELECT distlock_fence('acct', 1.5)",
            "token 1.5 of resource 'acct' is not an integer",
        ),
        (
            "SELECT distlock_fence('acct', NULL)",
            "token NULL of resource 'acct'",
        ),
        (
            "SELECT distlock_fence('acct', 18446744073709551616)",
            "is not an integer in 0 ..= 18446744073709551615",
        ),
        (
            "SELECT distlock_fence('acct', 'abc')",
            "invalid input syntax for type numeric",
        ),
    ] {
        let err = client.simple_query(sql).await.expect_err(sql);
        let db = err.as_db_error().expect("the server's error");
        assert!(db.message().contains(says), "{sql}: {}", db.message());
        let code = db.code().code();
        assert!(code == "22023" || code == "22P02", "{sql}: {code}");
    }
    assert_eq!(recorded(&client, "acct").await, None, "nothing recorded");
    // `1.0` is an integer: recorded as `1`.
    client
        .simple_query("SELECT distlock_fence('acct', 1.0)")
        .await
        .expect("1.0");
    assert_eq!(recorded(&client, "acct").await.as_deref(), Some("1"));
}

/// `err` is the missing-schema error that says to run the migration.
fn says_to_migrate(err: &LockError) {
    let LockError::Backend {
        retryable: false,
        source,
        ..
    } = err
    else {
        panic!("{err:?}");
    };
    assert!(source.downcast_ref::<MissingTable>().is_some(), "{source}");
    let text = err.to_string();
    assert!(
        text.contains("migrate()") && text.contains("distlock_fence"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_migration_the_fence_says_to_run_it_and_version_3_upgrades() {
    let server = common::server();
    let client = common::client(&server.url()).await;
    says_to_migrate(
        &fence(&client, &Fence::new("acct", 1))
            .await
            .expect_err("fresh"),
    );

    // A version 3 database (the schema before the fence), then the migration over it.
    let lock = common::lock(&server).await;
    client
        .batch_execute(
            "DROP FUNCTION distlock_fence(text, numeric); DROP TABLE distlock_fences;
             UPDATE distlock_schema SET version = 3;",
        )
        .await
        .expect("back to version 3");
    says_to_migrate(
        &fence(&client, &Fence::new("acct", 1))
            .await
            .expect_err("v3"),
    );
    lock.migrate()
        .await
        .expect("upgrade to the current version");
    lock.migrate().await.expect("again");
    let version: i32 = client
        .query_one("SELECT version FROM distlock_schema", &[])
        .await
        .expect("version")
        .get(0);
    assert_eq!(
        u32::try_from(version).ok(),
        Some(lock_postgres::SCHEMA_VERSION)
    );
    assert_eq!(lock_postgres::SCHEMA_VERSION, 5);
    fence(&client, &Fence::new("acct", 1))
        .await
        .expect("fenced");
}

/// The table-per-resource variant, as the crate docs give it: the token lives in the user's
/// row, and the write itself is the check.
const TABLE_PER_RESOURCE: &str = "\
UPDATE accounts SET balance = $2, fence_token = $3::numeric
WHERE id = $1 AND fence_token <= $3::numeric";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_per_resource_variant_refuses_a_stale_token() {
    let (_server, client) = migrated().await;
    client
        .batch_execute(
            "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL,
                 fence_token numeric NOT NULL DEFAULT 0);
             INSERT INTO accounts (id, balance) VALUES (1, 0);",
        )
        .await
        .expect("the user's table");
    let write = |balance: i32, token: u64| {
        let client = &client;
        async move {
            let token = token.to_string();
            client
                .execute_typed(
                    TABLE_PER_RESOURCE,
                    &[
                        (&1_i32, tokio_postgres::types::Type::INT4),
                        (&balance, tokio_postgres::types::Type::INT4),
                        (&token, tokio_postgres::types::Type::TEXT),
                    ],
                )
                .await
                .expect("update")
        }
    };
    assert_eq!(write(10, 5).await, 1, "first");
    assert_eq!(write(20, 5).await, 1, "equal accepted");
    assert_eq!(write(30, u64::MAX).await, 1, "the largest token fits");
    assert_eq!(write(99, 6).await, 0, "stale: no row affected");
    let row = client
        .query_one("SELECT balance, fence_token::text FROM accounts", &[])
        .await
        .expect("row");
    assert_eq!(row.get::<_, i32>(0), 30);
    assert_eq!(row.get::<_, String>(1), u64::MAX.to_string());
}

#[cfg(feature = "sqlx")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlx_wrapper_refuses_a_stale_token() {
    use sqlx::Connection;
    let (server, client) = migrated().await;
    let mut conn = sqlx::postgres::PgConnection::connect(&server.url())
        .await
        .expect("sqlx connect");
    let mut tx = conn.begin().await.expect("begin");
    lock_postgres::fence_sqlx(&mut tx, &Fence::new("acct", 10))
        .await
        .expect("10");
    sqlx::query("UPDATE acct SET balance = 10 WHERE id = 1")
        .execute(&mut *tx)
        .await
        .expect("write");
    tx.commit().await.expect("commit");

    let mut tx = conn.begin().await.expect("begin");
    let err = lock_postgres::fence_sqlx(&mut tx, &Fence::new("acct", 9))
        .await
        .expect_err("stale");
    assert!(
        matches!(&err, LockError::Fenced { resource, token: 9, current: 10 } if resource == "acct"),
        "{err:?}"
    );
    tx.rollback().await.expect("rollback");
    assert_eq!(balance(&client).await, 10);
    lock_postgres::fence_sqlx(&mut conn, &Fence::new("acct", 10))
        .await
        .expect("equal, on the connection itself");
    let err = lock_postgres::fence_sqlx(&mut conn, &Fence::new("", 10))
        .await
        .expect_err("empty");
    assert!(matches!(err, LockError::InvalidInput { .. }), "{err:?}");

    // Without the migration: the same missing-schema error.
    client
        .batch_execute("DROP FUNCTION distlock_fence(text, numeric)")
        .await
        .expect("drop");
    says_to_migrate(
        &lock_postgres::fence_sqlx(&mut conn, &Fence::new("acct", 11))
            .await
            .expect_err("missing"),
    );
}

/// Compiled, not run: deadpool-postgres's pooled client and its transaction go to `fence` as
/// the tokio-postgres values they dereference to (`&**object`, `&*tx`), as the docs say.
#[allow(dead_code)]
async fn through_deadpool(
    pool: &lock_postgres::deadpool_postgres::Pool,
    f: &Fence,
) -> Result<(), LockError> {
    let mut object = pool.get().await.expect("a connection");
    fence(&**object, f).await?;
    let tx = object.transaction().await.expect("begin");
    fence(&*tx, f).await?;
    tx.commit().await.expect("commit");
    Ok(())
}
