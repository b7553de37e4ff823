//! Path templates: `/orders/{id}/pay` matched against a request path, and
//! the key template `order:<id>` filled in with the captured values.

use std::borrow::Cow;
use std::fmt::Write as _;

use percent_encoding::percent_decode_str;
use smallvec::SmallVec;

use super::{TemplateError, out_of_bounds};

/// `/orders/{id}/pay` matched against a path, `order:<id>` filled in.
pub(super) struct PathTemplate {
    pub(super) source: String,
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
    pub(super) fn parse(path: &str, key: &str) -> Result<Self, TemplateError> {
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
    pub(super) fn key_for(&self, path: &str) -> Option<Result<String, String>> {
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
