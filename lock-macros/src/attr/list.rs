//! The templates of a multi-lock: `["account:{from}", "account:{to}"]`, each a string literal,
//! checked here for count and repeats before any is parsed as a template.

use proc_macro2::Span;
use syn::parse::ParseStream;
use syn::spanned::Spanned;
use syn::{Expr, LitStr, Token};

use super::values::combine;

/// The most names one multi-lock may take: `distlock::MAX_MULTI` (a test of the `distlock`
/// crate checks that they agree).
const MAX_MULTI: usize = 64;

/// `["account:{from}", "account:{to}"]`: the templates of a multi-lock, from 1 to
/// [`MAX_MULTI`] string literals, no two the same; and the span of the brackets.
pub(super) fn template_list(input: ParseStream<'_>) -> syn::Result<(Vec<LitStr>, Span)> {
    let content;
    let brackets = syn::bracketed!(content in input);
    let brackets = brackets.span.join();
    let mut elements: syn::punctuated::Punctuated<Expr, Token![,]> =
        syn::punctuated::Punctuated::new();
    while !content.is_empty() {
        elements.push_value(content.parse()?);
        if content.is_empty() {
            break;
        }
        let comma = content.parse::<Token![,]>().map_err(|_| {
            syn::Error::new(
                content.span(),
                "expected `,` or `]` after a template; the options go after the list, as in \
                 #[distributed_lock([\"account:{from}\", \"account:{to}\"], wait = \"2s\")]",
            )
        })?;
        elements.push_punct(comma);
    }
    if elements.is_empty() {
        return Err(syn::Error::new(
            brackets,
            "an empty list locks nothing: give the name templates of a multi-lock, as in \
             [\"account:{from}\", \"account:{to}\"], or a single template",
        ));
    }
    let mut templates: Vec<LitStr> = Vec::with_capacity(elements.len());
    let mut errors = Vec::new();
    for (index, element) in elements.iter().enumerate() {
        if index == MAX_MULTI {
            errors.push(syn::Error::new(
                element.span(),
                format!(
                    "too many templates: a multi-lock takes at most {MAX_MULTI} names \
                     (`distlock::MAX_MULTI`), and this list has {}",
                    elements.len()
                ),
            ));
        }
        match element {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(lit),
                attrs,
            }) if attrs.is_empty() => {
                if templates.iter().any(|seen| seen.value() == lit.value()) {
                    errors.push(syn::Error::new(
                        lit.span(),
                        format!(
                            "the template {:?} is already in the list: it renders the same name; \
                             drop one",
                            lit.value()
                        ),
                    ));
                } else {
                    templates.push(lit.clone());
                }
            }
            other => errors.push(syn::Error::new(
                other.span(),
                "each element of the list is a lock name template, a string literal such as \
                 \"account:{from}\" (not a constant or an expression: templates are checked at \
                 compile time)",
            )),
        }
    }
    combine(errors)?;
    Ok((templates, brackets))
}
