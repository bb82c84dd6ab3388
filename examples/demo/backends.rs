//! The lock's backend beside Redis, present only when the demo was built with its feature
//! (`--features postgres`, `--features etcd`; `scripts/demo.sh --backend NAME` turns it on), so
//! that the Redis demo builds neither lock-postgres nor lock-etcd's gRPC stack.

use distlock::Locker;

use crate::Error;

/// Pooled connections of a worker's `PostgresLock`: a worker sends one statement at a time, so
/// two are plenty, and 64 workers stay within the server's connection limit (each also has one
/// connection listening for releases).
pub(crate) const POSTGRES_POOL_SIZE: usize = 2;

/// What to run instead, when the demo was built without the backend asked for.
fn not_built(backend: &str) -> Error {
    format!(
        "this demo was built without the {backend} backend: run `bash scripts/demo.sh --backend \
         {backend}`, or `cargo run --release -p distlock-demo --features {backend} -- --backend \
         {backend}`"
    )
    .into()
}

/// A `Locker` on the PostgreSQL at `url` (`PostgresLock`).
///
/// # Errors
/// The URL does not parse, or the demo was built without the `postgres` feature.
pub(crate) fn postgres_locker(url: &str) -> Result<Locker, Error> {
    #[cfg(feature = "postgres")]
    {
        Ok(Locker::new(
            distlock::postgres::PostgresLock::builder()
                .url(url)
                .pool_size(POSTGRES_POOL_SIZE)
                .build()?,
        ))
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = url;
        Err(not_built("postgres"))
    }
}

/// Creates the lease table (`PostgresLock::migrate`) on the PostgreSQL at `url` if it is missing.
///
/// # Errors
/// The server refused, or the demo was built without the `postgres` feature.
pub(crate) async fn migrate_postgres(url: &str) -> Result<(), Error> {
    #[cfg(feature = "postgres")]
    {
        distlock::postgres::PostgresLock::from_url(url)?
            .migrate()
            .await
            .map_err(|e| {
                let url = crate::parent::redacted(url);
                format!("cannot create the lease table on {url}: {e}").into()
            })
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = url;
        Err(not_built("postgres"))
    }
}

/// A `Locker` on the etcd members `urls` (client URLs, comma separated) (`EtcdLock`).
///
/// # Errors
/// A URL is not valid, or the demo was built without the `etcd` feature.
pub(crate) fn etcd_locker(urls: &str) -> Result<Locker, Error> {
    #[cfg(feature = "etcd")]
    {
        Ok(Locker::new(distlock::etcd::EtcdLock::new(
            urls.split(',').map(str::trim),
        )?))
    }
    #[cfg(not(feature = "etcd"))]
    {
        let _ = urls;
        Err(not_built("etcd"))
    }
}

/// The bucket and prefix of the demo's lock objects on S3.
pub(crate) const S3_URL: &str = "s3://distlock/demo";

/// A `Locker` on the S3 endpoint `endpoint` (`ObjectStoreLock`, the test server's identity).
///
/// # Errors
/// The configuration is refused, or the demo was built without the `s3` feature.
pub(crate) fn s3_locker(endpoint: &str) -> Result<Locker, Error> {
    #[cfg(feature = "s3")]
    {
        Ok(Locker::new(
            distlock::object_store::ObjectStoreLock::builder()
                .url(S3_URL)
                .endpoint(endpoint)
                .credentials(
                    lock_testkit::SEAWEEDFS_ACCESS_KEY,
                    lock_testkit::SEAWEEDFS_SECRET_KEY,
                )
                .region("us-east-1")
                .build()?,
        ))
    }
    #[cfg(not(feature = "s3"))]
    {
        let _ = endpoint;
        Err(not_built("s3"))
    }
}

/// A `Locker` on the MariaDB / MySQL at `url` (`MysqlLock`).
///
/// # Errors
/// The URL does not parse, or the demo was built without the `mysql` feature.
pub(crate) fn mysql_locker(url: &str) -> Result<Locker, Error> {
    #[cfg(feature = "mysql")]
    {
        Ok(Locker::new(
            distlock::mysql::MysqlLock::builder()
                .url(url)
                .pool_size(2)
                .build()?,
        ))
    }
    #[cfg(not(feature = "mysql"))]
    {
        let _ = url;
        Err(not_built("mysql"))
    }
}

/// Creates the lease table (`MysqlLock::migrate`) on the MariaDB / MySQL at `url` if missing.
///
/// # Errors
/// The server refused, or the demo was built without the `mysql` feature.
pub(crate) async fn migrate_mysql(url: &str) -> Result<(), Error> {
    #[cfg(feature = "mysql")]
    {
        distlock::mysql::MysqlLock::builder()
            .url(url)
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()?
            .migrate()
            .await
            .map_err(|e| {
                let url = crate::parent::redacted(url);
                format!("cannot create the lease table on {url}: {e}").into()
            })
    }
    #[cfg(not(feature = "mysql"))]
    {
        let _ = url;
        Err(not_built("mysql"))
    }
}

/// Whether this build carries `backend`'s lock (the Redis one always).
pub(crate) fn built_with(backend: crate::cli::Backend) -> Result<(), Error> {
    use crate::cli::Backend;
    match backend {
        Backend::Redis => Ok(()),
        Backend::Postgres if cfg!(feature = "postgres") => Ok(()),
        Backend::Etcd if cfg!(feature = "etcd") => Ok(()),
        Backend::Mysql if cfg!(feature = "mysql") => Ok(()),
        Backend::Mysql => Err(not_built("mysql")),
        Backend::Postgres => Err(not_built("postgres")),
        Backend::Etcd => Err(not_built("etcd")),
        Backend::S3 if cfg!(feature = "s3") => Ok(()),
        Backend::S3 => Err(not_built("s3")),
    }
}
