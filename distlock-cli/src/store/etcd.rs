//! [`Store`] on an etcd cluster (`etcd://host:port`, one per member): an `EtcdLock` on the
//! members, whose own inspector (lock-etcd's `Inspect`) lists, reads and releases its keys,
//! and which `run` and elections use. What is left here is the URL.

use std::sync::Arc;

use async_trait::async_trait;
use lock_core::backend::{Inspect, Lock};
use lock_etcd::EtcdLock;

use super::Store;
use crate::cli::TargetArgs;
use crate::exit::{BACKEND, Failure, USAGE, one_line};

/// A connected etcd cluster: the lock on its members and the command's prefix.
pub(crate) struct EtcdTarget {
    lock: EtcdLock,
}

impl EtcdTarget {
    /// Connects to the members `args.url` name (`etcd://host:port`, several allowed):
    /// requests go to any member that answers.
    ///
    /// # Errors
    /// A usage failure for a URL that is not `etcd://host:port` (TLS and credentials are not
    /// offered on etcd URLs yet); a backend failure when no member answers within
    /// `--connect-timeout` (the one request made is a linearizable read under the prefix,
    /// which also checks that the cluster has a leader: a cluster without quorum fails here).
    pub(crate) async fn connect(args: &TargetArgs) -> Result<Self, Failure> {
        let urls = args
            .url
            .iter()
            .map(|url| member_url(url))
            .collect::<Result<Vec<_>, _>>()?;
        let mut builder = EtcdLock::builder()
            .endpoints(urls.iter().cloned())
            .connect_timeout(args.connect_timeout)
            .command_timeout(args.command_timeout);
        if let Some(prefix) = &args.prefix {
            builder = builder.prefix(prefix.clone());
        }
        let lock = builder.build()?;
        let members: Vec<&str> = urls
            .iter()
            .map(|url| url.split_once("://").map_or(url.as_str(), |(_, a)| a))
            .collect();
        let what = format!("cannot connect to etcd at {}", members.join(","));
        // Building sends nothing: one read checks that a member answers and that the cluster
        // has a leader, so an unreachable cluster is reported here.
        match tokio::time::timeout(args.connect_timeout, lock.ping()).await {
            Ok(Ok(())) => Ok(Self { lock }),
            Ok(Err(error)) => Err(Failure::new(
                BACKEND,
                format!("{what}: {}", one_line(&error)),
            )),
            Err(_) => Err(Failure::new(
                BACKEND,
                format!(
                    "{what}: no answer within {}",
                    humantime::format_duration(args.connect_timeout)
                ),
            )),
        }
    }
}

#[async_trait]
impl Store for EtcdTarget {
    fn backend(&self) -> &'static str {
        "etcd"
    }

    fn inspector(&self) -> Option<&dyn Inspect> {
        Some(&self.lock)
    }

    fn lock(&self, _describe: Option<&str>) -> Result<Arc<dyn Lock>, Failure> {
        Ok(Arc::new(self.lock.clone()))
    }

    /// Nothing to install: an etcd write is fenced by a transaction that compares and raises
    /// the resource's record (`EtcdLock::guarded_txn`), which any etcd client can send.
    async fn migrate(&self) -> Result<(String, serde_json::Value), Failure> {
        Ok((
            "etcd: nothing to install (a fenced write is one transaction that compares and \
             raises the resource's fence record: EtcdLock::guarded_txn)"
                .to_owned(),
            serde_json::json!({ "backend": "etcd", "installed": [] }),
        ))
    }
}

/// The member's URL as `EtcdLock` takes it: `etcd://host:port` becomes `http://host:port`;
/// `http://` and `https://` are kept. A trailing `/` is allowed.
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
