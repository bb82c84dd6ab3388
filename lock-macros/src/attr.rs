//! Parsing the attribute's arguments: the name template (or a bracketed list of them, for a
//! multi-lock), then `key = value` options and the `skip`, `read` and `write` flags, each
//! checked here with an error spanned on the offending token.
//!
//! This file reads the grammar and dispatches each option; the option families keep their
//! values and their rules: `kinds` (which lock), `lease` (how long), `list` (a multi-lock's
//! templates), and `values` the value shapes they share.

mod kinds;
mod lease;
mod list;
mod values;

use std::time::Duration;

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, Ident, LitStr, Token};

use self::kinds::KindOptions;
use self::lease::LeaseOptions;
use self::values::{duration_value, label_value, no_value, set};

pub(crate) use self::kinds::LockKind;
pub(crate) use self::values::combine;

mod kw {
    syn::custom_keyword!(ttl);
    syn::custom_keyword!(wait);
    syn::custom_keyword!(skip);
    syn::custom_keyword!(stop_on_shutdown);
    syn::custom_keyword!(renew);
    syn::custom_keyword!(max_hold);
    syn::custom_keyword!(min_hold);
    syn::custom_keyword!(lock_delay);
    syn::custom_keyword!(locker);
    syn::custom_keyword!(name);
    syn::custom_keyword!(read);
    syn::custom_keyword!(fair);
    syn::custom_keyword!(write);
    syn::custom_keyword!(permits);
    syn::custom_keyword!(max);
}

/// The options, in the order the docs list them.
const OPTIONS: &str = "`read`, `write`, `fair`, `permits`, `max`, `ttl`, `wait`, `skip`, `renew`, \
                       `max_hold`, `min_hold`, `lock_delay`, `stop_on_shutdown`, `locker`, `name`";

#[derive(Clone)]
/// The parsed arguments of `#[distributed_lock("template", options...)]` or
/// `#[distributed_lock(["template", ...], options...)]`.
pub(crate) struct Args {
    /// The lock name templates, as written: one, or those of the list (at least one).
    pub(crate) templates: Vec<LitStr>,
    /// The span of the list's brackets when the templates were written as a list: the function
    /// then takes a multi-lock (`Locker::lock_all`), even for a list of one.
    pub(crate) list: Option<Span>,
    /// The kind options: `read`, `write`, `fair`, `permits`, `max`.
    pub(crate) kinds: KindOptions,
    /// The lease options: `ttl`, `renew`, `max_hold`, `min_hold`, `lock_delay`.
    pub(crate) lease: LeaseOptions,
    /// How long to wait for a held lock.
    pub(crate) wait: Option<crate::duration::Timed>,
    /// When busy past `wait`, skip the body instead of returning an error.
    pub(crate) skip: Option<Span>,
    /// Tie the lock to the process's stop signal (`distlock::shutdown()`).
    pub(crate) stop_on_shutdown: Option<Span>,
    /// The `Locker` to use; else the process-wide default.
    pub(crate) locker: Option<Expr>,
    /// The metrics label; else the template (the templates joined with `+` for a list).
    pub(crate) name: Option<LitStr>,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.is_empty() {
            return Err(input.error(
                "expected a lock name template, as in #[distributed_lock(\"order:{order_id}\")]",
            ));
        }
        let (templates, list) = if input.peek(syn::token::Bracket) {
            let (templates, brackets) = list::template_list(input)?;
            (templates, Some(brackets))
        } else {
            let template: LitStr = input.parse().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    "the first argument is the lock name template, a string literal such as \"order:{order_id}\", \
                     or a list of them for a multi-lock: [\"account:{from}\", \"account:{to}\"]",
                )
            })?;
            (vec![template], None)
        };
        let mut args = Self {
            templates,
            list,
            kinds: KindOptions::default(),
            lease: LeaseOptions::default(),
            wait: None,
            skip: None,
            stop_on_shutdown: None,
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
    /// One option: its keyword, then its value, handed to the family that keeps it. One
    /// lookahead peeks every keyword, in a fixed order, so that its error lists them all.
    fn parse_option(&mut self, input: ParseStream<'_>) -> syn::Result<()> {
        let look = input.lookahead1();
        let multi = self.is_multi();
        if look.peek(kw::ttl) {
            let key: kw::ttl = input.parse()?;
            set(&mut self.lease.ttl, duration_value(input)?, key.span, "ttl")
        } else if look.peek(kw::wait) {
            let key: kw::wait = input.parse()?;
            set(&mut self.wait, duration_value(input)?, key.span, "wait")
        } else if look.peek(kw::max_hold) {
            let key: kw::max_hold = input.parse()?;
            let value = duration_value(input)?;
            set(&mut self.lease.max_hold, value, key.span, "max_hold")
        } else if look.peek(kw::min_hold) {
            let key: kw::min_hold = input.parse()?;
            let value = duration_value(input)?;
            set(&mut self.lease.min_hold, value, key.span, "min_hold")
        } else if look.peek(kw::lock_delay) {
            let key: kw::lock_delay = input.parse()?;
            let value = duration_value(input)?;
            set(&mut self.lease.lock_delay, value, key.span, "lock_delay")
        } else if look.peek(kw::stop_on_shutdown) {
            let key: kw::stop_on_shutdown = input.parse()?;
            no_value(input, "stop_on_shutdown")?;
            set(
                &mut self.stop_on_shutdown,
                key.span,
                key.span,
                "stop_on_shutdown",
            )
        } else if look.peek(kw::skip) {
            let key: kw::skip = input.parse()?;
            no_value(input, "skip")?;
            set(&mut self.skip, key.span, key.span, "skip")
        } else if look.peek(kw::read) {
            let key: kw::read = input.parse()?;
            self.kinds.flag(input, "read", key.span, multi)
        } else if look.peek(kw::fair) {
            let key: kw::fair = input.parse()?;
            self.kinds.flag(input, "fair", key.span, multi)
        } else if look.peek(kw::write) {
            let key: kw::write = input.parse()?;
            self.kinds.flag(input, "write", key.span, multi)
        } else if look.peek(kw::permits) {
            let key: kw::permits = input.parse()?;
            self.kinds.count(input, "permits", key.span, multi)
        } else if look.peek(kw::max) {
            let key: kw::max = input.parse()?;
            self.kinds.count(input, "max", key.span, multi)
        } else if look.peek(kw::renew) {
            let key: kw::renew = input.parse()?;
            let value = lease::renew_value(input)?;
            set(&mut self.lease.renew, value, key.span, "renew")
        } else if look.peek(kw::locker) {
            let key: kw::locker = input.parse()?;
            input.parse::<Token![=]>()?;
            set(&mut self.locker, input.parse()?, key.span, "locker")
        } else if look.peek(kw::name) {
            let key: kw::name = input.parse()?;
            set(&mut self.name, label_value(input)?, key.span, "name")
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

    /// Whether the templates were written as a list: a multi-lock.
    pub(crate) fn is_multi(&self) -> bool {
        self.list.is_some()
    }

    /// The first template: the only one, or the list's first.
    pub(crate) fn first_template(&self) -> &LitStr {
        &self.templates[0]
    }

    /// The metrics label: the `name` option, else the template, or for a list the templates
    /// joined with `+` (`"account:{from}+account:{to}"`): text written in the source, so the
    /// number of series stays bounded.
    pub(crate) fn label(&self) -> LitStr {
        if let Some(name) = &self.name {
            return name.clone();
        }
        let first = self.first_template();
        if self.templates.len() == 1 {
            return first.clone();
        }
        let joined: Vec<String> = self.templates.iter().map(LitStr::value).collect();
        LitStr::new(&joined.join("+"), first.span())
    }

    /// What the function locks.
    pub(crate) fn kind(&self) -> LockKind {
        self.kinds.kind()
    }

    /// The rules that tie options together, all reported at once: the kind's, then the
    /// lease's.
    fn check(&self) -> syn::Result<()> {
        let mut errors = Vec::new();
        self.kinds.check(&mut errors);
        self.lease.check(&mut errors);
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
