//! Lock keys from requests: [`KeyExtractor`] and the built-in [`KeyFrom`].
//!
//! An extractor says what to do with a request: a [`Key`] to lock, pass it
//! through unlocked, or refuse it because it names its resource badly (the
//! layer answers 400 / `INVALID_ARGUMENT`).
//! Values taken from a request are percent-decoded, must be UTF-8 and at
//! most [`MAX_VALUE_LEN`] bytes; the whole key then goes through
//! lock-core's validation and escaping.

use std::fmt;
use std::sync::Arc;

use http::Request;
use http::header::HeaderName;

/// Longest value taken from one path segment, header or query parameter.
pub const MAX_VALUE_LEN: usize = 256;

/// What a [`KeyExtractor`] found in a request.
///
/// ```
/// use http::Request;
/// use lock_tower::{Key, KeyExtractor, KeyFrom};
///
/// let by_query = KeyFrom::query("account").prefix("account:");
/// let locked = Request::get("/balance?account=7").body(()).unwrap();
/// assert_eq!(by_query.extract(&locked), Key::Lock("account:7".into()));
/// let unnamed = Request::get("/balance").body(()).unwrap();
/// assert_eq!(by_query.extract(&unnamed), Key::Pass);
/// let empty = Request::get("/balance?account=").body(()).unwrap();
/// assert!(matches!(by_query.extract(&empty), Key::Invalid(_)));
/// ```
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
///
/// ```
/// use http::Request;
/// use lock_tower::{Key, KeyExtractor};
///
/// /// The tenant's lock: one request per tenant at a time.
/// #[derive(Clone)]
/// struct ByTenant;
///
/// impl<B> KeyExtractor<B> for ByTenant {
///     fn extract(&self, request: &Request<B>) -> Key {
///         match request.headers().get("x-tenant").map(|v| v.to_str()) {
///             None => Key::Pass,
///             Some(Ok(tenant)) => Key::Lock(format!("tenant:{tenant}")),
///             Some(Err(_)) => Key::Invalid("header `x-tenant` is not visible ASCII".into()),
///         }
///     }
/// }
///
/// let request = Request::post("/import").header("x-tenant", "acme").body(()).unwrap();
/// assert_eq!(ByTenant.extract(&request), Key::Lock("tenant:acme".into()));
/// // A closure is an extractor too.
/// let by_method = |request: &Request<()>| Some(format!("method:{}", request.method()));
/// assert_eq!(by_method.extract(&request), Key::Lock("method:POST".into()));
/// ```
pub trait KeyExtractor<B>: Clone + Send + Sync + 'static {
    /// What to do with `request`.
    ///
    /// ```
    /// use http::Request;
    /// use lock_tower::{Key, KeyExtractor, KeyFrom};
    ///
    /// let request = Request::post("/orders/42/pay").body(()).unwrap();
    /// let key = KeyFrom::path("/orders/{id}/pay", "order:<id>").extract(&request);
    /// assert_eq!(key, Key::Lock("order:42".into()));
    /// ```
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
///
/// ```
/// use lock_tower::KeyFrom;
///
/// let err = KeyFrom::try_path("/orders/{id}/pay", "order:<number>").unwrap_err();
/// assert!(err.to_string().contains("number"), "{err}");
/// ```
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
    ///
    /// ```
    /// use http::Request;
    /// use lock_tower::{Key, KeyExtractor, KeyFrom};
    ///
    /// let transfer = KeyFrom::path("/accounts/{from}/transfer/{to}", "move:<from>:<to>");
    /// let request = Request::post("/accounts/a:1/transfer/b").body(()).unwrap();
    /// // A `:` in a value is escaped, so values never run into each other.
    /// assert_eq!(transfer.extract(&request), Key::Lock("move:a%3A1:b".into()));
    /// let other = Request::get("/accounts/a1").body(()).unwrap();
    /// assert_eq!(transfer.extract(&other), Key::Pass);
    /// ```
    pub fn path(path: &str, key: &str) -> Self {
        match Self::try_path(path, key) {
            Ok(extractor) => extractor,
            Err(err) => panic!("KeyFrom::path({path:?}, {key:?}): {err}"),
        }
    }

    /// [`KeyFrom::path`] that reports a malformed template as an error.
    ///
    /// ```
    /// use lock_tower::KeyFrom;
    ///
    /// // Templates read from configuration at startup.
    /// let (path, key) = ("/orders/{id}/pay", "order:<id>");
    /// let extractor = KeyFrom::try_path(path, key)?;
    /// # let _ = extractor;
    /// # Ok::<(), lock_tower::extract::TemplateError>(())
    /// ```
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
    ///
    /// ```
    /// use http::Request;
    /// use lock_tower::{Key, KeyExtractor, KeyFrom};
    ///
    /// let by_header = KeyFrom::header("x-order-id").prefix("order:");
    /// let request = Request::post("/pay").header("x-order-id", " 42 ").body(()).unwrap();
    /// assert_eq!(by_header.extract(&request), Key::Lock("order:42".into()));
    /// ```
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
    ///
    /// ```
    /// use http::Request;
    /// use lock_tower::{Key, KeyExtractor, KeyFrom};
    ///
    /// let by_query = KeyFrom::query("sku");
    /// let request = Request::post("/reserve?sku=red%20shoe").body(()).unwrap();
    /// assert_eq!(by_query.extract(&request), Key::Lock("red shoe".into()));
    /// ```
    pub fn query(name: &str) -> Self {
        KeyFrom {
            source: Arc::new(Source::Query(name.to_owned())),
            prefix: Arc::from(""),
        }
    }

    /// Prepends `prefix` to every key (`"order:"`).
    ///
    /// ```
    /// use http::Request;
    /// use lock_tower::{Key, KeyExtractor, KeyFrom};
    ///
    /// let by_query = KeyFrom::query("id").prefix("invoice:");
    /// let request = Request::post("/send?id=9").body(()).unwrap();
    /// assert_eq!(by_query.extract(&request), Key::Lock("invoice:9".into()));
    /// ```
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

mod path;
#[cfg(test)]
mod tests;

use self::path::PathTemplate;
