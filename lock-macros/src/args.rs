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

/// The arguments as written, each with the name that gave it where a
/// later error points at it.
#[derive(Default)]
struct Given {
    keys: Option<(Ident, Vec<Template>)>,
    permits: Option<(Ident, u32)>,
    kind: Option<(Ident, Kind)>,
    ttl: Option<Duration>,
    wait: Option<(Ident, Duration)>,
    hold_at_least: Option<(Ident, Duration)>,
    /// `if_held = "skip"`.
    skip: Option<Ident>,
    watchdog: Option<bool>,
    locker: Option<Expr>,
    on_lost: Option<OnLost>,
    krate: Option<Path>,
}

impl Parse for LockArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        Given::read(input)?.into_args()
    }
}

impl Given {
    /// `name = value, ...`, each name at most once.
    fn read(input: ParseStream<'_>) -> syn::Result<Given> {
        let mut given = Given::default();
        let mut seen: Vec<String> = Vec::new();
        while !input.is_empty() {
            // `crate` is a keyword: accept any identifier here.
            let name = Ident::parse_any(input)?;
            let text = name.to_string();
            if seen.contains(&text) {
                let message = format!("`{text}` is given twice; keep one");
                return Err(syn::Error::new(name.span(), message));
            }
            seen.push(text);
            input.parse::<Token![=]>()?;
            given.set(name, input)?;
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(given)
    }

    /// Parses the value of the argument `name`.
    fn set(&mut self, name: Ident, input: ParseStream<'_>) -> syn::Result<()> {
        let text = name.to_string();
        match text.as_str() {
            "key" | "keys" => {
                if self.keys.is_some() {
                    return Err(syn::Error::new(
                        name.span(),
                        "give `key` (one lock) or `keys` (all of several), not both",
                    ));
                }
                let templates = templates(input, text == "keys")?;
                self.keys = Some((name, templates));
            }
            "permits" => self.permits = Some((name, permits(input)?)),
            "kind" => {
                let kinds = [
                    ("fair", Kind::Fair),
                    ("read", Kind::Read),
                    ("write", Kind::Write),
                ];
                let help = "\"fair\", \"read\" or \"write\" (or `permits = N` for a semaphore)";
                self.kind = Some((name, one_of(input, "kind", &kinds, help)?));
            }
            "ttl" => self.ttl = Some(duration(input, "ttl", false)?),
            "wait" => self.wait = Some((name, duration(input, "wait", true)?)),
            "hold_at_least" => {
                let hold = duration(input, "hold_at_least", false)?;
                self.hold_at_least = Some((name, hold));
            }
            "if_held" => {
                let choices = [("skip", true), ("wait", false)];
                let help = "\"wait\" (the default: wait for the lock) or \"skip\" (never wait: a held lock skips the call, which returns `Ok(Outcome::Skipped)`)";
                if one_of(input, "if_held", &choices, help)? {
                    self.skip = Some(name);
                }
            }
            "watchdog" => self.watchdog = Some(input.parse::<LitBool>()?.value),
            "locker" => self.locker = Some(input.parse::<Expr>()?),
            "on_lost" => {
                let choices = [("abort", OnLost::Abort), ("continue", OnLost::Continue)];
                let help = "\"abort\" (drop the body, return LockError::Lost) or \"continue\" (let it finish)";
                self.on_lost = Some(one_of(input, "on_lost", &choices, help)?);
            }
            "crate" => self.krate = Some(input.parse::<LitStr>()?.parse::<Path>()?),
            _ => {
                let message = format!("unknown argument `{text}`; expected one of: {NAMES}");
                return Err(syn::Error::new(name.span(), message));
            }
        }
        Ok(())
    }

    /// Refuses arguments that disagree, pointing at the later one's name;
    /// `all`: the keys were given as `keys`.
    fn check_combination(&self, all: bool) -> syn::Result<()> {
        let clash = |name: &Ident, message: &str| Err(syn::Error::new(name.span(), message));
        if let (Some((name, _)), true) = (&self.permits, all) {
            return clash(
                name,
                "`permits` takes one `key`, not `keys`: a semaphore is on one key",
            );
        }
        if let Some((name, _)) = &self.kind {
            if self.permits.is_some() {
                return clash(
                    name,
                    "`kind` and `permits` name two kinds of lock; a semaphore is `permits = N` alone",
                );
            }
            if all {
                return clash(
                    name,
                    "`kind` takes one `key`; `keys` locks several keys with plain locks",
                );
            }
        }
        if let Some(name) = &self.skip {
            if let Some((wait, _)) = &self.wait {
                return clash(
                    wait,
                    "`wait` and `if_held = \"skip\"` disagree: a skipped call never waits; drop `wait`",
                );
            }
            if all {
                return clash(name, "`if_held = \"skip\"` takes one `key`, not `keys`");
            }
        }
        if let Some((name, hold)) = &self.hold_at_least {
            // Without renewals the lease ends at its ttl: it cannot be kept
            // longer.
            if let (Some(ttl), Some(false)) = (self.ttl, self.watchdog)
                && *hold >= ttl
            {
                let message = format!(
                    "`hold_at_least` ({}) is not below `ttl` ({}) with `watchdog = false`: the lease ends at its ttl; raise `ttl` or drop `watchdog = false`",
                    humantime::format_duration(*hold),
                    humantime::format_duration(ttl)
                );
                return clash(name, &message);
            }
            if all {
                return clash(
                    name,
                    "`hold_at_least` takes one `key`, not `keys`: a multi-lock gives every key back at release",
                );
            }
        }
        Ok(())
    }

    /// The parsed arguments, with their defaults, once they agree.
    fn into_args(mut self) -> syn::Result<LockArgs> {
        let Some((given_as, keys)) = self.keys.take() else {
            return Err(syn::Error::new(
                Span::call_site(),
                "#[distributed_lock] needs a key, e.g. #[distributed_lock(key = \"order:<id>\")], or keys = [\"...\", \"...\"] for several",
            ));
        };
        let all = given_as == "keys";
        self.check_combination(all)?;
        let kind = match (self.kind, self.permits) {
            (Some((_, kind)), _) => kind,
            (None, Some((_, n))) => Kind::Permits(n),
            (None, None) => Kind::Plain,
        };
        Ok(LockArgs {
            keys,
            all,
            kind,
            ttl: self.ttl,
            wait: self.wait.map(|(_, wait)| wait),
            watchdog: self.watchdog,
            locker: self.locker,
            on_lost: self.on_lost.unwrap_or_default(),
            skip: self.skip.is_some(),
            hold_at_least: self.hold_at_least.map(|(_, hold)| hold),
            krate: self.krate,
        })
    }
}

/// `"<template>"`, or `[<template>, ...]` for `keys`: each parsed.
fn templates(input: ParseStream<'_>, several: bool) -> syn::Result<Vec<Template>> {
    let lits = if several {
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
    } else {
        vec![input.parse::<LitStr>()?]
    };
    lits.into_iter()
        .map(|lit| {
            let pieces =
                template::parse(&lit.value()).map_err(|m| syn::Error::new(lit.span(), m))?;
            Ok((lit, pieces))
        })
        .collect()
}

/// `permits = N`, 1 to 1024.
fn permits(input: ParseStream<'_>) -> syn::Result<u32> {
    let lit: LitInt = input.parse()?;
    let n: u32 = lit.base10_parse()?;
    if !(1..=1024).contains(&n) {
        return Err(syn::Error::new(
            lit.span(),
            "`permits` must be between 1 and 1024, e.g. permits = 4",
        ));
    }
    Ok(n)
}

/// A string that is one of `choices`; another is refused with `help`.
fn one_of<T: Copy>(
    input: ParseStream<'_>,
    name: &str,
    choices: &[(&str, T)],
    help: &str,
) -> syn::Result<T> {
    let lit: LitStr = input.parse()?;
    let value = lit.value();
    let chosen = choices.iter().find(|(text, _)| *text == value);
    chosen.map(|(_, choice)| *choice).ok_or_else(|| {
        let message = format!("{name} = \"{value}\" is not known; use {help}");
        syn::Error::new(lit.span(), message)
    })
}

/// A duration in humantime's words (`"30s"`), above zero unless `zero_ok`.
fn duration(input: ParseStream<'_>, name: &str, zero_ok: bool) -> syn::Result<Duration> {
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
