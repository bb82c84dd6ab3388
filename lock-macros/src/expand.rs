//! Code generation: the function keeps its signature, attributes and visibility; its body runs
//! under the lock through `::distlock::__private::run`.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{ItemFn, LitStr, ReturnType, Signature, Stmt, Type};

use crate::attr::{Args, LockKind};
use crate::duration;
use crate::params::Params;
use crate::shape::Desugared;
use crate::template::{self, SelfName};

/// The body of an `async fn` under the lock.
pub(crate) fn async_fn(args: &Args, item: &ItemFn) -> syn::Result<TokenStream> {
    let sig = &item.sig;
    let params = Params::of(sig);
    let templates = templates(args, &params, &sig.ident, SelfName::SelfValue)?;
    let output = Output::of(&sig.output, sig.ident.span());
    let body = locked_body(args, &templates, &output, &item.block.stmts);
    let ItemFn {
        attrs, vis, sig, ..
    } = item;
    Ok(quote! {
        #(#attrs)*
        #vis #sig {
            #body
        }
    })
}

/// The user's body of a method `#[async_trait]` desugared, under the lock, in place: the rest
/// of the method stays as `#[async_trait]` wrote it.
pub(crate) fn async_trait(
    args: &Args,
    sig: &Signature,
    desugared: Desugared<'_>,
) -> syn::Result<()> {
    let mut params = Params::of(sig);
    params.names = desugared.names;
    let templates = templates(args, &params, &sig.ident, SelfName::AsyncTrait)?;
    let output = Output::of_type(desugared.ret);
    let mut args = args.clone();
    if let Some(locker) = &mut args.locker {
        RenameSelf.visit_expr_mut(locker);
    }
    let locked = locked_body(&args, &templates, &output, &desugared.body.stmts);
    *desugared.body = syn::parse2(quote!({ #locked }))?;
    Ok(())
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

/// Parses and checks every template against the function's parameters, reporting the
/// mistakes of all of them at once.
fn templates(
    args: &Args,
    params: &Params,
    fn_name: &syn::Ident,
    self_name: SelfName,
) -> syn::Result<Vec<template::Template>> {
    let mut templates = Vec::with_capacity(args.templates.len());
    let mut errors = Vec::new();
    for lit in &args.templates {
        match template::parse(lit, params, fn_name, self_name) {
            Ok(template) => templates.push(template),
            Err(error) => errors.push(error),
        }
    }
    crate::attr::combine(errors)?;
    Ok(templates)
}

/// The function's output type as the expansion needs it.
struct Output {
    /// The type, `()` when none was written.
    ty: TokenStream,
    /// Where type errors about it point: the return type, else the function's name.
    span: Span,
    /// Whether the body's type can be pinned by naming it (not for `impl Trait` and `_`).
    nameable: bool,
}

impl Output {
    fn of(output: &ReturnType, name_span: Span) -> Self {
        match output {
            ReturnType::Default => Self {
                ty: quote_spanned!(name_span=> ()),
                span: name_span,
                nameable: true,
            },
            ReturnType::Type(_, ty) => Self::of_type(ty),
        }
    }

    fn of_type(ty: &Type) -> Self {
        let mut opaque = Opaque(false);
        opaque.visit_type(ty);
        Self {
            ty: ty.to_token_stream(),
            span: ty.span(),
            nameable: !opaque.0,
        }
    }
}

/// Finds `impl Trait` and `_` in a type.
struct Opaque(bool);

impl Visit<'_> for Opaque {
    fn visit_type_impl_trait(&mut self, _: &syn::TypeImplTrait) {
        self.0 = true;
    }

    fn visit_type_infer(&mut self, _: &syn::TypeInfer) {
        self.0 = true;
    }
}

/// The new body: render the name (or the names of a list), run the original statements under
/// the lock, turn a lock failure into the function's output (the error policy or `skip`).
fn locked_body(
    args: &Args,
    templates: &[template::Template],
    output: &Output,
    stmts: &[Stmt],
) -> TokenStream {
    let here = Span::mixed_site();
    let outcome = format_ident!("__distlock_outcome", span = here);
    let out = format_ident!("__distlock_out", span = here);
    let Names {
        name,
        ty: ty_of_name,
        rendered,
        run,
    } = names(args, templates, here);
    let locker = match &args.locker {
        Some(expr) => quote_spanned!(expr.span()=>
            ::core::option::Option::Some(::distlock::__private::locker(&(#expr)))
        ),
        None => quote!(::core::option::Option::None),
    };
    let spec = spec(args);
    let pin_output = pin_output(output, here);
    let (pattern, on_error) = on_error(args.skip.is_some(), output, here);
    quote! {
        let #name: #ty_of_name = #rendered;
        let #outcome = #run(
            #locker,
            #name,
            #spec,
            move || async move {
                #pin_output
                #(#stmts)*
            },
        )
        .await;
        match #outcome {
            ::core::result::Result::Ok(#out) => #out,
            ::core::result::Result::Err(#pattern) => #on_error,
        }
    }
}

/// The rendered name (or names) of the expansion, and the support function that locks it.
struct Names {
    /// The local that holds it.
    name: syn::Ident,
    /// Its type: a `String`, or a `Vec<String>` for a list.
    ty: TokenStream,
    /// The expression that renders it.
    rendered: TokenStream,
    /// `__private::run`, or `__private::run_all` for a list.
    run: TokenStream,
}

/// The name of a single template, or the names of a list (a multi-lock).
fn names(args: &Args, templates: &[template::Template], here: Span) -> Names {
    if args.is_multi() {
        let names = args
            .templates
            .iter()
            .zip(templates)
            .map(|(lit, template)| render(lit, template));
        Names {
            name: format_ident!("__distlock_names", span = here),
            ty: quote!(::std::vec::Vec<::std::string::String>),
            rendered: quote!(::std::vec![#(#names),*]),
            run: quote!(::distlock::__private::run_all),
        }
    } else {
        Names {
            name: format_ident!("__distlock_name", span = here),
            ty: quote!(::std::string::String),
            rendered: render(args.first_template(), &templates[0]),
            run: quote!(::distlock::__private::run),
        }
    }
}

/// `::distlock::__private::Spec { .. }`: the label, the kind and the timing options.
fn spec(args: &Args) -> TokenStream {
    let label = args.label();
    let lease = &args.lease;
    let ttl = duration::option_tokens(lease.ttl.as_ref().map(|t| t.duration));
    let wait = duration::option_tokens(args.wait());
    let max_hold = duration::option_tokens(lease.max_hold.as_ref().map(|t| t.duration));
    let min_hold = duration::option_tokens(lease.min_hold.as_ref().map(|t| t.duration));
    let lock_delay = duration::option_tokens(lease.lock_delay.as_ref().map(|t| t.duration));
    let skip = args.skip.is_some();
    let stop_on_shutdown = args.stop_on_shutdown.is_some();
    let kind = kind_tokens(args.kind());
    quote! {
        ::distlock::__private::Spec {
            label: #label,
            kind: #kind,
            ttl: #ttl,
            wait: #wait,
            max_hold: #max_hold,
            min_hold: #min_hold,
            lock_delay: #lock_delay,
            skip: #skip,
            stop_on_shutdown: #stop_on_shutdown,
        }
    }
}

/// A `return` that never runs, which pins the body's type to the function's output when that
/// can be named (so that `?` and `.into()` in the body infer it).
fn pin_output(output: &Output, here: Span) -> Option<TokenStream> {
    let ret = format_ident!("__distlock_ret", span = here);
    let ty = &output.ty;
    output.nameable.then(|| {
        quote! {
            if let ::core::option::Option::Some(#ret) = ::core::option::Option::None::<#ty> {
                #[allow(unreachable_code)]
                return #ret;
            }
        }
    })
}

/// The pattern of a lock failure and the function's output for it: the skipped value for
/// `skip`, else the error converted by the error policy (spanned on the output type, so that a
/// type without the policy is pointed at).
fn on_error(skip: bool, output: &Output, here: Span) -> (TokenStream, TokenStream) {
    let error = format_ident!("__distlock_error", span = here);
    let ty = &output.ty;
    match (skip, output.nameable) {
        (true, true) => (
            quote!(_),
            quote_spanned!(output.span=> <#ty as ::distlock::__private::Skippable>::skipped()),
        ),
        (true, false) => (
            quote!(_),
            quote!(::distlock::__private::Skippable::skipped()),
        ),
        (false, true) => (
            quote!(#error),
            quote_spanned!(output.span=>
                <#ty as ::distlock::__private::LockResult>::from_lock_error(#error)
            ),
        ),
        (false, false) => (
            quote!(#error),
            quote!(::distlock::__private::LockResult::from_lock_error(#error)),
        ),
    }
}

/// `::distlock::__private::LockKind::Read`, ...: what `__private::run` asks the locker for.
fn kind_tokens(kind: LockKind) -> TokenStream {
    match kind {
        LockKind::Mutex => quote!(::distlock::__private::LockKind::Mutex),
        LockKind::Read => quote!(::distlock::__private::LockKind::Read),
        LockKind::Write => quote!(::distlock::__private::LockKind::Write),
        LockKind::Fair => quote!(::distlock::__private::LockKind::Fair),
        LockKind::Semaphore { permits, max } => quote!(
            ::distlock::__private::LockKind::Semaphore { permits: #permits, max: #max }
        ),
    }
}

/// `::std::format!("order:{}", order_id)`, or the literal name when there are no placeholders.
fn render(lit: &LitStr, template: &template::Template) -> TokenStream {
    let args = &template.args;
    if args.is_empty() {
        let text = LitStr::new(&literal_name(template), lit.span());
        quote!(::std::string::String::from(#text))
    } else {
        let format = LitStr::new(&template.format, lit.span());
        quote_spanned!(lit.span()=> ::std::format!(#format, #(#args),*))
    }
}

/// The name a template without placeholders stands for: its text with `{{` and `}}` unescaped
/// (`format!` is not needed, and would warn about a format string without arguments).
pub(crate) fn literal_name(template: &template::Template) -> String {
    template.format.replace("{{", "{").replace("}}", "}")
}
