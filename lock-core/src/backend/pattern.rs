//! The glob an operator lists locks by (`distlock ls 'orders:*'`), parsed once for every store.

use crate::LockError;

/// A glob over lock names: `*` any run of characters, `?` one character, `[...]` one of a set
/// (the `glob` crate's syntax, which Redis's `SCAN MATCH` shares for these). Each store matches
/// it its own way (Redis on the server, SQL by its literal prefix then here), with the same
/// result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePattern {
    text: String,
    glob: glob::Pattern,
}

impl NamePattern {
    /// Parses `pattern`.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] naming the pattern and what is wrong with it (an unclosed
    /// `[`).
    pub fn new(pattern: &str) -> Result<Self, LockError> {
        let glob = glob::Pattern::new(pattern)
            .map_err(|e| LockError::invalid(format!("bad pattern {pattern:?}: {e}")))?;
        Ok(Self {
            text: pattern.to_owned(),
            glob,
        })
    }

    /// The pattern matching every name (`*`).
    #[must_use]
    pub fn all() -> Self {
        Self::new("*").unwrap_or_else(|_| unreachable!("`*` is a glob"))
    }

    /// Whether `name` matches.
    #[must_use]
    pub fn matches(&self, name: &str) -> bool {
        self.glob.matches(name)
    }

    /// The pattern as given.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// What every matching name starts with: the pattern up to its first `*`, `?`, `[` or
    /// `\` (a store narrows its walk to this prefix, then matches).
    #[must_use]
    pub fn literal_prefix(&self) -> &str {
        let end = self
            .text
            .find(['*', '?', '[', '\\'])
            .unwrap_or(self.text.len());
        &self.text[..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_and_has_a_literal_prefix() {
        let p = NamePattern::new("orders:*:x?").expect("a glob");
        assert!(p.matches("orders:1:xy"));
        assert!(!p.matches("order:1:xy"));
        assert_eq!(p.literal_prefix(), "orders:");
        assert_eq!(NamePattern::all().literal_prefix(), "");
        assert_eq!(
            NamePattern::new("plain").expect("glob").literal_prefix(),
            "plain"
        );
        let err = NamePattern::new("a[").expect_err("unclosed");
        assert!(matches!(err, LockError::InvalidInput { .. }), "{err:?}");
    }
}
