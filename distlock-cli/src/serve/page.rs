//! `/`: the console, one self-contained HTML file (inline script and style, no external
//! resource), served with a Content-Security-Policy that lets run only that script and style
//! (their SHA-256 hashes) and lets it talk only to this server.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

/// The page.
pub(crate) const HTML: &str = include_str!("page.html");

/// The Content-Security-Policy of the page: nothing but its own inline script and style (by
/// hash), requests to this server only, no frames, forms, plugins or base URL.
pub(crate) fn content_security_policy() -> String {
    let script = hash_of(inline(HTML, "<script>", "</script>"));
    let style = hash_of(inline(HTML, "<style>", "</style>"));
    format!(
        "default-src 'none'; script-src '{script}'; style-src '{style}'; connect-src 'self'; \
         img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

/// The Content-Security-Policy of everything else (JSON, text): nothing runs.
pub(crate) const API_CSP: &str = "default-src 'none'; frame-ancestors 'none'";

/// The text between the first `open` tag and the next `close` tag.
fn inline<'a>(html: &'a str, open: &str, close: &str) -> &'a str {
    let start = html.find(open).map_or(0, |i| i + open.len());
    let end = html[start..].find(close).map_or(html.len(), |i| start + i);
    &html[start..end]
}

/// `sha256-` and the base64 of the text's SHA-256, as CSP names a hash.
fn hash_of(text: &str) -> String {
    format!(
        "sha256-{}",
        STANDARD.encode(Sha256::digest(text.as_bytes()).as_slice())
    )
}

#[cfg(test)]
mod tests {
    use super::{HTML, content_security_policy, inline};

    #[test]
    fn the_page_has_one_inline_script_and_style_and_no_external_resource() {
        assert_eq!(HTML.matches("<script").count(), 1);
        assert_eq!(HTML.matches("<style").count(), 1);
        assert!(!inline(HTML, "<script>", "</script>").is_empty());
        assert!(!HTML.contains("http://") && !HTML.contains("https://"));
        // The page builds its DOM from text, never from HTML strings.
        assert!(!HTML.contains("innerHTML") && !HTML.contains("outerHTML"));
        assert!(!HTML.contains("insertAdjacentHTML") && !HTML.contains("document.write"));
        assert!(content_security_policy().contains("script-src 'sha256-"));
    }
}
