//! Which backend a URL names, from its scheme alone (before any connection), so that a
//! PostgreSQL or etcd URL is never read as a bad Redis URL, and an unknown scheme is named.

use crate::exit::{Failure, USAGE};

/// The backend behind the URLs given with `--url`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// One Redis or Valkey deployment (single, Cluster, Sentinel): `redis://`, `rediss://`,
    /// `valkey://`, `valkeys://`, `redis+unix://`, `valkey+unix://`, `unix://` (redis-rs's
    /// schemes).
    Redis,
    /// Redlock over N independent masters: Redis URLs with `--redlock`, one per master.
    Redlock,
    /// An etcd cluster: `etcd://host:port`, or `http://host:port` / `https://host:port` (the
    /// forms `EtcdLock::new` takes), one per member.
    Etcd,
    /// PostgreSQL: `postgres://` or `postgresql://` (libpq's URIs).
    Postgres,
    /// An object store: `s3://bucket/prefix` (the endpoint and credentials from the AWS
    /// environment variables).
    ObjectStore,
    /// MySQL / MariaDB: `mysql://` or `mariadb://` (sqlx's URLs).
    Mysql,
}

/// Redis URL schemes (redis-rs's).
const REDIS: &[&str] = &[
    "redis",
    "rediss",
    "valkey",
    "valkeys",
    "redis+unix",
    "valkey+unix",
    "unix",
];
/// etcd URL schemes.
const ETCD: &[&str] = &["etcd", "http", "https"];
/// PostgreSQL URL schemes.
const POSTGRES: &[&str] = &["postgres", "postgresql"];
/// Object-store URL schemes.
const OBJECT_STORE: &[&str] = &["s3"];
/// MySQL / MariaDB URL schemes.
const MYSQL: &[&str] = &["mysql", "mariadb"];

impl Scheme {
    /// The backend of one URL.
    ///
    /// # Errors
    /// A usage failure naming the scheme when it is none of the above, or when there is none.
    pub(crate) fn of(url: &str) -> Result<Self, Failure> {
        let Some((scheme, _)) = url.split_once("://") else {
            return Err(Failure::new(
                USAGE,
                format!("a URL needs a scheme: {}", expected()),
            ));
        };
        let scheme = scheme.to_ascii_lowercase();
        if REDIS.contains(&scheme.as_str()) {
            Ok(Self::Redis)
        } else if ETCD.contains(&scheme.as_str()) {
            Ok(Self::Etcd)
        } else if POSTGRES.contains(&scheme.as_str()) {
            Ok(Self::Postgres)
        } else if OBJECT_STORE.contains(&scheme.as_str()) {
            Ok(Self::ObjectStore)
        } else if MYSQL.contains(&scheme.as_str()) {
            Ok(Self::Mysql)
        } else {
            Err(Failure::new(
                USAGE,
                format!("unknown URL scheme {scheme:?}: {}", expected()),
            ))
        }
    }

    /// The backend of every URL (they must agree); Redis URLs with `redlock` are Redlock.
    ///
    /// # Errors
    /// As [`Scheme::of`]; a usage failure when URLs of different backends are mixed, when
    /// `--redlock` is given with other URLs than Redis ones, or when no URL is given.
    pub(crate) fn of_all(urls: &[String], redlock: bool) -> Result<Self, Failure> {
        let mut found: Option<Self> = None;
        for url in urls {
            let scheme = Self::of(url)?;
            match found {
                Some(first) if first != scheme => {
                    return Err(Failure::new(
                        USAGE,
                        format!(
                            "the URLs name different backends ({} and {}): give one backend's",
                            first.name(),
                            scheme.name()
                        ),
                    ));
                }
                _ => found = Some(scheme),
            }
        }
        match (found, redlock) {
            (None, _) => Err(Failure::new(USAGE, "no URL given")),
            (Some(Self::Redis), true) => Ok(Self::Redlock),
            (Some(other), true) => Err(Failure::new(
                USAGE,
                format!(
                    "--redlock takes Redis URLs (one per master), not {}",
                    other.name()
                ),
            )),
            (Some(scheme), false) => Ok(scheme),
        }
    }

    /// The backend's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Redis => "redis",
            Self::Redlock => "redlock",
            Self::Etcd => "etcd",
            Self::Postgres => "postgres",
            Self::ObjectStore => "object-store",
            Self::Mysql => "mysql",
        }
    }
}

/// The schemes accepted, for messages.
fn expected() -> String {
    format!(
        "expected one of {} (Redis; --redlock for Redlock), {} (etcd), {} (PostgreSQL), {} \
         (MySQL / MariaDB) or {} (object storage)",
        list(REDIS),
        list(ETCD),
        list(POSTGRES),
        list(MYSQL),
        list(OBJECT_STORE)
    )
}

/// `a://, b://`.
fn list(schemes: &[&str]) -> String {
    schemes
        .iter()
        .map(|s| format!("{s}://"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn every_scheme_a_backend_takes_is_recognised() {
        for (url, scheme) in [
            ("redis://127.0.0.1:6379/0", Scheme::Redis),
            ("rediss://h:6380", Scheme::Redis),
            ("valkey://h:6379", Scheme::Redis),
            ("redis+unix:///tmp/r.sock", Scheme::Redis),
            ("unix:///tmp/r.sock", Scheme::Redis),
            ("etcd://h:2379", Scheme::Etcd),
            ("http://h:2379", Scheme::Etcd),
            ("HTTPS://h:2379", Scheme::Etcd),
            ("postgres://u@h/db", Scheme::Postgres),
            ("postgresql://h:5432/db?sslmode=disable", Scheme::Postgres),
            ("s3://bucket/locks", Scheme::ObjectStore),
            ("mysql://u:pw@h:3306/db", Scheme::Mysql),
            ("mariadb://h/db", Scheme::Mysql),
        ] {
            assert_eq!(Scheme::of(url).expect(url), scheme, "{url}");
        }
    }

    #[test]
    fn an_unknown_scheme_is_named() {
        let failure = Scheme::of("mongodb://h/db").expect_err("unknown");
        assert_eq!(failure.code, USAGE);
        assert!(
            failure.message.contains("\"mongodb\""),
            "{}",
            failure.message
        );
        assert!(
            failure.message.contains("postgres://"),
            "{}",
            failure.message
        );
        let failure = Scheme::of("127.0.0.1:6379").expect_err("no scheme");
        assert!(
            failure.message.contains("needs a scheme"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn urls_must_agree_and_redlock_takes_redis_urls() {
        let mixed = Scheme::of_all(&urls(&["redis://a:1", "etcd://b:2"]), false);
        assert!(
            mixed
                .expect_err("mixed")
                .message
                .contains("different backends")
        );
        assert_eq!(
            Scheme::of_all(&urls(&["redis://a:1", "redis://b:2"]), true).expect("redlock"),
            Scheme::Redlock
        );
        let failure = Scheme::of_all(&urls(&["etcd://a:1"]), true).expect_err("not redis");
        assert!(failure.message.contains("--redlock takes Redis URLs"));
    }
}
