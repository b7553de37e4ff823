//! Lock keys from requests: [`KeyExtractor`] and the built-in [`KeyFrom`].
//!
//! An extractor says what to do with a request: a [`Key`] to lock, pass it
//! through unlocked, or refuse it because it names its resource badly (the
//! layer answers 400 / `INVALID_ARGUMENT`).
//! Values taken from a request are percent-decoded, must be UTF-8 and at
//! most [`MAX_VALUE_LEN`] bytes; the whole key then goes through
//! lock-core's validation and escaping.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::sync::Arc;

use http::Request;
use http::header::HeaderName;
use percent_encoding::percent_decode_str;
use smallvec::SmallVec;

/// Longest value taken from one path segment, header or query parameter.
pub const MAX_VALUE_LEN: usize = 256;

/// What a [`KeyExtractor`] found in a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// No lock: pass the request through.
    Pass,
    /// Lock this key.
    Lock(String),
    /// The request names its resource badly, for this reason: refuse it.
    Invalid(String),
}

impl Key {
    /// `None`: pass; `Some(Ok(key))`: lock; `Some(Err(reason))`: invalid.
    fn from_found(found: Option<Result<String, String>>) -> Self {
        match found {
            None => Key::Pass,
            Some(Ok(key)) => Key::Lock(key),
            Some(Err(reason)) => Key::Invalid(reason),
        }
    }
}

/// Derives the lock key of a request.
///
/// Implemented by [`KeyFrom`] and by any
/// `Fn(&Request<B>) -> Option<String> + Clone + Send + Sync + 'static`
/// (`None` passes the request through).
pub trait KeyExtractor<B>: Clone + Send + Sync + 'static {
    /// What to do with `request`.
    fn extract(&self, request: &Request<B>) -> Key;
}

impl<B, F> KeyExtractor<B> for F
where
    F: Fn(&Request<B>) -> Option<String> + Clone + Send + Sync + 'static,
{
    fn extract(&self, request: &Request<B>) -> Key {
        self(request).map_or(Key::Pass, Key::Lock)
    }
}

/// The built-in extractors.
///
/// ```
/// use lock_tower::KeyFrom;
///
/// // POST /orders/42/pay locks `order:42`; other paths pass through.
/// let by_path = KeyFrom::path("/orders/{id}/pay", "order:<id>");
/// // The value of a header (gRPC metadata too), prefixed.
/// let by_header = KeyFrom::header("x-order-id").prefix("order:");
/// // The value of a query parameter.
/// let by_query = KeyFrom::query("account").prefix("account:");
/// # let _ = (by_path, by_header, by_query);
/// ```
#[derive(Clone)]
pub struct KeyFrom {
    source: Arc<Source>,
    prefix: Arc<str>,
}

enum Source {
    Path(PathTemplate),
    Header(HeaderName),
    Query(String),
}

impl fmt::Debug for KeyFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &*self.source {
            Source::Path(t) => format!("path {}", t.source),
            Source::Header(h) => format!("header {h}"),
            Source::Query(q) => format!("query {q}"),
        };
        f.debug_struct("KeyFrom")
            .field("source", &source)
            .field("prefix", &self.prefix)
            .finish()
    }
}

/// A path or key template that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError(String);

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TemplateError {}

impl KeyFrom {
    /// Matches the request path against `path` (`/orders/{id}/pay`: `{name}`
    /// takes one segment) and builds the key from `key` (`order:<id>`: a
    /// captured name in `<>`, `<<` for a literal `<`). A request whose path
    /// does not match passes through unlocked. With several captures, `%`
    /// and the text between them are escaped in the values (`<a>:<b>`: a
    /// `:` in a value is `%3A`), so that different values never make one
    /// key.
    ///
    /// # Panics
    /// When a template is malformed (a startup-time programming error); use
    /// [`KeyFrom::try_path`] to handle it instead.
    pub fn path(path: &str, key: &str) -> Self {
        match Self::try_path(path, key) {
            Ok(extractor) => extractor,
            Err(err) => panic!("KeyFrom::path({path:?}, {key:?}): {err}"),
        }
    }

    /// [`KeyFrom::path`] that reports a malformed template as an error.
    pub fn try_path(path: &str, key: &str) -> Result<Self, TemplateError> {
        Ok(KeyFrom {
            source: Arc::new(Source::Path(PathTemplate::parse(path, key)?)),
            prefix: Arc::from(""),
        })
    }

    /// The value of header `name` (gRPC metadata included); requests
    /// without it pass through unlocked.
    ///
    /// # Panics
    /// When `name` is not a valid header name.
    pub fn header(name: &str) -> Self {
        let name = HeaderName::from_bytes(name.as_bytes())
            .unwrap_or_else(|_| panic!("KeyFrom::header({name:?}): not a valid header name"));
        KeyFrom {
            source: Arc::new(Source::Header(name)),
            prefix: Arc::from(""),
        }
    }

    /// The value of query parameter `name`; requests without it pass
    /// through unlocked.
    pub fn query(name: &str) -> Self {
        KeyFrom {
            source: Arc::new(Source::Query(name.to_owned())),
            prefix: Arc::from(""),
        }
    }

    /// Prepends `prefix` to every key (`"order:"`).
    pub fn prefix(mut self, prefix: &str) -> Self {
        self.prefix = Arc::from(prefix);
        self
    }

    fn with_prefix(&self, key: String) -> String {
        if self.prefix.is_empty() {
            key
        } else {
            format!("{}{key}", self.prefix)
        }
    }
}

/// What is wrong with the length of `value`, if anything (to follow the
/// value's name in an error).
fn out_of_bounds(value: &str) -> Option<String> {
    if value.is_empty() {
        Some("is empty".to_owned())
    } else if value.len() > MAX_VALUE_LEN {
        Some(format!(
            "is {} bytes, longer than the limit of {MAX_VALUE_LEN}",
            value.len()
        ))
    } else {
        None
    }
}

fn bounded(what: &str, value: String) -> Result<String, String> {
    match out_of_bounds(&value) {
        Some(problem) => Err(format!("{what} {problem}")),
        None => Ok(value),
    }
}

impl<B> KeyExtractor<B> for KeyFrom {
    fn extract(&self, request: &Request<B>) -> Key {
        Key::from_found(self.find(request))
    }
}

impl KeyFrom {
    /// `None` when the request has no value where this extractor looks;
    /// else the key, or why the value is unusable.
    fn find<B>(&self, request: &Request<B>) -> Option<Result<String, String>> {
        let key = match &*self.source {
            Source::Path(template) => template.key_for(request.uri().path())?,
            Source::Header(name) => {
                let value = request.headers().get(name)?;
                match value.to_str() {
                    Ok(v) => bounded(&format!("header `{name}`"), v.trim().to_owned()),
                    Err(_) => Err(format!("header `{name}` is not visible ASCII")),
                }
            }
            Source::Query(name) => {
                let query = request.uri().query()?;
                let value = form_urlencoded::parse(query.as_bytes())
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.into_owned())?;
                bounded(&format!("query parameter `{name}`"), value)
            }
        };
        Some(key.map(|k| self.with_prefix(k)))
    }
}

/// `/orders/{id}/pay` matched against a path, `order:<id>` filled in.
struct PathTemplate {
    source: String,
    segments: Vec<Segment>,
    key: Vec<KeyPiece>,
    /// With several captures, the bytes escaped in their values: `%` and
    /// every byte of the text between captures, so that `<a>:<b>` cannot
    /// make one key of `x:y`,`z` and `x`,`y:z`. Empty with one capture.
    escaped: Vec<u8>,
}

enum Segment {
    Literal(String),
    Capture(String),
}

enum KeyPiece {
    Text(String),
    /// Index into the captures.
    Capture(usize),
}

impl PathTemplate {
    fn parse(path: &str, key: &str) -> Result<Self, TemplateError> {
        if !path.starts_with('/') {
            return Err(TemplateError(format!(
                "path template {path:?} must start with `/`"
            )));
        }
        let mut shape = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for segment in segments(path) {
            if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                if name.is_empty() || names.iter().any(|n| n == name) {
                    return Err(TemplateError(format!(
                        "capture `{{{name}}}` in {path:?} is empty or repeated"
                    )));
                }
                names.push(name.to_owned());
                shape.push(Segment::Capture(name.to_owned()));
            } else if segment.contains(['{', '}']) {
                return Err(TemplateError(format!(
                    "segment {segment:?} of {path:?}: a capture takes a whole segment, `{{name}}`"
                )));
            } else {
                shape.push(Segment::Literal(segment.to_owned()));
            }
        }
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut rest = key;
        while let Some(open) = rest.find('<') {
            text.push_str(&rest[..open]);
            rest = &rest[open + 1..];
            if let Some(after) = rest.strip_prefix('<') {
                text.push('<');
                rest = after;
                continue;
            }
            let close = rest.find('>').ok_or_else(|| {
                TemplateError(format!(
                    "unclosed `<` in key template {key:?}; write `<<` for a literal `<`"
                ))
            })?;
            let name = &rest[..close];
            rest = &rest[close + 1..];
            let index = names.iter().position(|n| n == name).ok_or_else(|| {
                TemplateError(format!(
                    "key template {key:?} uses `<{name}>`, but {path:?} captures only {names:?}"
                ))
            })?;
            if !text.is_empty() {
                pieces.push(KeyPiece::Text(std::mem::take(&mut text)));
            }
            pieces.push(KeyPiece::Capture(index));
        }
        text.push_str(rest);
        if !text.is_empty() {
            pieces.push(KeyPiece::Text(text));
        }
        if pieces.is_empty() {
            return Err(TemplateError("the key template is empty".into()));
        }
        let escaped = separators(key, &pieces)?;
        Ok(PathTemplate {
            source: path.to_owned(),
            segments: shape,
            key: pieces,
            escaped,
        })
    }

    /// `None` when the path does not match; else the key or why the values
    /// are unusable.
    fn key_for(&self, path: &str) -> Option<Result<String, String>> {
        let mut parts = segments(path);
        let mut captures: SmallVec<[Cow<'_, str>; 4]> = SmallVec::new();
        // Reported only once the path is known to have this route's shape.
        let mut unusable = None;
        for segment in &self.segments {
            let part = parts.next()?;
            match segment {
                Segment::Literal(literal) if literal == part => {}
                Segment::Literal(_) => return None,
                Segment::Capture(_) if unusable.is_some() => {}
                Segment::Capture(name) => match decoded(part) {
                    Ok(value) => match out_of_bounds(&value) {
                        Some(problem) => {
                            unusable = Some(format!("path segment `{name}` {problem}"));
                        }
                        None => captures.push(value),
                    },
                    Err(()) => {
                        unusable = Some(format!("path segment `{name}` is not UTF-8 once decoded"));
                    }
                },
            }
        }
        // A path of another shape is not this route's, whatever it holds.
        if parts.next().is_some() {
            return None;
        }
        if let Some(reason) = unusable {
            return Some(Err(reason));
        }
        let piece_len = |piece: &KeyPiece| match piece {
            KeyPiece::Text(text) => text.len(),
            KeyPiece::Capture(index) => captures[*index].len(),
        };
        let mut key = String::with_capacity(self.key.iter().map(piece_len).sum());
        for piece in &self.key {
            match piece {
                KeyPiece::Text(text) => key.push_str(text),
                KeyPiece::Capture(index) if self.escaped.is_empty() => {
                    key.push_str(&captures[*index]);
                }
                KeyPiece::Capture(index) => {
                    for c in captures[*index].chars() {
                        if c.is_ascii() && self.escaped.contains(&(c as u8)) {
                            let _ = write!(key, "%{:02X}", c as u8);
                        } else {
                            key.push(c);
                        }
                    }
                }
            }
        }
        Some(Ok(key))
    }
}

/// The bytes to escape in the values of a key template with several
/// captures (see [`PathTemplate::escaped`]); refuses captures side by side
/// or separated by text with `%` or a non-ASCII character, which no
/// escaping keeps apart.
fn separators(key: &str, pieces: &[KeyPiece]) -> Result<Vec<u8>, TemplateError> {
    let captures = pieces
        .iter()
        .filter(|p| matches!(p, KeyPiece::Capture(_)))
        .count();
    if captures < 2 {
        return Ok(Vec::new());
    }
    let first = pieces
        .iter()
        .position(|p| matches!(p, KeyPiece::Capture(_)));
    let last = pieces
        .iter()
        .rposition(|p| matches!(p, KeyPiece::Capture(_)));
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(Vec::new());
    };
    let mut escaped = vec![b'%'];
    for pair in pieces[first..=last].windows(2) {
        match pair {
            [KeyPiece::Capture(_), KeyPiece::Capture(_)] => {
                return Err(TemplateError(format!(
                    "key template {key:?} puts two captures side by side; separate them with \
                     text, as in `<a>:<b>`"
                )));
            }
            [_, KeyPiece::Text(text)] => {
                if !text.is_ascii() || text.contains('%') {
                    return Err(TemplateError(format!(
                        "key template {key:?}: text between captures must be ASCII without `%`"
                    )));
                }
                escaped.extend(
                    text.bytes()
                        .filter(|b| !escaped.contains(b))
                        .collect::<Vec<_>>(),
                );
            }
            _ => {}
        }
    }
    Ok(escaped)
}

/// The segments of `path` after its first `/`.
fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').skip(1)
}

/// `part` percent-decoded; borrowed when it holds no escapes.
fn decoded(part: &str) -> Result<Cow<'_, str>, ()> {
    if !part.contains('%') {
        return Ok(Cow::Borrowed(part));
    }
    percent_decode_str(part).decode_utf8().map_err(drop)
}

#[cfg(test)]
mod tests;
