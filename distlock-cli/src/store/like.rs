//! A glob as a SQL `LIKE` pattern, for the stores still read here (MySQL's tables).

/// The `LIKE` pattern of a glob: its `*` and `?` as `%` and `_`, up to its first `[` (where
/// `%` ends it); `%`, `_` and `\` escaped. Never narrower than the glob.
pub(super) fn like_prefix(glob: &str) -> String {
    let mut like = String::with_capacity(glob.len() + 1);
    for c in glob.chars() {
        match c {
            '*' => like.push('%'),
            '?' => like.push('_'),
            '[' => {
                like.push('%');
                return like;
            }
            '%' | '_' | '\\' => {
                like.push('\\');
                like.push(c);
            }
            c => like.push(c),
        }
    }
    like
}

#[cfg(test)]
mod tests {
    use super::like_prefix;

    #[test]
    fn like_patterns_are_never_narrower_than_the_glob() {
        assert_eq!(like_prefix("*"), "%");
        assert_eq!(like_prefix("order:1?"), "order:1_");
        assert_eq!(like_prefix("a_b%c\\*"), "a\\_b\\%c\\\\%");
        assert_eq!(like_prefix("job:[ab]*x"), "job:%");
        assert_eq!(like_prefix("exact"), "exact");
    }
}
