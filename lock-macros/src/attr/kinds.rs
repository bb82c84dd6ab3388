//! The kind options: the flags `read`, `write` and `fair`, and a semaphore's counts `permits`
//! and `max`. Together they say which lock the function takes, and a function takes one kind.

use proc_macro2::Span;
use syn::Token;
use syn::parse::ParseStream;

use super::values::{no_value, set};

/// The most permits a semaphore may have: `distlock::MAX_PERMITS` (a test of this crate checks
/// that they agree).
const MAX_PERMITS: u32 = 1_000_000;

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
struct Count {
    /// The count.
    value: u32,
    /// The option's name.
    key: Span,
    /// The literal.
    span: Span,
}

/// The kind options as written, each with where it was written.
#[derive(Clone, Default)]
pub(crate) struct KindOptions {
    /// `read`: a read share of a read-write lock.
    read: Option<Span>,
    /// `write`: the write lock of a read-write lock.
    write: Option<Span>,
    /// `fair`: the fair lock.
    fair: Option<Span>,
    /// `permits = k`: the semaphore permits a call takes (needs `max`).
    permits: Option<Count>,
    /// `max = n`: a counting semaphore with `n` permits.
    max: Option<Count>,
}

impl KindOptions {
    /// The flag `read`, `write` or `fair` (its keyword just parsed, at `key`); `multi`: after a
    /// list of templates.
    pub(super) fn flag(
        &mut self,
        input: ParseStream<'_>,
        option: &str,
        key: Span,
        multi: bool,
    ) -> syn::Result<()> {
        no_value(input, option)?;
        check_multi_kind(option, key, multi)?;
        let slot = match option {
            "read" => &mut self.read,
            "write" => &mut self.write,
            _ => &mut self.fair,
        };
        set(slot, key, key, option)?;
        self.check_kind(option, key)
    }

    /// The count `permits` or `max` (its keyword just parsed, at `key`) and its value; `multi`:
    /// after a list of templates.
    pub(super) fn count(
        &mut self,
        input: ParseStream<'_>,
        option: &str,
        key: Span,
        multi: bool,
    ) -> syn::Result<()> {
        check_multi_kind(option, key, multi)?;
        let value = count_value(input, key, option)?;
        let slot = if option == "max" {
            &mut self.max
        } else {
            &mut self.permits
        };
        set(slot, value, key, option)?;
        self.check_kind(option, key)
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

    /// The rules between the counts, once every option is read: `permits` needs `max`, and
    /// is at most `max`.
    pub(super) fn check(&self, errors: &mut Vec<syn::Error>) {
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
    }
}

/// Refuses the kind option `option` (just parsed, at `span`) after a list of templates: a
/// multi-lock takes mutexes only.
fn check_multi_kind(option: &str, span: Span, multi: bool) -> syn::Result<()> {
    if !multi {
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
