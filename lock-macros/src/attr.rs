//! Parsing the attribute's arguments: the name template (or a bracketed list of them, for a
//! multi-lock), then `key = value` options and the `skip`, `read` and `write` flags, each
//! checked here with an error spanned on the offending token.

use std::time::Duration;

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
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
    syn::custom_keyword!(read);
    syn::custom_keyword!(fair);
    syn::custom_keyword!(write);
    syn::custom_keyword!(permits);
    syn::custom_keyword!(max);
}

/// The options, in the order the docs list them.
const OPTIONS: &str = "`read`, `write`, `fair`, `permits`, `max`, `ttl`, `wait`, `skip`, `renew`, \
                       `max_hold`, `min_hold`, `locker`, `name`";

/// The most permits a semaphore may have: `distlock::MAX_PERMITS` (a test of this crate checks
/// that they agree).
pub(crate) const MAX_PERMITS: u32 = 1_000_000;

/// The most names one multi-lock may take: `distlock::MAX_MULTI` (a test of the `distlock`
/// crate checks that they agree).
pub(crate) const MAX_MULTI: usize = 64;

/// What the function locks, from the kind options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockKind {
    /// No kind option: the exclusive lock (`Locker::lock`).
    Mutex,
    /// `read`: a read share of a read-write lock (`Locker::read`).
    Read,
    /// `write`: the write lock of a read-write lock (`Locker::write`).
    Write,
    /// `fair`: the exclusive lock, granted in the order processes asked (`Locker::fair`).
    Fair,
    /// `max` (and `permits`): permits of a counting semaphore (`Locker::semaphore`).
    Semaphore {
        /// The permits each call takes at once.
        permits: u32,
        /// The permits the semaphore has.
        max: u32,
    },
}

/// A count option's value (`permits = 2`, `max = 8`) and where it was written.
#[derive(Clone)]
pub(crate) struct Count {
    pub(crate) value: u32,
    /// The option's name.
    pub(crate) key: Span,
    /// The literal.
    pub(crate) span: Span,
}

#[derive(Clone)]
/// The parsed arguments of `#[distributed_lock("template", options...)]` or
/// `#[distributed_lock(["template", ...], options...)]`.
pub(crate) struct Args {
    /// The lock name templates, as written: one, or those of the list (at least one).
    pub(crate) templates: Vec<LitStr>,
    /// The span of the list's brackets when the templates were written as a list: the function
    /// then takes a multi-lock (`Locker::lock_all`), even for a list of one.
    pub(crate) list: Option<Span>,
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
    /// The metrics label; else the template (the templates joined with `+` for a list).
    pub(crate) name: Option<LitStr>,
    /// `read`: a read share of a read-write lock.
    pub(crate) read: Option<Span>,
    /// `write`: the write lock of a read-write lock.
    pub(crate) write: Option<Span>,
    /// `fair`: the fair lock.
    pub(crate) fair: Option<Span>,
    /// `permits = k`: the semaphore permits a call takes (needs `max`).
    pub(crate) permits: Option<Count>,
    /// `max = n`: a counting semaphore with `n` permits.
    pub(crate) max: Option<Count>,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.is_empty() {
            return Err(input.error(
                "expected a lock name template, as in #[distributed_lock(\"order:{order_id}\")]",
            ));
        }
        let (templates, list) = if input.peek(syn::token::Bracket) {
            let (templates, brackets) = template_list(input)?;
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
            ttl: None,
            wait: None,
            skip: None,
            renew: None,
            max_hold: None,
            min_hold: None,
            locker: None,
            name: None,
            read: None,
            fair: None,
            write: None,
            permits: None,
            max: None,
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
            no_value(input, "skip")?;
            set(&mut self.skip, key.span, key.span, "skip")
        } else if look.peek(kw::read) {
            let key: kw::read = input.parse()?;
            no_value(input, "read")?;
            self.check_multi_kind("read", key.span)?;
            set(&mut self.read, key.span, key.span, "read")?;
            self.check_kind("read", key.span)
        } else if look.peek(kw::fair) {
            let key: kw::fair = input.parse()?;
            no_value(input, "fair")?;
            self.check_multi_kind("fair", key.span)?;
            set(&mut self.fair, key.span, key.span, "fair")?;
            self.check_kind("fair", key.span)
        } else if look.peek(kw::write) {
            let key: kw::write = input.parse()?;
            no_value(input, "write")?;
            self.check_multi_kind("write", key.span)?;
            set(&mut self.write, key.span, key.span, "write")?;
            self.check_kind("write", key.span)
        } else if look.peek(kw::permits) {
            let key: kw::permits = input.parse()?;
            self.check_multi_kind("permits", key.span)?;
            let value = count_value(input, key.span, "permits")?;
            set(&mut self.permits, value, key.span, "permits")?;
            self.check_kind("permits", key.span)
        } else if look.peek(kw::max) {
            let key: kw::max = input.parse()?;
            self.check_multi_kind("max", key.span)?;
            let value = count_value(input, key.span, "max")?;
            set(&mut self.max, value, key.span, "max")?;
            self.check_kind("max", key.span)
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

    /// Refuses the kind option `option` (just parsed, at `span`) after a list of templates: a
    /// multi-lock takes mutexes only.
    fn check_multi_kind(&self, option: &str, span: Span) -> syn::Result<()> {
        if self.list.is_none() {
            return Ok(());
        }
        Err(syn::Error::new(
            span,
            format!(
                "`{option}` does not go with a list of templates: a multi-lock takes mutexes only \
                 (`Locker::lock_all`); drop `{option}`, or lock one name"
            ),
        ))
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

    /// Refuses the kind option `option` (just parsed, at `span`) when an earlier one asked for
    /// another kind: `read` with `write`, a read-write side with a semaphore's count.
    fn check_kind(&self, option: &str, span: Span) -> syn::Result<()> {
        // `fair` is the exclusive lock taken in turn: no other kind option goes with it.
        let others = [
            ("read", self.read.is_some()),
            ("write", self.write.is_some()),
            ("permits", self.permits.is_some()),
            ("max", self.max.is_some()),
        ];
        let with_fair = if option == "fair" {
            others.iter().find(|(_, set)| *set).map(|(name, _)| *name)
        } else {
            self.fair.map(|_| "fair")
        };
        if let Some(earlier) = with_fair {
            return Err(syn::Error::new(
                span,
                format!(
                    "`{option}` conflicts with `{earlier}`: `fair` takes the exclusive lock in the \
                     order callers asked, and has no read, write or permit form; keep one of them"
                ),
            ));
        }
        let earlier = match option {
            "read" => self.write.map(|_| "write"),
            "write" => self.read.map(|_| "read"),
            _ => None,
        };
        if let Some(earlier) = earlier {
            return Err(syn::Error::new(
                span,
                format!(
                    "`{option}` conflicts with `{earlier}`: a function takes either a read share \
                     (`read`, shared with other readers) or the write lock (`write`, alone) of a \
                     read-write lock; keep one of them"
                ),
            ));
        }
        let side = self.read.map(|_| "read").or(self.write.map(|_| "write"));
        let count = (self.max.as_ref().map(|_| "max")).or(self.permits.as_ref().map(|_| "permits"));
        // (the semaphore option, the read-write option) of the pair, the other one earlier.
        let conflict = match option {
            "read" | "write" => count.map(|count| (count, option)),
            _ => side.map(|side| (option, side)),
        };
        let Some((count, side)) = conflict else {
            return Ok(());
        };
        let earlier = if option == count { side } else { count };
        Err(syn::Error::new(
            span,
            format!(
                "`{option}` conflicts with `{earlier}`: `{count}` is for a semaphore \
                 (`permits = 2, max = 8`), `{side}` for a read-write lock, and a function takes \
                 one kind of lock: drop `{side}`, or drop `permits` and `max`"
            ),
        ))
    }

    /// What the function locks.
    pub(crate) fn kind(&self) -> LockKind {
        if self.read.is_some() {
            LockKind::Read
        } else if self.write.is_some() {
            LockKind::Write
        } else if self.fair.is_some() {
            LockKind::Fair
        } else if let Some(max) = &self.max {
            LockKind::Semaphore {
                permits: self.permits.as_ref().map_or(1, |permits| permits.value),
                max: max.value,
            }
        } else {
            LockKind::Mutex
        }
    }

    /// The rules that tie options together, all reported at once.
    fn check(&self) -> syn::Result<()> {
        let mut errors = Vec::new();
        match (&self.permits, &self.max) {
            (Some(permits), None) => errors.push(syn::Error::new(
                permits.key,
                format!(
                    "`permits` needs `max`, the number of permits the semaphore has (the same \
                     for every holder of the name): write `permits = {}, max = <n>`",
                    permits.value
                ),
            )),
            (Some(permits), Some(max)) if permits.value > max.value => {
                errors.push(syn::Error::new(
                    permits.span,
                    format!(
                        "`permits = {}` is more than `max = {}`: a call takes at most all of the \
                         semaphore's permits; lower `permits` or raise `max`",
                        permits.value, max.value
                    ),
                ));
            }
            _ => {}
        }
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

/// `["account:{from}", "account:{to}"]`: the templates of a multi-lock, from 1 to
/// [`MAX_MULTI`] string literals, no two the same; and the span of the brackets.
fn template_list(input: ParseStream<'_>) -> syn::Result<(Vec<LitStr>, Span)> {
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

/// Refuses `= value` after a flag.
fn no_value(input: ParseStream<'_>, flag: &str) -> syn::Result<()> {
    if input.peek(Token![=]) {
        return Err(syn::Error::new(
            input.span(),
            format!("`{flag}` is a flag and takes no value: write `{flag}`"),
        ));
    }
    Ok(())
}

/// `= 8`: a count of permits, a whole number from 1 to [`MAX_PERMITS`] written as a literal.
fn count_value(input: ParseStream<'_>, key: Span, option: &str) -> syn::Result<Count> {
    input.parse::<Token![=]>()?;
    let what = if option == "max" {
        "the number of permits the semaphore has"
    } else {
        "the permits each call takes at once"
    };
    if input.peek(Token![-]) {
        let minus: Token![-] = input.parse()?;
        return Err(syn::Error::new(
            minus.span,
            format!(
                "`{option}` cannot be negative: it is {what}, a whole number from 1 to {MAX_PERMITS}"
            ),
        ));
    }
    let expected = |span: Span| {
        syn::Error::new(
            span,
            format!(
                "expected a whole number literal such as `{option} = 2`: `{option}` is {what}, \
                 checked at compile time (not a string, a constant or an expression)"
            ),
        )
    };
    let lit: syn::Lit = input.parse().map_err(|e| expected(e.span()))?;
    let syn::Lit::Int(lit) = lit else {
        return Err(expected(lit.span()));
    };
    if !matches!(lit.suffix(), "" | "u32") {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`{option}` is a `u32`: write `{option} = {}`",
                lit.base10_digits()
            ),
        ));
    }
    let value = lit.base10_parse::<u32>().ok().filter(|n| *n <= MAX_PERMITS);
    match value {
        Some(0) => Err(syn::Error::new(
            lit.span(),
            if option == "max" {
                format!("`max` must be at least 1: it is {what}, as in `max = 8`")
            } else {
                format!("`permits` must be at least 1: it is {what} (leave it out for 1)")
            },
        )),
        Some(value) => Ok(Count {
            value,
            key,
            span: lit.span(),
        }),
        None => Err(syn::Error::new(
            lit.span(),
            format!(
                "`{option} = {}` is too large: a semaphore has at most {MAX_PERMITS} permits \
                 (`distlock::MAX_PERMITS`)",
                lit.base10_digits()
            ),
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
