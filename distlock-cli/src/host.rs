//! This machine's name, for what the command says about its holders (`run`'s description,
//! `run --leader`'s default value). Its own module: the subcommands and the stores both use it.

/// The host's name as the kernel knows it, else `HOSTNAME`, else `unknown` (as the holder
/// description of `lock-redis` reads it).
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}
