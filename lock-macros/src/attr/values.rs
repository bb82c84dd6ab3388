//! The shapes an option's value takes, shared by every option family: a duration string, no
//! value after a flag, one value per option, and the errors of a whole attribute at once.

use proc_macro2::Span;
use syn::parse::ParseStream;
use syn::{LitStr, Token};

use crate::duration::{self, Timed};

/// `= "30s"`: a duration string.
pub(super) fn duration_value(input: ParseStream<'_>) -> syn::Result<Timed> {
    input.parse::<Token![=]>()?;
    let lit: syn::Lit = input.parse()?;
    match lit {
        syn::Lit::Str(lit) => duration::parse(&lit),
        other => Err(syn::Error::new(
            other.span(),
            "expected a duration string such as \"30s\", \"250ms\" or \"1m 30s\"",
        )),
    }
}

/// `= "order"`: the metrics label, a string literal that is not empty.
pub(super) fn label_value(input: ParseStream<'_>) -> syn::Result<LitStr> {
    input.parse::<Token![=]>()?;
    let value: LitStr = input
        .parse()
        .map_err(|e| syn::Error::new(e.span(), "expected a string literal: `name = \"order\"`"))?;
    if value.value().is_empty() {
        return Err(syn::Error::new(
            value.span(),
            "the metrics label must not be empty",
        ));
    }
    Ok(value)
}

/// Refuses `= value` after a flag.
pub(super) fn no_value(input: ParseStream<'_>, flag: &str) -> syn::Result<()> {
    if input.peek(Token![=]) {
        return Err(syn::Error::new(
            input.span(),
            format!("`{flag}` is a flag and takes no value: write `{flag}`"),
        ));
    }
    Ok(())
}

/// Stores an option's value, refusing a second one.
pub(super) fn set<T>(slot: &mut Option<T>, value: T, key: Span, name: &str) -> syn::Result<()> {
    if slot.is_some() {
        return Err(syn::Error::new(key, format!("duplicate option `{name}`")));
    }
    *slot = Some(value);
    Ok(())
}

/// All errors as one (each keeps its span), or `Ok` when there are none.
pub(crate) fn combine(errors: Vec<syn::Error>) -> syn::Result<()> {
    let mut errors = errors.into_iter();
    match errors.next() {
        None => Ok(()),
        Some(mut first) => {
            for error in errors {
                first.combine(error);
            }
            Err(first)
        }
    }
}
