//! Parsing the attribute's arguments: the name template, then `key = value` options and the
//! `skip` flag, each checked here with an error spanned on the offending token.

use std::time::Duration;

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, Ident, LitBool, LitStr, Token};

use crate::duration::{self, Timed};

mod kw {
    syn::custom_keyword!(ttl);
    syn::custom_keyword!(wait);
    syn::custom_keyword!(skip);
    syn::custom_keyword!(renew);
    syn::custom_keyword!(max_hold);
    syn::custom_keyword!(min_hold);
    syn::custom_keyword!(locker);
    syn::custom_keyword!(name);
}

/// The options, in the order the docs list them.
const OPTIONS: &str = "`ttl`, `wait`, `skip`, `renew`, `max_hold`, `min_hold`, `locker`, `name`";

#[derive(Clone)]
/// The parsed arguments of `#[distributed_lock("template", options...)]`.
pub(crate) struct Args {
    /// The lock name template, as written.
    pub(crate) template: LitStr,
    /// A fixed lease (no renewal).
    pub(crate) ttl: Option<Timed>,
    /// How long to wait for a held lock.
    pub(crate) wait: Option<Timed>,
    /// When busy past `wait`, skip the body instead of returning an error.
    pub(crate) skip: Option<Span>,
    /// `renew = true | false`, as written.
    pub(crate) renew: Option<LitBool>,
    /// Stop renewing this long after the grant.
    pub(crate) max_hold: Option<Timed>,
    /// Keep a fixed lease at least this long after the grant, even if the body returns earlier.
    pub(crate) min_hold: Option<Timed>,
    /// The `Locker` to use; else the process-wide default.
    pub(crate) locker: Option<Expr>,
    /// The metrics label; else the template.
    pub(crate) name: Option<LitStr>,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.is_empty() {
            return Err(input.error(
                "expected a lock name template, as in #[distributed_lock(\"order:{order_id}\")]",
            ));
        }
        let template: LitStr = input.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                "the first argument is the lock name template, a string literal such as \"order:{order_id}\"",
            )
        })?;
        let mut args = Self {
            template,
            ttl: None,
            wait: None,
            skip: None,
            renew: None,
            max_hold: None,
            min_hold: None,
            locker: None,
            name: None,
        };
        while !input.is_empty() {
            input.parse::<Token![,]>()?;
            if input.is_empty() {
                break; // a trailing comma
            }
            args.parse_option(input)?;
        }
        args.check()?;
        Ok(args)
    }
}

impl Args {
    fn parse_option(&mut self, input: ParseStream<'_>) -> syn::Result<()> {
        let look = input.lookahead1();
        if look.peek(kw::ttl) {
            let key: kw::ttl = input.parse()?;
            let value = duration_value(input)?;
            set(&mut self.ttl, value, key.span, "ttl")
        } else if look.peek(kw::wait) {
            let key: kw::wait = input.parse()?;
            let value = duration_value(input)?;
            set(&mut self.wait, value, key.span, "wait")
        } else if look.peek(kw::max_hold) {
            let key: kw::max_hold = input.parse()?;
            let value = duration_value(input)?;
            set(&mut self.max_hold, value, key.span, "max_hold")
        } else if look.peek(kw::min_hold) {
            let key: kw::min_hold = input.parse()?;
            let value = duration_value(input)?;
            set(&mut self.min_hold, value, key.span, "min_hold")
        } else if look.peek(kw::skip) {
            let key: kw::skip = input.parse()?;
            if input.peek(Token![=]) {
                return Err(syn::Error::new(
                    input.span(),
                    "`skip` is a flag and takes no value: write `skip`",
                ));
            }
            set(&mut self.skip, key.span, key.span, "skip")
        } else if look.peek(kw::renew) {
            let key: kw::renew = input.parse()?;
            input.parse::<Token![=]>()?;
            let value: LitBool = input.parse().map_err(|e| {
                syn::Error::new(e.span(), "expected `renew = true` or `renew = false`")
            })?;
            set(&mut self.renew, value, key.span, "renew")
        } else if look.peek(kw::locker) {
            let key: kw::locker = input.parse()?;
            input.parse::<Token![=]>()?;
            let value: Expr = input.parse()?;
            set(&mut self.locker, value, key.span, "locker")
        } else if look.peek(kw::name) {
            let key: kw::name = input.parse()?;
            input.parse::<Token![=]>()?;
            let value: LitStr = input.parse().map_err(|e| {
                syn::Error::new(e.span(), "expected a string literal: `name = \"order\"`")
            })?;
            if value.value().is_empty() {
                return Err(syn::Error::new(
                    value.span(),
                    "the metrics label must not be empty",
                ));
            }
            set(&mut self.name, value, key.span, "name")
        } else if input.peek(Ident) || input.peek(syn::Lit) {
            let unknown = input.parse::<proc_macro2::TokenTree>()?;
            Err(syn::Error::new(
                unknown.span(),
                format!("unknown option `{unknown}`; expected one of {OPTIONS}"),
            ))
        } else {
            Err(look.error())
        }
    }

    /// The rules that tie options together, all reported at once.
    fn check(&self) -> syn::Result<()> {
        let mut errors = Vec::new();
        if let Some(ttl) = &self.ttl {
            errors.extend(duration::check_lease("ttl", ttl).err());
        }
        if let Some(min_hold) = &self.min_hold {
            errors.extend(duration::check_lease("min_hold", min_hold).err());
        }
        match (&self.renew, &self.ttl) {
            (Some(renew), Some(_)) if renew.value => errors.push(syn::Error::new(
                renew.span(),
                "`renew = true` conflicts with `ttl`: a fixed `ttl` is never renewed, and a \
                 renewed lease lasts the locker's lease (`LockerBuilder::lease`); drop one of them",
            )),
            (Some(renew), None) if !renew.value => errors.push(syn::Error::new(
                renew.span(),
                "`renew = false` needs a `ttl = \"...\"`: a lease that is not renewed must say \
                 how long it lasts",
            )),
            _ => {}
        }
        if let Some(max_hold) = &self.max_hold {
            if self.ttl.is_some() {
                errors.push(syn::Error::new(
                    max_hold.span,
                    "`max_hold` caps renewal, and a lease with a fixed `ttl` is not renewed",
                ));
            } else if max_hold.duration.is_zero() {
                errors.push(syn::Error::new(
                    max_hold.span,
                    "`max_hold` must be longer than zero",
                ));
            }
        }
        if let Some(min_hold) = &self.min_hold {
            match &self.ttl {
                None => errors.push(syn::Error::new(
                    min_hold.span,
                    "`min_hold` needs a fixed `ttl = \"...\"` (ShedLock's lockAtMostFor) that is \
                     at least as long",
                )),
                Some(ttl) if min_hold.duration > ttl.duration => errors.push(syn::Error::new(
                    min_hold.span,
                    format!(
                        "`min_hold` ({}) is longer than the `ttl` ({}): the lease ends at the ttl",
                        humantime::format_duration(min_hold.duration),
                        humantime::format_duration(ttl.duration)
                    ),
                )),
                Some(_) => {}
            }
        }
        combine(errors)
    }

    /// The wait when none was given: `None` (the locker's default) for the error policy, zero
    /// (one try) for `skip`.
    pub(crate) fn wait(&self) -> Option<Duration> {
        match (&self.wait, self.skip) {
            (Some(wait), _) => Some(wait.duration),
            (None, Some(_)) => Some(Duration::ZERO),
            (None, None) => None,
        }
    }
}

/// `= "30s"`: a duration string.
fn duration_value(input: ParseStream<'_>) -> syn::Result<Timed> {
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

/// Stores an option's value, refusing a second one.
fn set<T>(slot: &mut Option<T>, value: T, key: Span, name: &str) -> syn::Result<()> {
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
