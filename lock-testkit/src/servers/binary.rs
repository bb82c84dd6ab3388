//! Locating the `redis-server` executable, and the tools the `scripts/ensure-*.sh` scripts
//! install into a cache directory (Valkey, etcd).

use std::env;
use std::ffi::OsStr;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Environment variable that overrides where `redis-server` is taken from.
const BINARY_ENV: &str = "DISTLOCK_REDIS_SERVER";

/// Places looked at after `PATH`, for environments with a minimal `PATH`.
const FALLBACK_DIRS: [&str; 2] = ["/usr/local/bin", "/usr/bin"];

/// Path of the `redis-server` executable used by [`RedisServer`](crate::RedisServer).
///
/// Taken from the `DISTLOCK_REDIS_SERVER` environment variable if it is set
/// (a path, or a bare name looked up on `PATH`), else the first
/// `redis-server` on `PATH`.
///
/// # Panics
///
/// If no executable is found; the message tells how to install one
/// (`scripts/ensure-redis.sh`). Use [`try_redis_server_binary`] to get an
/// error instead.
pub fn redis_server_binary() -> PathBuf {
    match try_redis_server_binary() {
        Ok(path) => path,
        Err(err) => panic!("{err}"),
    }
}

/// Like [`redis_server_binary`], but returns an [`io::ErrorKind::NotFound`]
/// error (with installation advice) instead of panicking.
pub fn try_redis_server_binary() -> io::Result<PathBuf> {
    if let Some(value) = env::var_os(BINARY_ENV).filter(|v| !v.is_empty()) {
        let candidate = PathBuf::from(&value);
        if is_executable(&candidate) {
            return Ok(candidate);
        }
        if candidate.components().count() == 1
            && let Some(found) = search_path(&value)
        {
            return Ok(found);
        }
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{BINARY_ENV}={} is not an executable redis-server; fix or unset it, \
                 or run `scripts/ensure-redis.sh` to install Redis",
                candidate.display()
            ),
        ));
    }
    search_path(OsStr::new("redis-server")).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "redis-server was not found on PATH and {BINARY_ENV} is not set: \
                 run `scripts/ensure-redis.sh` from the repository root to install it, \
                 or set {BINARY_ENV}=/path/to/redis-server"
            ),
        )
    })
}

/// The directory the `scripts/ensure-*.sh` scripts install `tool` at `version` into when it
/// is not on `PATH`: `$XDG_CACHE_HOME/distlock/<tool>-<version>/` (`~/.cache/...` when
/// `XDG_CACHE_HOME` is unset or empty, `/tmp/...` without a `HOME`), outside the repository so
/// that every clone and CI run on the machine shares one download. The scripts compute the
/// same path (`${XDG_CACHE_HOME:-$HOME/.cache}/distlock/<tool>-<version>`).
#[must_use]
pub fn cache_dir(tool: &str, version: &str) -> PathBuf {
    let cache = env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    cache.join("distlock").join(format!("{tool}-{version}"))
}

/// A tool that a `scripts/ensure-*.sh` script installs into its [`cache_dir`] when it is not
/// on `PATH`.
pub(crate) struct Installed {
    /// The executable's file name.
    pub(crate) binary: &'static str,
    /// The environment variable that overrides where it is taken from.
    pub(crate) env_var: &'static str,
    /// Where the script puts it.
    pub(crate) install_dir: PathBuf,
    /// The script that installs it, from the repository root.
    pub(crate) script: &'static str,
}

/// `tool`'s executable: its environment variable if set (it must name an executable), else the
/// binary on `PATH`, else the one its script installed in its directory.
///
/// # Errors
///
/// [`io::ErrorKind::NotFound`], saying how to install it, when none is found.
pub(crate) fn try_installed_binary(tool: &Installed) -> io::Result<PathBuf> {
    let Installed {
        binary,
        env_var,
        install_dir,
        script,
    } = tool;
    if let Some(value) = env::var_os(env_var).filter(|v| !v.is_empty()) {
        let candidate = PathBuf::from(&value);
        return if is_executable(&candidate) {
            Ok(candidate)
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{env_var}={} is not an executable {binary}; fix or unset it, or run \
                     `{script}`",
                    candidate.display()
                ),
            ))
        };
    }
    let installed = install_dir.join(binary);
    search_path(OsStr::new(binary))
        .or_else(|| is_executable(&installed).then_some(installed))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{binary} was found neither on PATH nor in {}, and {env_var} is not set: \
                     run `{script}` from the repository root to install it",
                    install_dir.display()
                ),
            )
        })
}

pub(crate) fn search_path(name: &OsStr) -> Option<PathBuf> {
    let path_dirs = env::var_os("PATH")
        .map(|p| env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    path_dirs
        .into_iter()
        .chain(FALLBACK_DIRS.iter().map(PathBuf::from))
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

pub(crate) fn is_executable(path: &Path) -> bool {
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
