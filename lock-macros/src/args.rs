//! The attribute's arguments, parsed into [`LockArgs`] with errors that
//! point at the offending token.

use std::time::Duration;

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, LitBool, LitInt, LitStr, Path, Token};

use crate::template::{self, Piece};

/// Every argument name, for the unknown-argument message.
const NAMES: &str =
    "key, keys, kind, permits, ttl, wait, if_held, hold_at_least, watchdog, locker, on_lost, crate";

/// A key template: the literal (for spans) and its pieces.
pub(crate) type Template = (LitStr, Vec<Piece>);

/// `#[distributed_lock(...)]`, parsed.
pub(crate) struct LockArgs {
    /// Each key's template.
    pub(crate) keys: Vec<Template>,
    /// Given as `keys = [...]`: lock them all (a multi-lock).
    pub(crate) all: bool,
    pub(crate) ttl: Option<Duration>,
    pub(crate) wait: Option<Duration>,
    pub(crate) hold_at_least: Option<Duration>,
    pub(crate) watchdog: Option<bool>,
    pub(crate) locker: Option<Expr>,
    pub(crate) on_lost: OnLost,
    /// `if_held = "skip"`: never wait; a held lock skips the call.
    pub(crate) skip: bool,
    /// `kind = "..."` or `permits = N`: which lock (`Plain` if neither).
    pub(crate) kind: Kind,
    pub(crate) krate: Option<Path>,
}

/// Which kind of lock, as parsed: the expansion names the `lock_core::LockKind`.
#[derive(Clone, Copy, Default)]
pub(crate) enum Kind {
    #[default]
    Plain,
    Fair,
    Read,
    Write,
    /// A semaphore of this many permits.
    Permits(u32),
}

/// `on_lost = "abort" | "continue"`: a `lock_core::OnLost` variant.
#[derive(Clone, Copy, Default)]
pub(crate) enum OnLost {
    #[default]
    Abort,
    Continue,
}

impl OnLost {
    /// The variant's name in `lock_core::OnLost`.
    pub(crate) fn variant(self) -> &'static str {
        match self {
            OnLost::Abort => "Abort",
            OnLost::Continue => "Continue",
        }
    }
}

fn duration_arg(input: ParseStream<'_>, name: &str, zero_ok: bool) -> syn::Result<Duration> {
    let lit: LitStr = input.parse()?;
    let value = humantime::parse_duration(&lit.value()).map_err(|err| {
        let message = format!(
            "`{name} = {:?}` is not a duration ({err}); write e.g. \"500ms\", \"30s\", \"2m\" or \"1m30s\"",
            lit.value()
        );
        syn::Error::new(lit.span(), message)
    })?;
    if value.is_zero() && !zero_ok {
        return Err(syn::Error::new(
            lit.span(),
            format!("`{name}` must be above zero, e.g. \"30s\""),
        ));
    }
    Ok(value)
}

impl Parse for LockArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut keys: Option<(Ident, Vec<Template>)> = None;
        let mut permits: Option<(Ident, u32)> = None;
        let mut kind: Option<(Ident, Kind)> = None;
        let (mut ttl, mut wait, mut watchdog, mut locker, mut on_lost, mut krate) =
            (None, None, None, None, None, None);
        let mut skip: Option<Ident> = None;
        let mut hold_at_least: Option<(Ident, Duration)> = None;
        let mut wait_name: Option<Ident> = None;
        let mut seen: Vec<String> = Vec::new();
        while !input.is_empty() {
            // `crate` is a keyword: accept any identifier here.
            let name = Ident::parse_any(input)?;
            let text = name.to_string();
            if seen.contains(&text) {
                return Err(syn::Error::new(
                    name.span(),
                    format!("`{text}` is given twice; keep one"),
                ));
            }
            seen.push(text.clone());
            input.parse::<Token![=]>()?;
            match text.as_str() {
                "key" | "keys" => {
                    if keys.is_some() {
                        return Err(syn::Error::new(
                            name.span(),
                            "give `key` (one lock) or `keys` (all of several), not both",
                        ));
                    }
                    let lits = if text == "key" {
                        vec![input.parse::<LitStr>()?]
                    } else {
                        let content;
                        let brackets = syn::bracketed!(content in input);
                        let lits = Punctuated::<LitStr, Token![,]>::parse_terminated(&content)?;
                        if lits.is_empty() {
                            return Err(syn::Error::new(
                                brackets.span.join(),
                                "`keys` needs at least one key, e.g. keys = [\"account:<from>\", \"account:<to>\"]",
                            ));
                        }
                        lits.into_iter().collect()
                    };
                    let templates = lits
                        .into_iter()
                        .map(|lit| {
                            let pieces = template::parse(&lit.value())
                                .map_err(|m| syn::Error::new(lit.span(), m))?;
                            Ok((lit, pieces))
                        })
                        .collect::<syn::Result<_>>()?;
                    keys = Some((name.clone(), templates));
                }
                "permits" => {
                    let lit: LitInt = input.parse()?;
                    let n: u32 = lit.base10_parse()?;
                    if !(1..=1024).contains(&n) {
                        return Err(syn::Error::new(
                            lit.span(),
                            "`permits` must be between 1 and 1024, e.g. permits = 4",
                        ));
                    }
                    permits = Some((name.clone(), n));
                }
                "kind" => {
                    let lit: LitStr = input.parse()?;
                    let named = match lit.value().as_str() {
                        "fair" => Kind::Fair,
                        "read" => Kind::Read,
                        "write" => Kind::Write,
                        other => {
                            return Err(syn::Error::new(
                                lit.span(),
                                format!(
                                    "kind = \"{other}\" is not known; use \"fair\", \"read\" or \"write\" (or `permits = N` for a semaphore)"
                                ),
                            ));
                        }
                    };
                    kind = Some((name.clone(), named));
                }
                "ttl" => ttl = Some(duration_arg(input, "ttl", false)?),
                "wait" => {
                    wait = Some(duration_arg(input, "wait", true)?);
                    wait_name = Some(name.clone());
                }
                "hold_at_least" => {
                    hold_at_least =
                        Some((name.clone(), duration_arg(input, "hold_at_least", false)?));
                }
                "if_held" => {
                    let lit: LitStr = input.parse()?;
                    match lit.value().as_str() {
                        "skip" => skip = Some(name.clone()),
                        "wait" => {}
                        other => {
                            return Err(syn::Error::new(
                                lit.span(),
                                format!(
                                    "if_held = \"{other}\" is not known; use \"wait\" (the default: wait for the lock) or \"skip\" (never wait: a held lock skips the call, which returns `Ok(Outcome::Skipped)`)"
                                ),
                            ));
                        }
                    }
                }
                "watchdog" => watchdog = Some(input.parse::<LitBool>()?.value),
                "locker" => locker = Some(input.parse::<Expr>()?),
                "on_lost" => {
                    let lit: LitStr = input.parse()?;
                    on_lost = Some(match lit.value().as_str() {
                        "abort" => OnLost::Abort,
                        "continue" => OnLost::Continue,
                        other => {
                            return Err(syn::Error::new(
                                lit.span(),
                                format!(
                                    "on_lost = \"{other}\" is not known; use \"abort\" (drop the body, return LockError::Lost) or \"continue\" (let it finish)"
                                ),
                            ));
                        }
                    });
                }
                "crate" => {
                    let lit: LitStr = input.parse()?;
                    krate = Some(lit.parse::<Path>()?);
                }
                _ => {
                    return Err(syn::Error::new(
                        name.span(),
                        format!("unknown argument `{text}`; expected one of: {NAMES}"),
                    ));
                }
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        let Some((given_as, keys)) = keys else {
            return Err(syn::Error::new(
                Span::call_site(),
                "#[distributed_lock] needs a key, e.g. #[distributed_lock(key = \"order:<id>\")], or keys = [\"...\", \"...\"] for several",
            ));
        };
        let all = given_as == "keys";
        if let Some((name, _)) = &permits
            && all
        {
            return Err(syn::Error::new(
                name.span(),
                "`permits` takes one `key`, not `keys`: a semaphore is on one key",
            ));
        }
        if let Some((name, _)) = &kind {
            let clash = if permits.is_some() {
                Some(
                    "`kind` and `permits` name two kinds of lock; a semaphore is `permits = N` alone",
                )
            } else if all {
                Some("`kind` takes one `key`; `keys` locks several keys with plain locks")
            } else {
                None
            };
            if let Some(message) = clash {
                return Err(syn::Error::new(name.span(), message));
            }
        }
        if let Some(name) = &skip {
            let clash = if let Some(wait) = &wait_name {
                Some((
                    wait.span(),
                    "`wait` and `if_held = \"skip\"` disagree: a skipped call never waits; drop `wait`",
                ))
            } else if all {
                Some((
                    name.span(),
                    "`if_held = \"skip\"` takes one `key`, not `keys`",
                ))
            } else {
                None
            };
            if let Some((span, message)) = clash {
                return Err(syn::Error::new(span, message));
            }
        }
        // Without renewals the lease ends at its ttl: it cannot be kept
        // longer.
        if let (Some((name, hold)), Some(ttl), Some(false)) = (&hold_at_least, ttl, watchdog)
            && *hold >= ttl
        {
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "`hold_at_least` ({}) is not below `ttl` ({}) with `watchdog = false`: the lease ends at its ttl; raise `ttl` or drop `watchdog = false`",
                    humantime::format_duration(*hold),
                    humantime::format_duration(ttl)
                ),
            ));
        }
        if let (Some((name, _)), true) = (&hold_at_least, all) {
            return Err(syn::Error::new(
                name.span(),
                "`hold_at_least` takes one `key`, not `keys`: a multi-lock gives every key back at release",
            ));
        }
        let kind = match (kind, permits) {
            (Some((_, kind)), _) => kind,
            (None, Some((_, n))) => Kind::Permits(n),
            (None, None) => Kind::Plain,
        };
        Ok(LockArgs {
            keys,
            all,
            kind,
            ttl,
            wait,
            watchdog,
            locker,
            on_lost: on_lost.unwrap_or_default(),
            skip: skip.is_some(),
            hold_at_least: hold_at_least.map(|(_, hold)| hold),
            krate,
        })
    }
}
