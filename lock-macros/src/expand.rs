//! The expansion: the function keeps its signature, attributes and
//! visibility; its body runs inside `lock_core::__private::run` (for
//! `keys = [...]`, `run_all` with a `Vec` of keys; for `if_held = "skip"`,
//! `run_or_skip`, whose body returns `Result<T, E>` and whose caller gets
//! `Result<Outcome<T>, E>`: `__private::ran(output)` or
//! `__private::skipped()`).
//!
//! ```text
//! async fn pay(&self, id: u64) -> Result<R, E> {
//!     let key = format!("order:{}", &id);
//!     let locker = lock_core::__private::given(&(self.locker));   // or installed(&key)
//!     let options = lock_core::__private::Options { ttl: .., wait: .., watchdog: .., hold_at_least: .., on_lost: .., kind: .. };
//!     match lock_core::__private::run(locker, key, options, async move { <body's statements> }).await {
//!         Ok(output) => output,
//!         Err(error) => lock_core::__private::lock_failed::<Result<R, E>>(error),
//!     }
//! }
//! ```

use std::collections::HashSet;
use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, LitStr, Member, Pat, ReturnType, Signature, Type};

use crate::args::{Kind, LockArgs};
use crate::template::Piece;

/// The names a key template may start with.
struct Bindings {
    has_self: bool,
    /// Arguments bound to a plain name (`id: u64`): fields reachable.
    plain: Vec<String>,
    /// Names bound inside a destructuring pattern (`(a, b): (u64, u64)`).
    in_patterns: HashSet<String>,
}

fn collect_pattern_names(pat: &Pat, names: &mut HashSet<String>) {
    match pat {
        Pat::Ident(p) => {
            names.insert(p.ident.to_string());
            if let Some((_, sub)) = &p.subpat {
                collect_pattern_names(sub, names);
            }
        }
        Pat::Tuple(t) => t.elems.iter().for_each(|p| collect_pattern_names(p, names)),
        Pat::TupleStruct(t) => t.elems.iter().for_each(|p| collect_pattern_names(p, names)),
        Pat::Struct(s) => s
            .fields
            .iter()
            .for_each(|f| collect_pattern_names(&f.pat, names)),
        Pat::Slice(s) => s.elems.iter().for_each(|p| collect_pattern_names(p, names)),
        Pat::Reference(r) => collect_pattern_names(&r.pat, names),
        Pat::Paren(p) => collect_pattern_names(&p.pat, names),
        Pat::Type(t) => collect_pattern_names(&t.pat, names),
        _ => {}
    }
}

impl Bindings {
    fn of(func: &ItemFn) -> Self {
        let mut bindings = Bindings {
            has_self: false,
            plain: Vec::new(),
            in_patterns: HashSet::new(),
        };
        for input in &func.sig.inputs {
            match input {
                FnArg::Receiver(_) => bindings.has_self = true,
                FnArg::Typed(arg) => match &*arg.pat {
                    Pat::Ident(p) if p.subpat.is_none() => bindings.plain.push(p.ident.to_string()),
                    other => collect_pattern_names(other, &mut bindings.in_patterns),
                },
            }
        }
        bindings
    }

    /// Checks one `<path>` of the template against the signature.
    fn check(&self, names: &[String], func: &Ident) -> Result<(), String> {
        let first = &names[0];
        let path = names.join(".");
        if first == "self" {
            return if self.has_self {
                Ok(())
            } else {
                Err(format!("`<{path}>`: `{func}` has no `self` receiver"))
            };
        }
        if self.plain.contains(first) {
            return Ok(());
        }
        if self.in_patterns.contains(first) {
            return if names.len() == 1 {
                Ok(())
            } else {
                Err(format!(
                    "`<{path}>`: `{first}` is bound by a pattern, so its fields cannot be reached here; \
                     take the argument whole (`arg: Type`) and write `<arg.field>`"
                ))
            };
        }
        let mut known: Vec<String> = self.plain.clone();
        known.extend(self.in_patterns.iter().cloned());
        if self.has_self {
            known.insert(0, "self".into());
        }
        let known = if known.is_empty() {
            "it has none".to_owned()
        } else {
            format!("its arguments are: {}", known.join(", "))
        };
        Err(format!(
            "`<{path}>`: `{first}` is not an argument of `{func}`; {known}"
        ))
    }
}

fn duration_tokens(krate: &TokenStream, value: Option<Duration>) -> TokenStream {
    match value {
        Some(d) => {
            let ms = d.as_millis() as u64;
            quote!(::core::option::Option::Some(#krate::__private::millis(#ms)))
        }
        None => quote!(::core::option::Option::None),
    }
}

/// The `format!` call that builds one key from its template.
fn key_format(
    key_lit: &LitStr,
    pieces: &[Piece],
    bindings: &Bindings,
    func: &Ident,
) -> syn::Result<TokenStream> {
    let mut format = String::new();
    let mut values = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Text(text) => format.push_str(&text.replace('{', "{{").replace('}', "}}")),
            Piece::Value(names) => {
                bindings
                    .check(names, func)
                    .map_err(|m| syn::Error::new(key_lit.span(), m))?;
                format.push_str("{}");
                let head = if names[0] == "self" {
                    quote!(self)
                } else {
                    let ident = Ident::new(&names[0], Span::call_site());
                    quote!(#ident)
                };
                let fields = names[1..].iter().map(|name| {
                    let member: Member = match name.parse::<u32>() {
                        Ok(index) => Member::Unnamed(syn::Index::from(index as usize)),
                        Err(_) => Member::Named(Ident::new(name, Span::call_site())),
                    };
                    quote!(.#member)
                });
                values.push(quote_spanned!(key_lit.span()=> &(#head #(#fields)*)));
            }
        }
    }
    Ok(quote!(::std::format!(#format #(, #values)*)))
}

/// Checks the function and builds the locked version of it.
pub(crate) fn expand(args: LockArgs, func: ItemFn) -> syn::Result<TokenStream> {
    let sig = &func.sig;
    let ret_ty = checked_return_type(sig)?;
    let bindings = Bindings::of(&func);
    let keys = args
        .keys
        .iter()
        .map(|(lit, pieces)| key_format(lit, pieces, &bindings, &sig.ident))
        .collect::<syn::Result<Vec<_>>>()?;

    let krate = match &args.krate {
        Some(path) => quote!(#path),
        None => quote!(::lock_core),
    };
    // Names of the expansion's own locals cannot clash with the user's.
    let key = Ident::new("__lock_key", Span::mixed_site());
    let locker = Ident::new("__lock_locker", Span::mixed_site());
    let output = Ident::new("__lock_output", Span::mixed_site());
    let error = Ident::new("__lock_error", Span::mixed_site());
    // One key, or every key of the set (named by its first in errors).
    let (key_value, run, first_key) = if args.skip {
        (quote!(#(#keys)*), quote!(run_or_skip), quote!(#key))
    } else if args.all {
        let keys = quote!(::std::vec![#(#keys),*]);
        (keys, quote!(run_all), quote!(#key[0]))
    } else {
        (quote!(#(#keys)*), quote!(run), quote!(#key))
    };
    let locker_expr = match &args.locker {
        Some(expr) => quote_spanned!(expr.span()=> #krate::__private::given(&(#expr))),
        None => quote!(#krate::__private::installed(&#first_key)),
    };
    let options = options(&args, &krate);
    // Errors about `E: From<LockError>` point at the return type.
    let lock_failed =
        quote_spanned!(ret_ty.span()=> #krate::__private::lock_failed::<#ret_ty>(#error));
    let (body_ty, ran) = outcome(args.skip, ret_ty, &krate, &output);
    // The body's statements go straight into the async block: the block
    // itself there would be a braced tail expression, which rustc's
    // `unused_braces` reports against the user's code for a one-expression
    // body (tracing-attributes and tokio-macros splice in the same way).
    let body = &func.block.stmts;
    let (inner_attrs, attrs): (Vec<_>, Vec<_>) = func
        .attrs
        .iter()
        .partition(|attr| matches!(attr.style, syn::AttrStyle::Inner(_)));
    let vis = &func.vis;
    Ok(quote! {
        #(#attrs)*
        #vis #sig {
            #(#inner_attrs)*
            let #key = #key_value;
            let #locker = #locker_expr;
            let __lock_options = #options;
            match #krate::__private::#run(#locker, #key, __lock_options, async move {
                // Fixes the block's output type to the function's (under
                // `if_held = "skip"`, to `Result<T, E>`), so `?` and
                // `return` in the body work as in the original.
                #[allow(unreachable_code, clippy::diverging_sub_expression)]
                if false {
                    let __lock_ret: #body_ty = loop {};
                    return __lock_ret;
                }
                #(#body)*
            })
            .await
            {
                #ran
                ::core::result::Result::Err(#error) => #lock_failed,
            }
        }
    })
}

/// The return type of a function the attribute can lock: an `async fn`,
/// not `const`, that returns something (a `Result`, which the type system
/// checks).
fn checked_return_type(sig: &Signature) -> syn::Result<&Type> {
    if let Some(constness) = &sig.constness {
        return Err(syn::Error::new(
            constness.span(),
            "#[distributed_lock] cannot lock a `const fn`; make it a plain `async fn`",
        ));
    }
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span(),
            "#[distributed_lock] needs an `async fn`: taking a lock waits on the network",
        ));
    }
    match &sig.output {
        ReturnType::Type(_, ty) => Ok(ty),
        ReturnType::Default => Err(syn::Error::new(
            sig.paren_token.span.close(),
            "a #[distributed_lock] function must return `Result<T, E>` with \
             `E: From<lock_core::LockError>`, so that lock failures have somewhere to go",
        )),
    }
}

/// The `__private::Options` the attribute's arguments give.
fn options(args: &LockArgs, krate: &TokenStream) -> TokenStream {
    let ttl = duration_tokens(krate, args.ttl);
    let wait = duration_tokens(krate, args.wait);
    let hold_at_least = duration_tokens(krate, args.hold_at_least);
    let watchdog = match args.watchdog {
        Some(w) => quote!(::core::option::Option::Some(#w)),
        None => quote!(::core::option::Option::None),
    };
    let on_lost = Ident::new(args.on_lost.variant(), Span::call_site());
    let kind = match args.kind {
        Kind::Plain => quote!(Exclusive),
        Kind::Fair => quote!(Fair),
        Kind::Read => quote!(Read),
        Kind::Write => quote!(Write),
        Kind::Permits(n) => quote!(Permit { of: #n }),
    };
    quote! {
        #krate::__private::Options {
            ttl: #ttl,
            wait: #wait,
            watchdog: #watchdog,
            hold_at_least: #hold_at_least,
            on_lost: #krate::OnLost::#on_lost,
            kind: #krate::LockKind::#kind,
        }
    }
}

/// The body's type, and the match arms that turn the run's `Ok` into the
/// function's return value. Under `if_held = "skip"` the run says whether
/// it ran: the body returns `Result<T, E>` and the caller gets
/// `Result<Outcome<T>, E>`, so no value of the body reads as a skip (errors
/// about it point at the return type).
fn outcome(
    skip: bool,
    ret_ty: &Type,
    krate: &TokenStream,
    output: &Ident,
) -> (TokenStream, TokenStream) {
    if !skip {
        let arm = quote!(::core::result::Result::Ok(#output) => #output,);
        return (quote!(#ret_ty), arm);
    }
    let body_ty = quote_spanned!(ret_ty.span()=> <#ret_ty as #krate::__private::SkipReturn>::Body);
    let ran = quote_spanned!(ret_ty.span()=> #krate::__private::ran::<#ret_ty>(#output));
    let skipped = quote_spanned!(ret_ty.span()=> #krate::__private::skipped::<#ret_ty>());
    let arms = quote! {
        ::core::result::Result::Ok(::core::option::Option::Some(#output)) => #ran,
        ::core::result::Result::Ok(::core::option::Option::None) => #skipped,
    };
    (body_ty, arms)
}
