//! Input rules, checked before any I/O.

use std::time::Duration;

use crate::LockError;

/// The longest lock name accepted, in bytes (UTF-8). Longer names are almost always a bug (a
/// rendered payload instead of an id) and cost memory in every key that carries them.
pub const MAX_NAME_LEN: usize = 1024;

/// The shortest TTL accepted: 1 ms, the resolution of Redis's `PX`.
pub const MIN_TTL: Duration = Duration::from_millis(1);

/// The longest TTL accepted: 2^53 − 1 ms (about 285,000 years). Redis's `PX` takes more, but
/// this is the largest millisecond count Lua scripts (whose numbers are doubles) hold exactly.
pub const MAX_TTL: Duration = Duration::from_millis((1 << 53) - 1);

/// The largest note a backend's [`annotate`](crate::backend::Lock::annotate) writes, in bytes
/// (64 KiB): a note names a leader (a pod, an address), and every observer reads it on every
/// change. The same for every backend that keeps notes.
pub const MAX_NOTE_BYTES: usize = 64 * 1024;

/// Checks a holder's note for [`annotate`](crate::backend::Lock::annotate): at most
/// [`MAX_NOTE_BYTES`] bytes.
///
/// # Errors
/// [`LockError::InvalidInput`] for a longer note.
pub fn check_note(note: &[u8]) -> Result<(), LockError> {
    if note.len() > MAX_NOTE_BYTES {
        return Err(LockError::invalid(format!(
            "the note is {} bytes; at most {MAX_NOTE_BYTES} are kept",
            note.len()
        )));
    }
    Ok(())
}

/// Checks a lock name: not empty, at most [`MAX_NAME_LEN`] bytes.
///
/// # Errors
/// [`LockError::InvalidInput`] saying which rule was broken.
pub fn check_name(name: &str) -> Result<(), LockError> {
    if name.is_empty() {
        return Err(LockError::invalid("the lock name is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(LockError::invalid(format!(
            "the lock name is {} bytes long; the limit is {MAX_NAME_LEN}",
            name.len()
        )));
    }
    Ok(())
}

/// Checks a TTL and returns it in whole milliseconds (a sub-millisecond remainder is dropped, so
/// the lease is never longer than asked).
///
/// # Errors
/// [`LockError::InvalidInput`] when `ttl` is below [`MIN_TTL`] or above [`MAX_TTL`].
pub fn check_ttl(ttl: Duration) -> Result<u64, LockError> {
    if ttl < MIN_TTL {
        return Err(LockError::invalid(format!(
            "the TTL {ttl:?} is below the minimum of 1 ms"
        )));
    }
    if ttl > MAX_TTL {
        return Err(LockError::invalid(format!(
            "the TTL {ttl:?} is above the maximum of {} ms",
            MAX_TTL.as_millis()
        )));
    }
    // In range, so the millisecond count is below 2^53 and fits a u64.
    Ok(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_name("order:42").is_ok());
        assert!(check_name("{tag}x").is_ok());
        assert!(check_name(&"x".repeat(MAX_NAME_LEN)).is_ok());
        for bad in [String::new(), "x".repeat(MAX_NAME_LEN + 1)] {
            assert!(matches!(
                check_name(&bad),
                Err(LockError::InvalidInput { .. })
            ));
        }
    }

    proptest::proptest! {
        // Any string: accepted exactly when it is 1 to MAX_NAME_LEN bytes, never a panic.
        #[test]
        fn names_are_judged_by_their_length_alone(name in "\\PC{0,300}|.{1020,1030}") {
            let ok = !name.is_empty() && name.len() <= MAX_NAME_LEN;
            proptest::prop_assert_eq!(check_name(&name).is_ok(), ok);
        }

        // Any duration: accepted exactly within [MIN_TTL, MAX_TTL], as whole milliseconds.
        #[test]
        fn ttls_are_judged_by_their_range(secs in 0u64..u64::MAX, nanos in 0u32..1_000_000_000) {
            let ttl = Duration::new(secs, nanos);
            match check_ttl(ttl) {
                Ok(ms) => {
                    proptest::prop_assert!((MIN_TTL..=MAX_TTL).contains(&ttl));
                    proptest::prop_assert_eq!(u128::from(ms), ttl.as_millis());
                }
                Err(_) => proptest::prop_assert!(!(MIN_TTL..=MAX_TTL).contains(&ttl)),
            }
        }
    }

    #[test]
    fn ttls() {
        assert_eq!(check_ttl(Duration::from_millis(1)).ok(), Some(1));
        assert_eq!(check_ttl(Duration::from_micros(1_999)).ok(), Some(1));
        assert_eq!(check_ttl(MAX_TTL).ok(), Some((1 << 53) - 1));
        for bad in [
            Duration::ZERO,
            Duration::from_micros(999),
            MAX_TTL + Duration::from_millis(1),
            Duration::MAX,
        ] {
            assert!(
                matches!(check_ttl(bad), Err(LockError::InvalidInput { .. })),
                "{bad:?}"
            );
        }
    }
}
