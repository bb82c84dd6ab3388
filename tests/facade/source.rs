//! Reading the workspace's sources: files, and the public names a `lib.rs` declares.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The workspace root (the facade's directory).
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The text of `path`, relative to the workspace root.
pub(crate) fn read(path: impl AsRef<Path>) -> String {
    let path = root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// `text` without its `//` comments (doc comments included) and string literals' contents are
/// kept: a `pub use` never sits in one.
pub(crate) fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names a crate root (`lib.rs` text) makes public at its top level: `pub use` lists (the
/// last segment of each path, or its `as` name; globs left out), and `pub mod`, `pub const`,
/// `pub static`, `pub fn`, `pub struct`, `pub enum`, `pub trait`, `pub type` items.
/// `#[doc(hidden)]` ones are left out: they are not part of what the crate offers. The items of
/// a `lock_core::backend_exports!` call count as `pub use`s of theirs.
pub(crate) fn public_names(lib_rs: &str) -> BTreeSet<String> {
    let code = strip_comments(lib_rs);
    let mut names = BTreeSet::new();
    let mut hidden = false;
    let mut rest = code.as_str();
    while let Some(token) = next_token(&mut rest) {
        match token {
            "#" => {
                let attribute = take_until(&mut rest, ']');
                if attribute.replace(' ', "").contains("doc(hidden)") {
                    hidden = true;
                }
                continue;
            }
            "pub" => {
                if rest.trim_start().starts_with('(') {
                    // `pub(crate)`: not public.
                    take_until(&mut rest, ')');
                    hidden = false;
                    continue;
                }
                let keyword = next_token(&mut rest).unwrap_or_default();
                let keyword = if matches!(keyword, "async" | "const" | "unsafe")
                    && rest.trim_start().starts_with("fn")
                {
                    next_token(&mut rest).unwrap_or_default()
                } else {
                    keyword
                };
                if keyword == "use" {
                    let tree = take_until(&mut rest, ';');
                    if !hidden {
                        use_tree_names(&tree, &mut names);
                    }
                } else if matches!(
                    keyword,
                    "mod" | "const" | "static" | "fn" | "struct" | "enum" | "trait" | "type"
                ) {
                    let name = next_token(&mut rest).unwrap_or_default();
                    if !hidden {
                        names.insert(name.to_owned());
                    }
                }
                hidden = false;
            }
            // lock-core's `backend_exports!`: each argument's item, and `LockError`.
            "backend_exports" => {
                let body = take_until(&mut rest, '}');
                for argument in body.split(',') {
                    if let Some((_, path)) = argument.split_once(':') {
                        let last = path.trim().rsplit("::").next().unwrap_or_default();
                        if !last.is_empty() {
                            names.insert(last.to_owned());
                        }
                    }
                }
                names.insert("LockError".to_owned());
                hidden = false;
            }
            ";" | "}" => hidden = false,
            _ => {}
        }
    }
    names
}

/// The next identifier or punctuation character of `rest`, consumed.
fn next_token<'a>(rest: &mut &'a str) -> Option<&'a str> {
    *rest = rest.trim_start();
    let first = rest.chars().next()?;
    let len = if first.is_alphanumeric() || first == '_' {
        rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len())
    } else {
        first.len_utf8()
    };
    let (token, tail) = rest.split_at(len);
    *rest = tail;
    Some(token)
}

/// `rest` up to `end`, consumed with it.
fn take_until(rest: &mut &str, end: char) -> String {
    let at = rest.find(end).unwrap_or(rest.len());
    let taken = rest[..at].to_owned();
    *rest = rest.get(at + 1..).unwrap_or("");
    taken
}

/// The names a use tree (`a::{b, c::D as E}`) brings in.
fn use_tree_names(tree: &str, names: &mut BTreeSet<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let close = tree.rfind('}').expect("a use tree's braces close");
        let prefix = tree[..open].trim_end_matches("::");
        let mut depth = 0;
        let mut start = open + 1;
        for (i, c) in tree.char_indices().take(close).skip(open + 1) {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    item_names(prefix, &tree[start..i], names);
                    start = i + 1;
                }
                _ => {}
            }
        }
        item_names(prefix, &tree[start..close], names);
    } else {
        item_names("", tree, names);
    }
}

/// The names one item of a use list brings in (`self` names the prefix's last segment).
fn item_names(prefix: &str, item: &str, names: &mut BTreeSet<String>) {
    let item = item.trim();
    if item.is_empty() || item.ends_with('*') {
        return;
    }
    if item.contains('{') {
        use_tree_names(item, names);
        return;
    }
    // `a::b::self` brings in `b`.
    let item = item.strip_suffix("::self").unwrap_or(item);
    let name = match item.split_once(" as ") {
        Some((_, alias)) => alias.trim(),
        None if item == "self" => prefix.rsplit("::").next().unwrap_or(prefix),
        None => item.rsplit("::").next().unwrap_or(item),
    };
    if name != "_" {
        names.insert(name.to_owned());
    }
}

#[test]
fn public_names_reads_use_lists_items_and_attributes() {
    let lib_rs = "
        mod private;
        pub mod metric;
        pub use a::{B, c::{D, E as F}, g::self};
        // pub use commented::Out;
        #[doc(hidden)]
        pub use hidden::{H, I};
        #[cfg(feature = \"x\")]
        pub use shown::J;
        pub(crate) use inner::K;
        pub use l;
        pub use m::*;
        /// A doc comment.
        #[deprecated(note = \"use `metric::N`\")]
        pub const N: &str = metric::N;
        pub fn o() {}
    ";
    let names: Vec<String> = public_names(lib_rs).into_iter().collect();
    assert_eq!(names, ["B", "D", "F", "J", "N", "g", "l", "metric", "o"]);
}
