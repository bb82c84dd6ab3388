//! The lease options: a fixed `ttl`, `renew`, `max_hold`, `min_hold` and `lock_delay`. They say how long the
//! lock is held, and the rules between them keep a lease either fixed or renewed.

use syn::parse::ParseStream;
use syn::{LitBool, Token};

use crate::duration::{self, Timed};

/// The lease options as written, each with where it was written.
#[derive(Clone, Default)]
pub(crate) struct LeaseOptions {
    /// A fixed lease (no renewal).
    pub(crate) ttl: Option<Timed>,
    /// `renew = true | false`, as written.
    pub(crate) renew: Option<LitBool>,
    /// Stop renewing this long after the grant.
    pub(crate) max_hold: Option<Timed>,
    /// Keep a fixed lease at least this long after the grant, even if the body returns earlier.
    pub(crate) min_hold: Option<Timed>,
    /// Keep the name this long after a lease that ended by expiry (Chubby's lock-delay).
    pub(crate) lock_delay: Option<Timed>,
}

/// `= true` or `= false`, after `renew`.
pub(super) fn renew_value(input: ParseStream<'_>) -> syn::Result<LitBool> {
    input.parse::<Token![=]>()?;
    input
        .parse()
        .map_err(|e| syn::Error::new(e.span(), "expected `renew = true` or `renew = false`"))
}

impl LeaseOptions {
    /// The rules that tie the lease options together, once every option is read.
    pub(super) fn check(&self, errors: &mut Vec<syn::Error>) {
        if let Some(ttl) = &self.ttl {
            errors.extend(duration::check_lease("ttl", ttl).err());
        }
        if let Some(min_hold) = &self.min_hold {
            errors.extend(duration::check_lease("min_hold", min_hold).err());
        }
        if let Some(lock_delay) = &self.lock_delay {
            errors.extend(duration::check_lease("lock_delay", lock_delay).err());
        }
        self.check_renew(errors);
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
        self.check_min_hold(errors);
    }

    /// `renew = true` goes without a `ttl`, `renew = false` with one.
    fn check_renew(&self, errors: &mut Vec<syn::Error>) {
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
    }

    /// `min_hold` needs a `ttl` at least as long.
    fn check_min_hold(&self, errors: &mut Vec<syn::Error>) {
        let Some(min_hold) = &self.min_hold else {
            return;
        };
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
}
