//! [`FakeClock`]: a clock a test moves at runtime for the processes it starts, with
//! libfaketime (`scripts/ensure-faketime.sh` installs it).
//!
//! A process started with [`FakeClock::apply`] has `libfaketimeMT.so.1` preloaded and reads its
//! offset (and rate) from a file of the clock's own on every call to the C library's clock
//! functions (`FAKETIME_NO_CACHE=1`: no caching, so a change is seen by the next call). Writing
//! the file moves the clock of every process that uses it, at once.
//!
//! What it cannot move: a program that does not read the time through the C library. Go
//! programs (etcd) read the clock through the kernel's vDSO themselves, so a preload has no
//! effect on them; a Linux time namespace (`unshare --time`) can offset their monotonic and
//! boot-time clocks, once, before they start, and nothing offsets `CLOCK_REALTIME` for one
//! process but this preload.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};

use tempfile::TempDir;

/// Environment variable naming `libfaketimeMT.so.1` when it is not where Debian puts it.
const LIB_ENV: &str = "DISTLOCK_FAKETIME_LIB";
/// Where the distributions put the multi-threaded library (a server's threads share the
/// clock, so the single-threaded `libfaketime.so.1` is not safe for them).
const LIB_PATHS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/lib64/faketime/libfaketimeMT.so.1",
];
/// The file, in the clock's directory, that holds libfaketime's specification.
const SPEC_FILE: &str = "faketime.rc";

/// The path of `libfaketimeMT.so.1`: `$DISTLOCK_FAKETIME_LIB`, else the distributions' places.
///
/// # Errors
/// [`io::ErrorKind::NotFound`] with installation advice (`scripts/ensure-faketime.sh`).
pub fn try_faketime_library() -> io::Result<PathBuf> {
    let named = std::env::var_os(LIB_ENV).map(PathBuf::from);
    named
        .into_iter()
        .chain(LIB_PATHS.iter().map(PathBuf::from))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "libfaketimeMT.so.1 not found (run scripts/ensure-faketime.sh, or set \
                     {LIB_ENV})"
                ),
            )
        })
}

/// Which of a process's clocks a [`FakeClock`] moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Faked {
    /// The wall clock only (`CLOCK_REALTIME`, `gettimeofday`, `time`):
    /// `FAKETIME_DONT_FAKE_MONOTONIC=1`. What an NTP step or an operator's `date -s` does: the
    /// monotonic clock does not jump, so timers, timeouts and everything measured on it keep
    /// going.
    WallOnly,
    /// Every clock the C library reads, the monotonic ones too: a machine whose oscillator
    /// runs fast, where every clock runs fast (and sleeps end early in real time).
    All,
}

/// A clock, shared by the processes started with [`apply`](Self::apply), that the test moves
/// at runtime: jumps (an offset from the real time, in milliseconds, either way) and a rate
/// fixed when the clock is made (libfaketime counts a rate from each process's start, so
/// changing it under a running process would jump its clock too).
///
/// The specification file sits in a temporary directory of its own, readable by every user
/// (PostgreSQL runs as an unprivileged user), deleted when this is dropped: stop the processes
/// first, or they go on at their last offset.
#[derive(Debug)]
pub struct FakeClock {
    dir: TempDir,
    library: PathBuf,
    faked: Faked,
    /// The rate, `1.0` for real speed.
    rate: f64,
    /// The offset now, in milliseconds.
    offset_ms: Mutex<i64>,
}

impl FakeClock {
    /// A clock at the real time and speed, which moves the wall clock only
    /// ([`Faked::WallOnly`]) until the test makes it jump.
    ///
    /// # Errors
    /// If libfaketime is missing, or the specification file cannot be written.
    pub fn new() -> io::Result<FakeClock> {
        FakeClock::with(Faked::WallOnly, 1.0)
    }

    /// A clock that runs `rate` times as fast as the real one (`1.1`: 10 % fast), counted from
    /// each process's start, on the clocks `faked` names.
    ///
    /// # Errors
    /// If `rate` is not a positive finite number, libfaketime is missing, or the specification
    /// file cannot be written.
    pub fn with(faked: Faked, rate: f64) -> io::Result<FakeClock> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a clock rate must be positive, not {rate}"),
            ));
        }
        let library = try_faketime_library()?;
        let dir = tempfile::Builder::new()
            .prefix("lock-testkit-faketime-")
            .tempdir()?;
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))?;
        let clock = FakeClock {
            dir,
            library,
            faked,
            rate,
            offset_ms: Mutex::new(0),
        };
        clock.write(0)?;
        Ok(clock)
    }

    /// The specification file libfaketime reads.
    pub fn spec_file(&self) -> PathBuf {
        self.dir.path().join(SPEC_FILE)
    }

    /// The offset now, in milliseconds (positive: ahead of the real time).
    pub fn offset_ms(&self) -> i64 {
        *self
            .offset_ms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The rate the clock runs at (`1.0`: real speed).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Moves the clock by `by_ms` milliseconds (negative: back), for every process that uses
    /// it, from its next reading of the time.
    ///
    /// # Errors
    /// If the specification file cannot be written; the offset is then unchanged.
    pub fn jump(&self, by_ms: i64) -> io::Result<()> {
        let mut offset = self
            .offset_ms
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let next = offset.saturating_add(by_ms);
        self.write(next)?;
        *offset = next;
        Ok(())
    }

    /// Sets the offset to `offset_ms` milliseconds from the real time (0: back to it).
    ///
    /// # Errors
    /// If the specification file cannot be written; the offset is then unchanged.
    pub fn set_offset(&self, offset_ms: i64) -> io::Result<()> {
        let mut offset = self
            .offset_ms
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.write(offset_ms)?;
        *offset = offset_ms;
        Ok(())
    }

    /// The environment that puts a process on this clock.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = vec![
            ("LD_PRELOAD".into(), self.library.clone().into()),
            ("FAKETIME_TIMESTAMP_FILE".into(), self.spec_file().into()),
            // Read the file on every call: a jump is seen by the next reading of the time.
            ("FAKETIME_NO_CACHE".into(), "1".into()),
        ];
        if self.faked == Faked::WallOnly {
            env.push(("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()));
        }
        env
    }

    /// Puts the process `command` starts on this clock.
    pub fn apply(&self, command: &mut Command) {
        command.envs(self.env());
    }

    /// Writes the specification for `offset_ms` (and the rate) through a rename, so that a
    /// process never reads half a line.
    fn write(&self, offset_ms: i64) -> io::Result<()> {
        let sign = if offset_ms < 0 { '-' } else { '+' };
        let abs = offset_ms.unsigned_abs();
        let mut spec = format!("{sign}{}.{:03}", abs / 1_000, abs % 1_000);
        if (self.rate - 1.0).abs() > f64::EPSILON {
            spec.push_str(&format!(" x{}", self.rate));
        }
        spec.push('\n');
        write_atomically(self.dir.path(), &self.spec_file(), &spec)
    }
}

fn write_atomically(dir: &Path, path: &Path, text: &str) -> io::Result<()> {
    let tmp = dir.join(format!("{SPEC_FILE}.new"));
    fs::write(&tmp, text)?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644))?;
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INSTALL: &str = "libfaketime (scripts/ensure-faketime.sh)";

    /// The Unix time `date` reads on `clock`.
    fn date_on(clock: &FakeClock) -> i64 {
        let mut date = Command::new("date");
        date.arg("+%s");
        clock.apply(&mut date);
        let out = date.output().expect("date runs");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("date prints seconds")
    }

    #[test]
    fn a_process_on_the_clock_sees_each_jump_at_once() {
        let clock = FakeClock::new().expect(INSTALL);
        let before = date_on(&clock);
        clock.jump(3_600_000).expect("jump forward");
        let ahead = date_on(&clock);
        assert!(
            (3_590..3_700).contains(&(ahead - before)),
            "{before} → {ahead}"
        );
        clock.jump(-7_200_000).expect("jump back");
        assert_eq!(clock.offset_ms(), -3_600_000);
        let behind = date_on(&clock);
        assert!(
            (-3_700..-3_590).contains(&(behind - before)),
            "{before} → {behind}"
        );
        clock.set_offset(0).expect("back to the real time");
        assert!((date_on(&clock) - before).abs() < 100);
    }

    #[test]
    fn a_fast_clock_fakes_the_monotonic_clocks_too() {
        let fast = FakeClock::with(Faked::All, 1.1).expect(INSTALL);
        let spec = fs::read_to_string(fast.spec_file()).expect("the spec is written");
        assert_eq!(spec, "+0.000 x1.1\n");
        assert!(
            !fast
                .env()
                .iter()
                .any(|(k, _)| k == "FAKETIME_DONT_FAKE_MONOTONIC")
        );
        assert!(FakeClock::with(Faked::All, 0.0).is_err());
    }
}
