//! Lock names to advisory-lock keys, as sqlx maps them.

use hkdf::Hkdf;
use sha2::Sha256;

/// The HKDF "info" string sqlx ties its keys to.
const SQLX_INFO: &[u8] = b"SQLx (Rust) Postgres advisory lock";

/// The advisory-lock key of the lock name `name`, exactly as sqlx's
/// `PgAdvisoryLock::new(name)` computes it (its `PgAdvisoryLockKey::BigInt`): HKDF-SHA256
/// (RFC 5869) over the name's UTF-8 bytes, no salt, with the info string
/// `"SQLx (Rust) Postgres advisory lock"`, expanded to 8 bytes read as a little-endian `i64`.
/// So a [`PostgresAdvisoryLock`] guard and a sqlx `PgAdvisoryLock` on the same name exclude
/// each other. Negative keys are normal.
///
/// ```
/// // The example of sqlx's own documentation.
/// assert_eq!(
///     lock_postgres::advisory_key("my first Postgres advisory lock!"),
///     -5560419505042474287,
/// );
/// ```
///
/// [`PostgresAdvisoryLock`]: crate::PostgresAdvisoryLock
#[must_use]
pub fn advisory_key(name: &str) -> i64 {
    let hkdf = Hkdf::<Sha256>::new(None, name.as_bytes());
    let mut key = [0u8; 8];
    hkdf.expand(SQLX_INFO, &mut key)
        .expect("8 bytes is a valid HKDF-SHA256 output length");
    i64::from_le_bytes(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sqlx_keys() {
        // sqlx's documented example (`PgAdvisoryLock::new`'s doc test).
        assert_eq!(
            advisory_key("my first Postgres advisory lock!"),
            -5_560_419_505_042_474_287
        );
        // tests/it/advisory_interop.rs compares many more names with sqlx itself.
        assert_ne!(advisory_key("order:42"), advisory_key("order:43"));
    }
}
