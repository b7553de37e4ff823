//! `#[distributed_lock]`: wraps an async function in a distributed lock.
//!
//! This crate is a skeleton: the attribute arrives with issue 3. Until then it
//! reports a compile error that says so, rather than silently running the
//! function unlocked.

use proc_macro::TokenStream;

/// Runs an async function under a distributed lock (not implemented yet).
///
/// Using it today is a compile error, so that no function believes itself
/// locked while it is not.
#[proc_macro_attribute]
pub fn distributed_lock(_args: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    quote::quote! {
        ::core::compile_error!("#[distributed_lock] is not implemented yet: take the lock by hand with `locker.lock(key).await`");
        #item
    }
    .into()
}
