//! Human durations (`"30s"`, `"250ms"`, `"1m 30s"`), parsed and checked at compile time.

use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::LitStr;

/// The largest lease a backend accepts: 2^53 − 1 ms (`distlock::MAX_TTL`).
const MAX_LEASE_MS: u128 = (1 << 53) - 1;

/// A duration option's value and where it was written.
#[derive(Clone)]
pub(crate) struct Timed {
    pub(crate) duration: Duration,
    pub(crate) span: Span,
}

/// Parses a duration string with `humantime`'s grammar: numbers with units `ns`, `us`, `ms`,
/// `s`, `m`, `h`, `d`, ... separated by optional spaces.
pub(crate) fn parse(lit: &LitStr) -> syn::Result<Timed> {
    let text = lit.value();
    match humantime::parse_duration(&text) {
        Ok(duration) => Ok(Timed {
            duration,
            span: lit.span(),
        }),
        Err(error) => Err(syn::Error::new(
            lit.span(),
            format!(
                "invalid duration {text:?}: {error}; write it like \"30s\", \"250ms\" or \"1m 30s\""
            ),
        )),
    }
}

/// A lease length (`ttl`, `min_hold`): whole milliseconds, from 1 ms to 2^53 − 1 ms.
pub(crate) fn check_lease(option: &str, timed: &Timed) -> syn::Result<()> {
    let millis = timed.duration.as_millis();
    let reason = if millis == 0 {
        Some("must be at least 1ms")
    } else if !timed.duration.subsec_nanos().is_multiple_of(1_000_000) {
        Some("must be a whole number of milliseconds (leases have millisecond precision)")
    } else if millis > MAX_LEASE_MS {
        Some("must be at most 2^53 - 1 milliseconds")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(syn::Error::new(timed.span, format!("`{option}` {reason}"))),
        None => Ok(()),
    }
}

/// `::core::time::Duration::new(secs, nanos)`.
pub(crate) fn tokens(duration: Duration) -> TokenStream {
    let secs = duration.as_secs();
    let nanos = duration.subsec_nanos();
    quote!(::core::time::Duration::new(#secs, #nanos))
}

/// `Some(duration)` or `None`, as tokens.
pub(crate) fn option_tokens(duration: Option<Duration>) -> TokenStream {
    match duration {
        Some(duration) => {
            let duration = tokens(duration);
            quote!(::core::option::Option::Some(#duration))
        }
        None => quote!(::core::option::Option::None),
    }
}
