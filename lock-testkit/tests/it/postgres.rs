//! Integration tests of `PostgresServer` against the real `initdb` and `postgres` binaries.

use std::time::Duration;

use lock_testkit::{PostgresServer, postgres_bin_dir};
use tokio_postgres::NoTls;

const CONNECT: Duration = Duration::from_secs(5);

async fn connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let mut config: tokio_postgres::Config = url.parse()?;
    config.connect_timeout(CONNECT);
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

async fn query_one(url: &str, sql: &str) -> String {
    let client = connect(url).await.expect("connect");
    let rows = client.simple_query(sql).await.expect("query");
    rows.iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .expect("one row")
}

#[test]
fn binaries_are_found() {
    let dir = postgres_bin_dir().expect("bin dir");
    assert!(dir.join("initdb").is_file());
    assert!(dir.join("postgres").is_file());
}

#[tokio::test]
async fn starts_answers_stops_and_keeps_data_across_a_restart() {
    let mut server = PostgresServer::start().expect("start postgres");
    assert_ne!(server.port(), 5432);
    assert!(server.is_running());
    assert_eq!(query_one(&server.url(), "SELECT 1").await, "1");
    connect(&server.url())
        .await
        .expect("connect")
        .batch_execute("CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
        .await
        .expect("write");

    server.stop();
    assert!(!server.is_running());
    assert!(
        connect(&server.url()).await.is_err(),
        "stopped, yet it answers"
    );

    server.start_again().expect("start again");
    assert!(server.is_running());
    assert_eq!(query_one(&server.url(), "SELECT v FROM kept").await, "42");
}

#[tokio::test]
async fn a_password_is_required_when_set() {
    let server = PostgresServer::builder()
        .password("s3cret:/@")
        .start()
        .expect("start postgres");
    assert_eq!(query_one(&server.url(), "SELECT 2").await, "2");
    let wrong = connect(&server.url_with_password("wrong"))
        .await
        .expect_err("a wrong password is refused");
    assert_eq!(
        wrong.code(),
        Some(&tokio_postgres::error::SqlState::INVALID_PASSWORD),
        "{wrong}"
    );
}
