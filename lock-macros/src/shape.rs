//! Which kind of function the attribute sits on. This module only recognises; the code is
//! generated in `expand`.
//!
//! Two shapes are accepted:
//!
//! - an `async fn`, whose body is the user's;
//! - a plain `fn` that `#[async_trait]` produced from a method. `#[async_trait]` sits on the
//!   impl, so it expands first and hands this attribute a `fn` whose body is
//!
//!   ```text
//!   Box::pin(async move {
//!       if let Some(__ret) = None::<Ret> { return __ret; }
//!       let __self = self;            // the receiver, renamed in the body
//!       let x = x;                     // each parameter moved in
//!       let __ret: Ret = { BODY };     // `let _: () = { BODY };` without a return type
//!       __ret
//!   })
//!   ```
//!
//!   We recognise that shape (as `tracing::instrument` does), so that `BODY` goes under the
//!   lock after the parameters were moved in, spelling the receiver `__self` like the body does.

use syn::{Block, Expr, Ident, Pat, Signature, Stmt, Type};

use crate::params::Params;

/// The function the attribute sits on, as far as the expansion cares.
pub(crate) enum Shape<'a> {
    /// An `async fn`: its own body goes under the lock.
    AsyncFn,
    /// A method that `#[async_trait]` already desugared.
    AsyncTrait(Desugared<'a>),
}

/// The user's body inside a desugared `#[async_trait]` method.
pub(crate) struct Desugared<'a> {
    /// The names the method's parameters bind, from the `let`s that move them in (the
    /// signature's patterns became `__argN`); not the renamed receiver.
    pub(crate) names: Vec<Ident>,
    /// `Ret` in `let __ret: Ret = { BODY };` (`()` without a return type).
    pub(crate) ret: &'a Type,
    /// `{ BODY }`, which the expansion replaces.
    pub(crate) body: &'a mut Block,
}

/// Recognises the function from its signature and body, or says why the attribute cannot go
/// on it.
///
/// # Errors
///
/// A `const fn`, and a plain `fn` that is not `#[async_trait]`'s desugaring.
pub(crate) fn of<'a>(sig: &Signature, block: &'a mut Block) -> syn::Result<Shape<'a>> {
    if let Some(constness) = sig.constness {
        return Err(syn::Error::new(
            constness.span,
            "`#[distributed_lock]` cannot go on a `const fn`: taking a lock is I/O at run time",
        ));
    }
    if sig.asyncness.is_some() {
        return Ok(Shape::AsyncFn);
    }
    desugared(&mut block.stmts)
        .map(Shape::AsyncTrait)
        .ok_or_else(|| {
            syn::Error::new(
                sig.fn_token.span,
                "`#[distributed_lock]` needs an `async fn`: taking the lock waits for the backend",
            )
        })
}

/// The user's body inside `Box::pin(async move { .. })`, when the statements have
/// `#[async_trait]`'s shape.
fn desugared(stmts: &mut [Stmt]) -> Option<Desugared<'_>> {
    let [Stmt::Expr(Expr::Call(call), None)] = stmts else {
        return None;
    };
    let Expr::Path(func) = &*call.func else {
        return None;
    };
    let segments: Vec<String> = func
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    if !segments.ends_with(&["Box".to_owned(), "pin".to_owned()]) || call.args.len() != 1 {
        return None;
    }
    let Some(Expr::Async(block)) = call.args.first_mut() else {
        return None;
    };
    block.capture?;
    let stmts = &mut block.block.stmts;
    let at = stmts
        .iter()
        .rposition(|stmt| matches!(stmt, Stmt::Local(local) if is_ret_pattern(&local.pat)))?;
    let (before, rest) = stmts.split_at_mut(at);
    let mut names = Vec::new();
    for stmt in before {
        if let Stmt::Local(local) = stmt {
            names.extend(
                Params::bound_by(&local.pat)
                    .into_iter()
                    .filter(|n| n != "__self"),
            );
        }
    }
    let Some(Stmt::Local(local)) = rest.first_mut() else {
        return None;
    };
    let Pat::Type(typed) = &local.pat else {
        return None;
    };
    let init = local.init.as_mut()?;
    let Expr::Block(body) = &mut *init.expr else {
        return None;
    };
    Some(Desugared {
        names,
        ret: &typed.ty,
        body: &mut body.block,
    })
}

/// `__ret: Ret` or `_: ()`.
fn is_ret_pattern(pat: &Pat) -> bool {
    let Pat::Type(typed) = pat else {
        return false;
    };
    match &*typed.pat {
        Pat::Ident(ident) => ident.ident == "__ret",
        Pat::Wild(_) => true,
        _ => false,
    }
}
