//! Property tests of template parsing: any string is either accepted or rejected with an
//! error (never a panic), and an accepted template renders to exactly its text with each
//! placeholder replaced by its expression and each `{{`/`}}` by a brace.

use proc_macro2::Span;
use proptest::prelude::*;
use syn::LitStr;

use super::{SelfName, Template, parse};
use crate::params::Params;

/// The method the templates are checked against.
const METHOD: &str =
    "async fn settle(&self, id: u64, order: Order, pair: (u8, u8), r#type: u8) -> u8 { 0 }";

/// Placeholders that name something of [`METHOD`], and the expression each becomes (with
/// the receiver spelled as `self`; `#[async_trait]` bodies spell it `__self`).
const PLACEHOLDERS: &[(&str, &str)] = &[
    ("id", "id"),
    ("order", "order"),
    ("order.customer.id", "order.customer.id"),
    ("pair.0", "pair.0"),
    ("pair.1", "pair.1"),
    ("type", "r#type"),
    ("self", "self"),
    ("self.tenant", "self.tenant"),
];

fn params() -> (Params, syn::Ident) {
    let method: syn::ImplItemFn = syn::parse_str(METHOD).expect("the test method parses");
    (Params::of(&method.sig), method.sig.ident)
}

fn check(text: &str, self_name: SelfName) -> syn::Result<Template> {
    let (params, name) = params();
    parse(
        &LitStr::new(text, Span::call_site()),
        &params,
        &name,
        self_name,
    )
}

/// Renders a format string the way `format!` would, with each `{}` replaced by the next
/// argument's source text; `None` if `format!` would reject it (a stray brace, a spec).
fn render(format: &str, args: &[String]) -> Option<String> {
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('{', Some('{')) | ('}', Some('}')) => {
                out.push(c);
                chars.next();
            }
            ('{', Some('}')) => {
                out.push_str(args.next()?);
                chars.next();
            }
            ('{' | '}', _) => return None,
            _ => out.push(c),
        }
    }
    // Every argument used, as `format!` demands.
    args.next().is_none().then_some(out)
}

fn rendered(template: &Template) -> Option<String> {
    let args: Vec<String> = template
        .args
        .iter()
        .map(|arg| arg.to_string().split_whitespace().collect())
        .collect();
    render(&template.format, &args)
}

/// A piece of a well-formed template.
#[derive(Debug, Clone)]
enum Piece {
    /// Literal text, any characters; braces get escaped.
    Text(String),
    /// One of [`PLACEHOLDERS`].
    Placeholder(usize),
}

fn pieces() -> impl Strategy<Value = Vec<Piece>> {
    let piece = prop_oneof![
        any::<String>().prop_map(Piece::Text),
        "[{}a-z:. ]{0,6}".prop_map(Piece::Text),
        (0..PLACEHOLDERS.len()).prop_map(Piece::Placeholder),
    ];
    proptest::collection::vec(piece, 0..8)
}

/// The template text and what it must render to.
fn spell(pieces: &[Piece], self_name: SelfName) -> (String, String) {
    let mut text = String::new();
    let mut expected = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(raw) => {
                text.push_str(&raw.replace('{', "{{").replace('}', "}}"));
                expected.push_str(raw);
            }
            Piece::Placeholder(i) => {
                let (placeholder, expr) = PLACEHOLDERS[*i];
                text.push_str(&format!("{{{placeholder}}}"));
                match self_name {
                    SelfName::AsyncTrait => expected.push_str(&expr.replace("self", "__self")),
                    SelfName::SelfValue => expected.push_str(expr),
                }
            }
        }
    }
    (text, expected)
}

/// `true`: the body of an `#[async_trait]` method, where the receiver is `__self`.
fn self_name(in_async_trait: bool) -> SelfName {
    if in_async_trait {
        SelfName::AsyncTrait
    } else {
        SelfName::SelfValue
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    // Any text at all: an answer, never a panic; an accepted template is a valid format
    // string with one argument per `{}`; a rejected one says why.
    #[test]
    fn any_text_is_accepted_or_rejected(
        text in prop_oneof![any::<String>(), "[{}a-z0-9_:. ]{0,24}", "(\\{?[a-z.0-9]{0,10}\\}?){0,4}"],
        in_async_trait in any::<bool>(),
    ) {
        match check(&text, self_name(in_async_trait)) {
            Ok(template) => {
                prop_assert!(!text.is_empty());
                prop_assert!(rendered(&template).is_some(), "format {:?}", template.format);
            }
            Err(error) => {
                prop_assert!(!error.to_string().is_empty());
                let _ = error.to_compile_error(); // renders without panicking
            }
        }
    }

    // Text and placeholders put together with escaped braces: accepted, and rendered to the
    // text verbatim with each placeholder's expression in its place.
    #[test]
    fn well_formed_templates_render_their_text_verbatim(pieces in pieces(), in_async_trait in any::<bool>()) {
        let self_name = self_name(in_async_trait);
        let (text, expected) = spell(&pieces, self_name);
        match check(&text, self_name) {
            Ok(template) => {
                let placeholders = pieces.iter().filter(|p| matches!(p, Piece::Placeholder(_))).count();
                prop_assert_eq!(template.args.len(), placeholders);
                prop_assert_eq!(rendered(&template), Some(expected));
            }
            Err(error) => prop_assert!(text.is_empty(), "{:?} rejected: {}", text, error),
        }
    }

    // Literal braces round-trip: `{{` and `}}` stand for themselves, whatever surrounds them.
    #[test]
    fn escaped_braces_round_trip(raw in "[{}a-z:]{1,24}") {
        let text = raw.replace('{', "{{").replace('}', "}}");
        let template = check(&text, SelfName::SelfValue).expect("only escapes");
        prop_assert!(template.args.is_empty());
        prop_assert_eq!(rendered(&template), Some(raw.clone()));
        prop_assert_eq!(crate::expand::literal_name(&template), raw);
    }

    // One unescaped brace anywhere between the pieces of a good template breaks it.
    #[test]
    fn a_stray_brace_is_always_an_error(
        pieces in pieces(),
        at in any::<proptest::sample::Index>(),
        brace in prop_oneof![Just('{'), Just('}')],
    ) {
        let at = at.index(pieces.len() + 1);
        let (before, _) = spell(&pieces[..at], SelfName::SelfValue);
        let (after, _) = spell(&pieces[at..], SelfName::SelfValue);
        let text = format!("{before}{brace}{after}");
        prop_assert!(check(&text, SelfName::SelfValue).is_err(), "{:?} accepted", text);
    }
}

#[test]
fn placeholders_outside_the_signature_are_rejected() {
    for bad in [
        "{}",
        "{nope}",
        "{id:>8}",
        "{id.}",
        "{id..x}",
        "{pair.99999999999}",
        "{order.fn}",
        "{id",
        "id}",
    ] {
        assert!(check(bad, SelfName::SelfValue).is_err(), "{bad:?}");
    }
    let free: syn::ItemFn = syn::parse_str("async fn f(id: u64) {}").expect("parses");
    let params = Params::of(&free.sig);
    let lit = LitStr::new("{self.id}", Span::call_site());
    assert!(parse(&lit, &params, &free.sig.ident, SelfName::SelfValue).is_err());
}
