//! `etcd://host:port` URLs: the locks of lock-etcd, read and released with the etcd client
//! lock-etcd is built on.
//!
//! The layout read here is lock-etcd's: the key is the prefix (default `distlock/`) and the
//! name; its value is the holder's token (`dl:` + 32 hex digits); the key is attached to an
//! etcd lease, whose remaining TTL is the lock's; the fencing token of the grant is the key's
//! `mod_revision` (the revision of the transaction that wrote the token).

pub(crate) mod keys;
pub(crate) mod read;
pub(crate) mod release;
pub(crate) mod releases;

use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

use crate::cli::TargetArgs;
use crate::exit::{BACKEND, Failure, USAGE, one_line};

/// The key prefix lock-etcd's lockers use by default (`EtcdLockBuilder::prefix`).
pub(crate) const DEFAULT_PREFIX: &str = lock_etcd::DEFAULT_PREFIX;

/// A connected etcd cluster and the settings the subcommands need.
pub(crate) struct EtcdTarget {
    pub(crate) client: Client,
    pub(crate) prefix: String,
    /// The members' endpoints as given (`host:port`), for messages and the `node` column.
    pub(crate) endpoints: Vec<String>,
    /// The members' URLs as the etcd client takes them (`http://host:port`, `https://...`).
    pub(crate) urls: Vec<String>,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
}

impl EtcdTarget {
    /// Connects to the members `args.url` name (`etcd://host:port`, several allowed):
    /// requests go to any member that answers.
    ///
    /// # Errors
    /// A usage failure for a URL that is not `etcd://host:port` (TLS and credentials are not
    /// offered on etcd URLs yet); a backend failure when no member answers within
    /// `--connect-timeout` (the one request made is a read of the prefix, which also checks
    /// that the cluster has a leader: a cluster without quorum fails here).
    pub(crate) async fn connect(args: &TargetArgs) -> Result<Self, Failure> {
        let urls = args
            .url
            .iter()
            .map(|url| member_url(url))
            .collect::<Result<Vec<_>, _>>()?;
        let endpoints: Vec<String> = urls
            .iter()
            .map(|url| {
                url.split_once("://")
                    .map_or(url.as_str(), |(_, a)| a)
                    .to_owned()
            })
            .collect();
        let options = ConnectOptions::new()
            .with_connect_timeout(args.connect_timeout)
            .with_timeout(args.command_timeout)
            // A member that lost its leader answers at once instead of holding the request.
            .with_require_leader(true);
        let what = format!("cannot connect to etcd at {}", endpoints.join(","));
        let client = bounded(
            &what,
            args.connect_timeout,
            Client::connect(&urls, Some(options)),
        )
        .await?;
        let target = Self {
            client,
            prefix: args
                .prefix
                .clone()
                .unwrap_or_else(|| DEFAULT_PREFIX.to_owned()),
            endpoints,
            urls,
            connect_timeout: args.connect_timeout,
            command_timeout: args.command_timeout,
        };
        // `connect` sends nothing: one linearizable read checks that a member answers and
        // that the cluster has a leader, so an unreachable cluster is reported here.
        let mut kv = target.client.kv_client();
        bounded(
            &what,
            args.connect_timeout,
            kv.get(
                target.prefix.as_bytes(),
                Some(etcd_client::GetOptions::new().with_count_only()),
            ),
        )
        .await?;
        Ok(target)
    }

    /// The etcd key of the lock `name`.
    pub(crate) fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The members, for the `node` column: every one, since any member answers for all keys.
    pub(crate) fn node(&self) -> String {
        self.endpoints.join(",")
    }
}

/// The member's URL as the etcd client takes it: `etcd://host:port` becomes
/// `http://host:port`; `http://` and `https://` (what `EtcdLock::new` takes) are kept. A
/// trailing `/` is allowed.
fn member_url(url: &str) -> Result<String, Failure> {
    let bad = |why: &str| Failure::new(USAGE, format!("invalid etcd URL {url:?}: {why}"));
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("expected etcd://host:port or http://host:port"))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "etcd" | "http" => "http",
        "https" => "https",
        _ => {
            return Err(bad(
                "give every member as etcd://host:port or http(s)://host:port",
            ));
        }
    };
    let authority = rest.trim_end_matches('/');
    if authority.contains('@') {
        return Err(bad("credentials are not supported on etcd URLs"));
    }
    if let Some((_, path)) = authority.split_once('/') {
        return Err(bad(&format!(
            "a member's URL has no path (/{path}); the key prefix is --prefix"
        )));
    }
    let (host, port) = authority
        .rsplit_once(':')
        .ok_or_else(|| bad("expected etcd://host:port"))?;
    if host.is_empty() || host.contains('/') {
        return Err(bad("expected etcd://host:port"));
    }
    port.parse::<u16>()
        .map_err(|_| bad("the port is not a number from 0 to 65535"))?;
    Ok(format!("{scheme}://{authority}"))
}

/// `future`, failed with a backend failure (`what`, and the client's error or the limit) when
/// it errs or takes longer than `limit`.
pub(crate) async fn bounded<T>(
    what: &str,
    limit: Duration,
    future: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(limit, future).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(Failure::new(
            BACKEND,
            format!("{what}: {}", one_line(&lock_etcd::EtcdError::from(e))),
        )),
        Err(_) => Err(Failure::new(
            BACKEND,
            format!(
                "{what}: no answer within {}",
                humantime::format_duration(limit)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        for (url, member) in [
            ("etcd://127.0.0.1:2379", "http://127.0.0.1:2379"),
            ("etcd://etcd-0:2379/", "http://etcd-0:2379"),
            ("http://etcd-0:2379", "http://etcd-0:2379"),
            ("https://etcd-0:2379/", "https://etcd-0:2379"),
        ] {
            assert_eq!(member_url(url).ok().as_deref(), Some(member), "{url}");
        }
        for bad in [
            "redis://127.0.0.1:6379",
            "etcd://",
            "etcd://host",
            "etcd://:2379",
            "etcd://host:port",
            "etcd://u:p@host:2379",
            "127.0.0.1:2379",
        ] {
            assert!(member_url(bad).is_err(), "{bad}");
        }
    }
}
