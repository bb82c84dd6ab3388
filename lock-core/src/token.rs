//! Ownership tokens: 128 random bits per acquisition.

use std::fmt;
use std::str::FromStr;

use crate::LockError;

/// Proof of ownership of one acquisition: 128 bits from the operating system's CSPRNG
/// (`getrandom`), fresh for every acquisition, so a stale holder can never match a newer lease.
///
/// Rendered as 32 lowercase hex characters. Backends store that string, or a form of it, under
/// the lock key (`RedisLock` stores `dl:` + hex, so a waiter can tell a distlock holder from
/// another client's).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Token([u8; 16]);

impl Token {
    /// Draws a fresh token from the OS CSPRNG.
    ///
    /// # Errors
    /// [`LockError::Backend`] (backend `"os-rng"`) if the operating system's random source
    /// fails, which on supported platforms does not happen after boot.
    pub fn generate() -> Result<Self, LockError> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| LockError::Backend {
            backend: "os-rng",
            op: crate::Op::Acquire,
            retryable: true,
            source: e.to_string().into(),
        })?;
        Ok(Self(bytes))
    }

    /// A token with the given bytes (for tests and for leases restored from storage).
    #[must_use]
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// The raw 16 bytes.
    #[must_use]
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The 32-character lowercase hex form, without allocating.
    #[must_use]
    pub fn to_hex(&self) -> TokenHex {
        /// Each byte's two hex digits: one look-up per byte, on every acquire and release.
        const PAIRS: [[u8; 2]; 256] = {
            const DIGITS: &[u8; 16] = b"0123456789abcdef";
            let mut pairs = [[0u8; 2]; 256];
            let mut byte = 0;
            while byte < 256 {
                pairs[byte] = [DIGITS[byte >> 4], DIGITS[byte & 0x0f]];
                byte += 1;
            }
            pairs
        };
        let mut out = [0u8; 32];
        for (pair, byte) in out.chunks_exact_mut(2).zip(self.0) {
            pair.copy_from_slice(&PAIRS[usize::from(byte)]);
        }
        TokenHex(out)
    }
}

/// The hex form of a [`Token`], as stored in the backend; `as_str()` borrows it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TokenHex([u8; 32]);

impl TokenHex {
    /// The 32 hex characters, as bytes (ASCII): for a buffer that takes them as they are,
    /// without the UTF-8 check of [`as_str`](Self::as_str).
    #[must_use]
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 32 hex characters.
    #[must_use]
    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever written into the buffer.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Debug for TokenHex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.to_hex().as_str())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({})", self.to_hex().as_str())
    }
}

/// Parsing failed: a token is exactly 32 hex characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a token is 32 hex characters")]
pub struct ParseTokenError;

impl FromStr for Token {
    type Err = ParseTokenError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.as_bytes();
        if s.len() != 32 {
            return Err(ParseTokenError);
        }
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(ParseTokenError),
        };
        let mut bytes = [0u8; 16];
        for (i, pair) in s.chunks_exact(2).enumerate() {
            bytes[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        Ok(Self(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn hex_round_trips() {
        let t = Token::generate().expect("os rng");
        let hex = t.to_hex();
        assert_eq!(hex.as_str().len(), 32);
        assert!(hex.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(hex.as_str().parse::<Token>(), Ok(t));
        assert_eq!(t.to_string(), hex.as_str());
    }

    #[test]
    fn parse_rejects_bad_input() {
        assert_eq!("".parse::<Token>(), Err(ParseTokenError));
        assert_eq!("zz".repeat(16).parse::<Token>(), Err(ParseTokenError));
        assert_eq!("ab".repeat(17).parse::<Token>(), Err(ParseTokenError));
    }

    #[test]
    fn tokens_are_fresh_and_use_every_bit() {
        // 10,000 draws: no repeats, and every one of the 128 bit positions takes both values.
        let mut seen = HashSet::new();
        let (mut ones, mut zeros) = ([0u32; 128], [0u32; 128]);
        for _ in 0..10_000 {
            let t = Token::generate().expect("os rng");
            assert!(seen.insert(t), "token repeated");
            for bit in 0..128 {
                if t.0[bit / 8] >> (bit % 8) & 1 == 1 {
                    ones[bit] += 1;
                } else {
                    zeros[bit] += 1;
                }
            }
        }
        // Each bit is a fair coin: 5,000 ± 5σ (σ = 50).
        for bit in 0..128 {
            assert!(
                (4_750..=5_250).contains(&ones[bit]),
                "bit {bit} biased: {}",
                ones[bit]
            );
            assert_eq!(ones[bit] + zeros[bit], 10_000);
        }
    }
}
