//! The `GET_LOCK` name of a lock name: MySQL refuses names over 64 characters, so a longer one
//! is replaced by a digest of it.

use sha2::{Digest, Sha256};

/// The longest `GET_LOCK` name MySQL accepts, in characters.
pub const MAX_LOCK_NAME_CHARS: usize = 64;

/// What a hashed name starts with.
pub(crate) const HASHED_PREFIX: &str = "distlock:sha256:";

/// The `GET_LOCK` name `MysqlAdvisoryLock` uses for `name`: `name` itself when it has at most
/// [`MAX_LOCK_NAME_CHARS`] characters, else `distlock:sha256:` followed by the first 48 hex
/// characters (192 bits) of the SHA-256 of its UTF-8 bytes, 64 characters in all. Any other
/// client that locks the same name the same way excludes our holders.
///
/// ```
/// let long = "x".repeat(100);
/// assert_eq!(lock_mysql::advisory_name("jobs"), "jobs");
/// assert_eq!(lock_mysql::advisory_name(&long).chars().count(), 64);
/// assert!(lock_mysql::advisory_name(&long).starts_with("distlock:sha256:"));
/// ```
#[must_use]
pub fn advisory_name(name: &str) -> String {
    if name.chars().count() <= MAX_LOCK_NAME_CHARS {
        return name.to_owned();
    }
    let digest = Sha256::digest(name.as_bytes());
    let mut hashed = String::with_capacity(MAX_LOCK_NAME_CHARS);
    hashed.push_str(HASHED_PREFIX);
    for byte in digest
        .iter()
        .take((MAX_LOCK_NAME_CHARS - HASHED_PREFIX.len()) / 2)
    {
        hashed.push_str(&format!("{byte:02x}"));
    }
    hashed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_hashed_to_64_characters() {
        let name = "é".repeat(64);
        assert_eq!(advisory_name(&name), name, "64 characters (128 bytes) fit");
        let longer = "é".repeat(65);
        let hashed = advisory_name(&longer);
        assert_eq!(hashed.chars().count(), 64);
        assert_ne!(hashed, advisory_name(&"é".repeat(66)));
        // SHA-256("") starts e3b0c442...; a known vector through the same code path.
        let digest = Sha256::digest(b"");
        assert_eq!(format!("{:02x}", digest[0]), "e3");
    }
}
