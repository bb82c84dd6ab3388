#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod async_trait;
mod attr;
mod duration;
mod expand;
mod params;
mod template;

use proc_macro::TokenStream;

/// Runs an `async fn` under a distributed lock whose name is rendered from its parameters.
///
/// ```
/// use distlock::{LockError, Locker};
///
/// #[distlock::distributed_lock("order:{order_id}", locker = locker, wait = "2s")]
/// async fn settle(locker: &Locker, order_id: u64) -> Result<u64, LockError> {
///     // Runs only while this process holds "order:<order_id>"; the lease is renewed meanwhile.
///     let lease = distlock::current_lease().expect("inside a locked fn");
///     Ok(lease.fencing_token())
/// }
/// ```
///
/// `#[distributed_lock("template", options...)]`:
///
/// | option | meaning |
/// |---|---|
/// | `"order:{order_id}"` | the lock name: `{param}` or `{param.field.sub}` rendered with `Display`; `{{` `}}` for braces |
/// | `ttl = "30s"` | a fixed lease, never renewed (default: a lease renewed while the body runs) |
/// | `wait = "250ms"` | how long to wait for a held lock (default: the locker's wait; with `skip`, one try) |
/// | `skip` | when the lock stays busy, the body does not run and the fn returns `()` / `None` |
/// | `renew = true \| false` | renewal on (the default without `ttl`) or off (needs `ttl`) |
/// | `max_hold = "10m"` | stop renewing this long after the grant |
/// | `min_hold = "5s"` | with `ttl`: keep the lock at least this long after the grant (ShedLock's `lockAtLeastFor`) |
/// | `locker = expr` | the `Locker` (or `&Locker`, `Arc<Locker>`) to use; default: `distlock::default_locker()` |
/// | `name = "order"` | the metrics label (default: the template) |
///
/// Without `skip` the function must return `Result<_, E>` with `E: From<distlock::LockError>`;
/// lock failures (busy past the wait, lease lost, backend errors) come back through it. The
/// full reference — expansion, release on every exit path, the lost-lease signal, reentrancy,
/// `#[async_trait]` and `#[tracing::instrument]` — is in the [crate documentation](crate).
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
