//! The lock name template: `"order:{order_id}"`, `"{self.tenant}:{req.user.id}"`, `{{` / `}}`
//! for literal braces. Each placeholder is a parameter, optionally followed by field names or
//! tuple indices, rendered with `Display`.

use std::ops::Range;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote_spanned};
use syn::LitStr;

use crate::params::Params;

/// A checked template, ready for `::std::format!(format, args...)`.
pub(crate) struct Template {
    /// The template with each placeholder replaced by `{}` (escapes kept).
    pub(crate) format: String,
    /// One expression per placeholder, in order.
    pub(crate) args: Vec<TokenStream>,
}

/// How `self` is spelled where the name is rendered: `self`, or `__self` inside the block that
/// `#[async_trait]` generated (it renames the receiver).
#[derive(Clone, Copy)]
pub(crate) enum SelfName {
    SelfValue,
    AsyncTrait,
}

/// Parses and checks `lit` against the function's parameters; every mistake is reported, each
/// spanned on its placeholder where the compiler allows (nightly), else on the literal.
pub(crate) fn parse(
    lit: &LitStr,
    params: &Params,
    fn_name: &syn::Ident,
    self_name: SelfName,
) -> syn::Result<Template> {
    let text = lit.value();
    if text.is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            "the lock name template is empty: name the lock, as in \"order:{order_id}\"",
        ));
    }
    let mut format = String::with_capacity(text.len());
    let mut args = Vec::new();
    let mut errors = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        match c {
            '{' if chars.peek().is_some_and(|&(_, next)| next == '{') => {
                chars.next();
                format.push_str("{{");
            }
            '}' if chars.peek().is_some_and(|&(_, next)| next == '}') => {
                chars.next();
                format.push_str("}}");
            }
            '}' => errors.push(error_at(
                lit,
                start..start + 1,
                "unmatched `}` in the lock name template; write `}}` for a literal brace",
            )),
            '{' => {
                let Some(end) = text[start..].find('}').map(|i| start + i) else {
                    errors.push(error_at(
                        lit,
                        start..text.len(),
                        "unclosed `{` in the lock name template; write `{{` for a literal brace",
                    ));
                    break;
                };
                while chars.peek().is_some_and(|&(i, _)| i <= end) {
                    chars.next();
                }
                match placeholder(
                    lit,
                    &text[start + 1..end],
                    start..end + 1,
                    params,
                    fn_name,
                    self_name,
                ) {
                    Ok(arg) => {
                        format.push_str("{}");
                        args.push(arg);
                    }
                    Err(error) => errors.push(error),
                }
            }
            c => format.push(c),
        }
    }
    crate::attr::combine(errors)?;
    Ok(Template { format, args })
}

/// One placeholder's expression: `order_id`, `self.tenant`, `req.user.id`, `pair.0`.
fn placeholder(
    lit: &LitStr,
    inner: &str,
    range: Range<usize>,
    params: &Params,
    fn_name: &syn::Ident,
    self_name: SelfName,
) -> syn::Result<TokenStream> {
    let span = span_of(lit, range.clone());
    let fail = |message: String| Err(syn::Error::new(span, message));
    if inner.is_empty() {
        return fail(
            "empty placeholder `{}`: name a parameter, as in `{order_id}`; write `{{}}` for literal braces"
                .to_owned(),
        );
    }
    if let Some(spec) = inner.find(':') {
        return fail(format!(
            "`{{{inner}}}`: format specs (`:{}`) are not supported: placeholders are rendered with \
             `Display`, so that every caller renders the same name",
            &inner[spec + 1..]
        ));
    }
    let mut segments = inner.split('.');
    let root = segments.next().unwrap_or_default();
    let mut expr = if root == "self" {
        match (params.receiver, self_name) {
            (Some(token), SelfName::SelfValue) => quote_spanned!(token.span=> #token),
            (Some(token), SelfName::AsyncTrait) => {
                let renamed = format_ident!("__self", span = token.span);
                quote_spanned!(token.span=> #renamed)
            }
            (None, _) => {
                return fail(format!(
                    "`{{{inner}}}` names `self`, but `{fn_name}` is not a method"
                ));
            }
        }
    } else {
        match params.find(root) {
            Some(ident) => quote_spanned!(ident.span()=> #ident),
            None => {
                return fail(format!(
                    "`{{{inner}}}` names no parameter of `{fn_name}`; {}",
                    params.list()
                ));
            }
        }
    };
    for segment in segments {
        let member = if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            match segment.parse::<u32>() {
                Ok(index) => syn::Member::Unnamed(syn::Index { index, span }),
                Err(_) => {
                    return fail(format!(
                        "`{{{inner}}}`: tuple index `{segment}` is too large"
                    ));
                }
            }
        } else {
            match syn::parse_str::<syn::Ident>(segment) {
                Ok(mut ident) => {
                    ident.set_span(span);
                    syn::Member::Named(ident)
                }
                Err(_) => {
                    return fail(format!(
                        "`{{{inner}}}`: `{segment}` is not a field name; a placeholder is a \
                         parameter followed by field names, as in `{{order.customer.id}}`"
                    ));
                }
            }
        };
        expr = quote_spanned!(span=> #expr.#member);
    }
    Ok(expr)
}

fn error_at(lit: &LitStr, range: Range<usize>, message: &str) -> syn::Error {
    syn::Error::new(span_of(lit, range), message)
}

/// The span of `range` (byte offsets into the literal's value) inside the literal when the
/// compiler can give one (nightly, and a literal written without escapes), else the literal's.
fn span_of(lit: &LitStr, range: Range<usize>) -> Span {
    let written = lit.token().to_string();
    let plain = written.len() == lit.value().len() + 2 && written.starts_with('"');
    plain
        .then(|| lit.token().subspan(range.start + 1..range.end + 1))
        .flatten()
        .unwrap_or_else(|| lit.span())
}

#[cfg(test)]
mod tests;
