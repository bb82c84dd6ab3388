//! What the library says, on stderr: its `tracing` warnings (an evicting `maxmemory-policy`, a
//! grace period after a store restart, a renewal at risk, a lost lease) would otherwise be
//! lost, since a library installs no subscriber of its own.

use tracing_subscriber::EnvFilter;

use crate::cli::Verbosity;

/// Installs the stderr subscriber: warnings and errors by default, nothing with `-q`, more
/// with `-v` (info), `-vv` (debug), `-vvv` (trace); `RUST_LOG`, when set, decides instead
/// (tracing's filter syntax). Lines carry no time (a terminal or a journal adds its own).
pub(crate) fn install(verbosity: &Verbosity) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|value| !value.trim().is_empty())
        .and_then(|value| EnvFilter::try_new(value).ok())
        .unwrap_or_else(|| EnvFilter::new(level(verbosity)));
    // Fails only when a subscriber is already set (never here: `main` calls it once).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(console::colors_enabled_stderr())
        .without_time()
        .with_target(false)
        .try_init();
}

/// The default filter for the flags given.
fn level(verbosity: &Verbosity) -> &'static str {
    if verbosity.quiet {
        return "off";
    }
    match verbosity.verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_pick_the_level() {
        let of = |quiet, verbose| level(&Verbosity { quiet, verbose });
        assert_eq!(of(false, 0), "warn");
        assert_eq!(of(true, 0), "off");
        assert_eq!(of(false, 1), "info");
        assert_eq!(of(false, 2), "debug");
        assert_eq!(of(false, 5), "trace");
    }
}
