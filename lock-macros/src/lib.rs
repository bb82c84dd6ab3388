//! `#[distributed_lock]` for [distlock](https://docs.rs/distlock): one attribute runs an
//! `async fn` under a distributed lock whose name is rendered from the function's parameters.
//! Use it through the `distlock` crate (feature `macros`, on by default) as
//! `distlock::distributed_lock`; the reference is the documentation of [`distributed_lock`].
#![forbid(unsafe_code)]

mod async_trait;
mod attr;
mod duration;
mod expand;
mod params;
mod template;

use proc_macro::TokenStream;

#[doc = include_str!("../REFERENCE.md")]
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
        expand::expand(&args, function)
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
