//! `#[distributed_lock]`: runs an async function under a distributed lock.
//!
//! Use it through `lock_core` (feature `macros`, on by default), which
//! re-exports it: `use lock_core::distributed_lock;`.
//!
//! ```ignore
//! use lock_core::{distributed_lock, FencingToken, LockError};
//!
//! #[distributed_lock(key = "order:<id>", ttl = "30s", wait = "5s")]
//! async fn pay(id: u64, cents: u64) -> Result<(), AppError> {
//!     let token = FencingToken::current().expect("inside a locked scope");
//!     db.pay_fenced(id, cents, token).await
//! }
//! ```
//!
//! The attribute's documentation, with every argument, is on
//! [`macro@distributed_lock`].

mod args;
mod expand;
mod template;

use proc_macro::TokenStream;

/// Runs an async function under a distributed lock.
///
/// ```ignore
/// use lock_core::{distributed_lock, FencingToken, LockError, Locker};
///
/// struct Payments { locker: Locker, db: Db }
///
/// impl Payments {
///     #[distributed_lock(key = "order:<order.id>", ttl = "30s", wait = "5s", locker = self.locker)]
///     async fn pay(&self, order: &Order) -> Result<Receipt, AppError> {
///         let token = FencingToken::current().expect("inside the lock");
///         self.db.pay_fenced(order, token).await // the store rejects older tokens
///     }
/// }
/// ```
///
/// # Arguments
///
/// | argument | example | meaning |
/// |---|---|---|
/// | `key` (or `keys`: one is required) | `"order:<id>"`, `"user:<req.user.id>"`, `"<self.shard>:x"` | the lock key; `<name>` is an argument (formatted with `Display`), `<name.field>` reaches into it, `<self.field>` into the receiver; a literal `<` is `<<` |
/// | `keys` (instead of `key`) | `["account:<from>", "account:<to>"]` | lock every key or none (`Locker::lock_all`: taken in sorted order, so calls naming the same keys in any order never deadlock); inside, `FencingToken::current_for(key)` gives each key's token |
/// | `kind` | `"fair"`, `"read"`, `"write"` | a fair lock on `key` (`Locker::fair_lock`: callers served in arrival order), or the read or write side of a read-write lock (`Locker::read_lock` / `write_lock`: many readers or one writer); default: the plain lock |
/// | `permits` (instead of `kind`) | `4` | a semaphore on `key` (`Locker::semaphore`): at most this many calls at once across every process; 1 to 1024, one number per key |
/// | `ttl` | `"30s"` | lease length (`ms`, `s`, `m`, `h`); default: the Locker's |
/// | `wait` | `"5s"`, `"0s"` | bound on waiting (`"0s"` tries once); default: the Locker's |
/// | `if_held` | `"skip"` | `"wait"` (default); `"skip"`: never wait, and when the lock is held the call is skipped: it returns `Ok(Outcome::Skipped)` without entering the body (`LockRequest::if_held_skip`): the function is declared to return `Result<lock_core::Outcome<T>, E>` and its body returns `Result<T, E>`, which the caller gets as `Ok(Outcome::Ran(value))`; for a job that one replica of many runs |
/// | `hold_at_least` | `"5m"` | keep the lock at least this long after the acquire, even when the body ends sooner (`LockRequest::hold_at_least`): with `if_held = "skip"`, a job runs once per period across replicas whose timers are a little off; not longer than `ttl` with `watchdog = false` |
/// | `watchdog` | `false` | renew the lease while the body runs (default `true`) |
/// | `locker` | `self.locker`, `LOCKER.clone()` | any expression yielding a `Locker`, `&Locker`, `Arc<Locker>`; default: the Locker installed with `lock_core::install` |
/// | `on_lost` | `"continue"` | `"abort"` (default): on lease loss the body is dropped and the function returns `Err(LockError::Lost)`; `"continue"`: the body runs on (fencing protects its writes) |
/// | `crate` | `"my_reexport::lock_core"` | path of lock-core when it is renamed |
///
/// The function must be `async` and return `Result<T, E>` with
/// `E: From<lock_core::LockError>`; lock failures (timeout, store down,
/// invalid key, lost lease) come out as `Err(E::from(error))`. Inside the
/// body `FencingToken::current()` is the lock's token; a nested locked call
/// on the same key in the same task is reentrant. The lock is released when
/// the body returns, errors, panics, or is cancelled.
///
/// Mistakes are compile errors pointing at the offending token: a missing or
/// empty key, `key` with `keys`, an empty `keys`, `permits` out of 1..=1024
/// or with `keys`, an unknown `kind` or one with `permits` or `keys`, a
/// `<name>` that is no argument, a field path on a
/// pattern-bound argument, an unclosed `<`, a bad duration, an unknown or
/// repeated argument, an unknown `on_lost` or `if_held`, `if_held = "skip"`
/// with `wait` or `keys` or a return type other than `Result<Outcome<T>, E>`,
/// a `hold_at_least` longer than `ttl` with `watchdog = false`,
/// a non-async, `const` or non-`Result` function. The function itself is still emitted next to the
/// error, so IDEs keep working.
#[proc_macro_attribute]
pub fn distributed_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    let original = proc_macro2::TokenStream::from(item.clone());
    let expanded = syn::parse::<args::LockArgs>(args).and_then(|args| {
        let func = syn::parse::<syn::ItemFn>(item)?;
        expand::expand(args, func)
    });
    match expanded {
        Ok(tokens) => tokens.into(),
        Err(error) => {
            let error = error.to_compile_error();
            // The function as written, so that the rest of the crate (and
            // the IDE) still sees it.
            quote::quote!(#error #original).into()
        }
    }
}

#[cfg(test)]
mod properties;
