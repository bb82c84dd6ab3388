//! `#[distributed_lock]` for [distlock](https://docs.rs/distlock): one attribute runs an
//! `async fn` under a distributed lock whose name is rendered from the function's parameters.
//! Use it through the `distlock` crate (feature `macros`, on by default) as
//! `distlock::distributed_lock`; the reference is the documentation of [`distributed_lock`].
#![forbid(unsafe_code)]

mod attr;
mod duration;
mod expand;
mod params;
mod shape;
mod template;

use proc_macro::TokenStream;
use quote::ToTokens;

use crate::shape::Shape;

// The reference's examples are doc-tested by the facade they name (`distlock`'s lib.rs): here
// they would need it as a dev-dependency, which cargo builds a second time for the host (a
// proc-macro crate's tests are host code). `cargo test --doc` ignores `doctest = false`.
#[cfg_attr(not(doctest), doc = include_str!("../REFERENCE.md"))]
#[proc_macro_attribute]
pub fn distributed_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    let item2 = proc_macro2::TokenStream::from(item.clone());
    let result = syn::parse::<attr::Args>(args).and_then(|args| {
        let function: syn::ItemFn = syn::parse(item).map_err(|error| {
            syn::Error::new(
                error.span(),
                format!("`#[distributed_lock]` goes on an `async fn` with a body: {error}"),
            )
        })?;
        expand(&args, function)
    });
    match result {
        Ok(expanded) => expanded.into(),
        // The error, and the function unchanged so that its callers still type-check.
        Err(error) => {
            let error = error.to_compile_error();
            quote::quote!(#error #item2).into()
        }
    }
}
/// Recognises the function's shape and hands it to the expansion that fits: the dispatch lives
/// here so that `expand` only generates code and never calls back up.
fn expand(args: &attr::Args, mut item: syn::ItemFn) -> syn::Result<proc_macro2::TokenStream> {
    match shape::of(&item.sig, &mut item.block)? {
        Shape::AsyncFn => expand::async_fn(args, &item),
        Shape::AsyncTrait(desugared) => {
            expand::async_trait(args, &item.sig, desugared)?;
            Ok(item.to_token_stream())
        }
    }
}
