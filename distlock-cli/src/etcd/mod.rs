//! `etcd://host:port` URLs: the locks of lock-etcd, read and released with the etcd client
//! lock-etcd is built on.
//!
//! The layout read here is lock-etcd's: the key is the prefix (default `distlock/`) and the
//! name; its value is the holder's token (`dl:` + 32 hex digits); the key is attached to an
//! etcd lease, whose remaining TTL is the lock's; the fencing token of the grant is the key's
//! `mod_revision` (the revision of the transaction that wrote the token).

mod read;
mod release;

use std::process::ExitCode;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

use crate::cli::{Cli, Command, TargetArgs};
use crate::exit::{BACKEND, Failure, USAGE, one_line};
use crate::output::{print_listing, print_show};

/// The scheme of an etcd member's URL on the command line.
const SCHEME: &str = "etcd://";

/// The key prefix lock-etcd's lockers use by default (`EtcdLockBuilder::prefix`).
pub(crate) const DEFAULT_PREFIX: &str = lock_etcd::DEFAULT_PREFIX;

/// Whether the URLs name etcd members (the first decides; mixing is refused at connect).
pub(crate) fn is_etcd(urls: &[String]) -> bool {
    urls.first().is_some_and(|url| url.starts_with(SCHEME))
}

/// A connected etcd cluster and the settings the subcommands need.
pub(crate) struct EtcdTarget {
    pub(crate) client: Client,
    pub(crate) prefix: String,
    /// The members' endpoints as given (`host:port`), for messages and the `node` column.
    pub(crate) endpoints: Vec<String>,
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
        let endpoints = args
            .url
            .iter()
            .map(|url| endpoint(url))
            .collect::<Result<Vec<_>, _>>()?;
        let options = ConnectOptions::new()
            .with_connect_timeout(args.connect_timeout)
            .with_timeout(args.command_timeout)
            // A member that lost its leader answers at once instead of holding the request.
            .with_require_leader(true);
        let urls: Vec<String> = endpoints.iter().map(|e| format!("http://{e}")).collect();
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

/// `host:port` out of `etcd://host:port` (a trailing `/` is allowed).
fn endpoint(url: &str) -> Result<String, Failure> {
    let bad = |why: &str| Failure::new(USAGE, format!("invalid etcd URL {url:?}: {why}"));
    let rest = url
        .strip_prefix(SCHEME)
        .ok_or_else(|| bad("give every member as etcd://host:port (no Redis URLs among them)"))?;
    let authority = rest.trim_end_matches('/');
    if authority.contains('@') {
        return Err(bad("credentials are not supported on etcd URLs"));
    }
    let (host, port) = authority
        .rsplit_once(':')
        .ok_or_else(|| bad("expected etcd://host:port"))?;
    if host.is_empty() || host.contains('/') {
        return Err(bad("expected etcd://host:port"));
    }
    port.parse::<u16>()
        .map_err(|_| bad("the port is not a number from 0 to 65535"))?;
    Ok(authority.to_owned())
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
        Ok(Err(e)) => Err(Failure::new(BACKEND, format!("{what}: {}", one_line(&e)))),
        Err(_) => Err(Failure::new(
            BACKEND,
            format!(
                "{what}: no answer within {}",
                humantime::format_duration(limit)
            ),
        )),
    }
}

/// Runs the subcommand on etcd. `run`, `watch` and `leader` are not offered there yet: they answer a
/// usage failure that says so, before connecting.
pub(crate) async fn dispatch(cli: Cli) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::Ls(args) => {
            let target = EtcdTarget::connect(&cli.target).await?;
            let listing =
                read::list(&target, &args.pattern, args.scan.count, args.scan.foreign).await?;
            print_listing(&listing, &args.pattern, cli.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Show(args) => {
            let target = EtcdTarget::connect(&cli.target).await?;
            let locks = read::describe(&target, &args.name).await?;
            print_show(&args.name, &locks, cli.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Release(args) => {
            let target = EtcdTarget::connect(&cli.target).await?;
            release::release(&target, &args, cli.json).await
        }
        Command::Run(_) | Command::Watch(_) | Command::Leader(_) => Err(Failure::new(
            USAGE,
            "`run`, `watch` and `leader` are not available on etcd URLs yet; `ls`, `show` and \
             `release` are",
        )),
        Command::Migrate => Err(Failure::new(
            USAGE,
            "`migrate` has nothing to install on etcd (its fence is the lock key's revision)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        assert_eq!(
            endpoint("etcd://127.0.0.1:2379").ok(),
            Some("127.0.0.1:2379".into())
        );
        assert_eq!(
            endpoint("etcd://etcd-0:2379/").ok(),
            Some("etcd-0:2379".into())
        );
        for bad in [
            "redis://127.0.0.1:6379",
            "etcd://",
            "etcd://host",
            "etcd://:2379",
            "etcd://host:port",
            "etcd://u:p@host:2379",
        ] {
            assert!(endpoint(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_first_url_decides() {
        assert!(is_etcd(&["etcd://a:1".into(), "etcd://b:1".into()]));
        assert!(!is_etcd(&["redis://a:1".into()]));
    }
}
