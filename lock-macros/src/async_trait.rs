//! Methods inside an `#[async_trait]` impl.
//!
//! `#[async_trait]` sits on the impl, so it expands first and hands this attribute a plain
//! `fn` whose body is
//!
//! ```text
//! Box::pin(async move {
//!     if let Some(__ret) = None::<Ret> { return __ret; }
//!     let __self = self;            // the receiver, renamed in the body
//!     let x = x;                     // each parameter moved in
//!     let __ret: Ret = { BODY };     // `let _: () = { BODY };` without a return type
//!     __ret
//! })
//! ```
//!
//! We recognise that shape (as `tracing::instrument` does) and put `BODY` under the lock,
//! after the parameters were moved in, spelling the receiver `__self` like the body does.

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident};
use syn::visit_mut::VisitMut;
use syn::{Expr, Ident, ItemFn, Pat, Stmt};

use crate::attr::Args;
use crate::expand::{self, Output};
use crate::params::Params;
use crate::template::SelfName;

/// The rewritten function when `item` has `#[async_trait]`'s shape, else `None`.
pub(crate) fn expand(args: &Args, item: &mut ItemFn) -> syn::Result<Option<TokenStream>> {
    let mut params = Params::of(&item.sig);
    let fn_name = item.sig.ident.clone();
    let Some((bound, local)) = user_body(&mut item.block.stmts) else {
        return Ok(None);
    };
    // The signature's patterns became `__argN`; the names they bound are `let`s in the block.
    params.names = bound;
    let Pat::Type(typed) = &local.pat else {
        return Ok(None);
    };
    let Some(init) = &mut local.init else {
        return Ok(None);
    };
    let Expr::Block(body) = &mut *init.expr else {
        return Ok(None);
    };
    let templates = expand::templates(args, &params, &fn_name, SelfName::AsyncTrait)?;
    let output = Output::of_type(&typed.ty);
    let mut args = args.clone();
    if let Some(locker) = &mut args.locker {
        RenameSelf.visit_expr_mut(locker);
    }
    let locked = expand::locked_body(&args, &templates, &output, &body.block.stmts);
    body.block = expand::block_of(locked)?;
    Ok(Some(item.to_token_stream()))
}

/// The `let __ret: Ret = { BODY };` statement inside `Box::pin(async move { .. })`, and the
/// names the `let`s before it bind (the parameters, moved in; not the renamed receiver).
fn user_body(stmts: &mut [Stmt]) -> Option<(Vec<Ident>, &mut syn::Local)> {
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
    match rest.first_mut() {
        Some(Stmt::Local(local)) => Some((names, local)),
        _ => None,
    }
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

/// `self` → `__self` in the `locker = ..` expression, as `#[async_trait]` renamed it in the body.
struct RenameSelf;

impl VisitMut for RenameSelf {
    fn visit_expr_path_mut(&mut self, path: &mut syn::ExprPath) {
        if path.qself.is_none() && path.path.is_ident("self") {
            let span = path.path.segments[0].ident.span();
            path.path = format_ident!("__self", span = span).into();
        }
    }

    fn visit_expr_closure_mut(&mut self, _: &mut syn::ExprClosure) {}

    fn visit_macro_mut(&mut self, _: &mut syn::Macro) {}
}
