//! Authenticated fencing headers: a MAC (HMAC-SHA256) over the resource
//! and the token, so that a caller cannot pick its own token.
//!
//! Unsigned, a `fencing-token` header is whatever the caller says: one
//! request with `fencing-token: 18446744073709551615` would make every later
//! write to its resource a 409. Signed, the header
//! `fencing-token-signature: <key id>:<64 hex digits>` must match the
//! resource the checking service names and the token, under one of the keys
//! it accepts. Keys carry an id, so a new key can be rolled out to checkers
//! before signers switch to it, and the old one dropped after.

use std::fmt;

use hmac::{Hmac, Mac};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use lock_core::FencingToken;
use sha2::Sha256;

/// The header that carries the MAC of a `fencing-token` header.
pub const FENCING_SIGNATURE_HEADER: HeaderName = HeaderName::from_static("fencing-token-signature");

/// Shortest secret accepted: 32 bytes, the size of SHA-256's output.
pub const MIN_SECRET_LEN: usize = 32;

/// Longest key id.
pub const MAX_KEY_ID_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// A shared secret with an id, to sign fencing tokens
/// ([`PropagateFencingTokenLayer::signed`](crate::PropagateFencingTokenLayer::signed))
/// and check them ([`FenceCheckLayer::verify`](crate::FenceCheckLayer::verify)).
///
/// ```
/// use lock_tower::SigningKey;
///
/// let secret = [7u8; 32]; // from your secret store, never from source code
/// let key = SigningKey::new("2026-11", secret)?;
/// assert_eq!(key.id(), "2026-11");
/// assert!(SigningKey::new("2026-11", b"short").is_err());
/// # Ok::<(), lock_tower::InvalidSigningKey>(())
/// ```
#[derive(Clone)]
pub struct SigningKey {
    id: String,
    mac: HmacSha256,
}

impl SigningKey {
    /// A key named `id` (1 to [`MAX_KEY_ID_LEN`] ASCII letters, digits, `.`,
    /// `_` or `-`) over `secret` (at least [`MIN_SECRET_LEN`] bytes).
    pub fn new(id: impl Into<String>, secret: impl AsRef<[u8]>) -> Result<Self, InvalidSigningKey> {
        let id = id.into();
        let id_ok = !id.is_empty()
            && id.len() <= MAX_KEY_ID_LEN
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !id_ok {
            return Err(InvalidSigningKey::Id(id.chars().take(64).collect()));
        }
        let secret = secret.as_ref();
        if secret.len() < MIN_SECRET_LEN {
            return Err(InvalidSigningKey::ShortSecret {
                id,
                len: secret.len(),
            });
        }
        let mac = HmacSha256::new_from_slice(secret).expect("HMAC takes a key of any length");
        Ok(SigningKey { id, mac })
    }

    /// The key's id, sent with every signature.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The MAC of `token` for `resource`: length-prefixed, so that no two
    /// (resource, token) pairs share an input.
    fn mac(&self, resource: &str, token: FencingToken) -> HmacSha256 {
        let mut mac = self.mac.clone();
        mac.update(b"fencing-token/v1\n");
        mac.update(&(resource.len() as u64).to_be_bytes());
        mac.update(resource.as_bytes());
        mac.update(&token.get().to_be_bytes());
        mac
    }

    /// The `fencing-token-signature` value for `token` on `resource`.
    pub fn sign(&self, resource: &str, token: FencingToken) -> HeaderValue {
        let tag = self.mac(resource, token).finalize().into_bytes();
        let value = format!("{}:{}", self.id, hex::encode(tag));
        HeaderValue::try_from(value).expect("key ids and hex digits are valid header bytes")
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A [`SigningKey`] that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidSigningKey {
    /// The id is empty, too long or has a character other than ASCII
    /// letters, digits, `.`, `_` and `-`; or two keys given to
    /// [`FenceCheckLayer::verify`](crate::FenceCheckLayer::verify) have it.
    Id(String),
    /// [`FenceCheckLayer::verify`](crate::FenceCheckLayer::verify) was given
    /// no key.
    NoKeys,
    /// The secret is shorter than [`MIN_SECRET_LEN`] bytes.
    ShortSecret {
        /// The key's id.
        id: String,
        /// The secret's length.
        len: usize,
    },
}

impl fmt::Display for InvalidSigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidSigningKey::Id(id) => write!(
                f,
                "signing key id {id:?} must be unique and 1 to {MAX_KEY_ID_LEN} ASCII letters, \
                 digits, `.`, `_` or `-`"
            ),
            InvalidSigningKey::NoKeys => {
                f.write_str("no signing key to verify fencing tokens with; give at least one")
            }
            InvalidSigningKey::ShortSecret { id, len } => write!(
                f,
                "the secret of signing key {id:?} has {len} bytes; use at least \
                 {MIN_SECRET_LEN} random bytes"
            ),
        }
    }
}

impl std::error::Error for InvalidSigningKey {}

/// Why a request's signature was refused (answered with 401).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadSignature {
    Missing,
    Malformed,
    UnknownKey,
    Forged,
}

impl fmt::Display for BadSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BadSignature::Missing => "the `fencing-token-signature` header is missing",
            BadSignature::Malformed => {
                "the `fencing-token-signature` header is not `<key id>:<64 hex digits>`"
            }
            BadSignature::UnknownKey => "the `fencing-token-signature` key id is not accepted here",
            BadSignature::Forged => {
                "the `fencing-token-signature` does not match the token and resource"
            }
        })
    }
}

/// Checks the signature in `headers` of `token` for `resource` against
/// `keys`, comparing MACs in constant time.
pub(crate) fn verify(
    keys: &[SigningKey],
    headers: &HeaderMap,
    resource: &str,
    token: FencingToken,
) -> Result<(), BadSignature> {
    let value = headers
        .get(FENCING_SIGNATURE_HEADER)
        .ok_or(BadSignature::Missing)?;
    let (id, tag) = value
        .to_str()
        .ok()
        .and_then(|value| value.split_once(':'))
        .ok_or(BadSignature::Malformed)?;
    let mut bytes = [0u8; 32];
    hex::decode_to_slice(tag, &mut bytes).map_err(|_| BadSignature::Malformed)?;
    let key = keys
        .iter()
        .find(|key| key.id == id)
        .ok_or(BadSignature::UnknownKey)?;
    key.mac(resource, token)
        .verify_slice(&bytes)
        .map_err(|_| BadSignature::Forged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str, byte: u8) -> SigningKey {
        SigningKey::new(id, [byte; 32]).unwrap()
    }

    fn signed(value: HeaderValue) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(FENCING_SIGNATURE_HEADER, value);
        headers
    }

    #[test]
    fn a_signature_holds_for_its_resource_and_token_only() {
        let keys = [key("a", 1)];
        let token = FencingToken::new(42);
        let headers = signed(keys[0].sign("order:42", token));
        assert_eq!(verify(&keys, &headers, "order:42", token), Ok(()));
        assert_eq!(
            verify(&keys, &headers, "order:43", token),
            Err(BadSignature::Forged)
        );
        assert_eq!(
            verify(&keys, &headers, "order:42", FencingToken::new(43)),
            Err(BadSignature::Forged)
        );
        assert_eq!(
            verify(&[key("a", 2)], &headers, "order:42", token),
            Err(BadSignature::Forged)
        );
        assert_eq!(
            verify(&[key("b", 1)], &headers, "order:42", token),
            Err(BadSignature::UnknownKey)
        );
    }

    #[test]
    fn the_resource_is_length_prefixed() {
        // "ab" + token and "a" + a token whose bytes start with "b" must differ.
        let key = key("a", 1);
        assert_ne!(
            key.sign("ab", FencingToken::new(1)),
            key.sign("a", FencingToken::new(u64::from(b'b') << 56 | 1))
        );
    }

    #[test]
    fn malformed_signatures_are_told_apart_from_missing_ones() {
        let keys = [key("a", 1)];
        let token = FencingToken::new(1);
        assert_eq!(
            verify(&keys, &HeaderMap::new(), "r", token),
            Err(BadSignature::Missing)
        );
        for bad in ["", "a", "a:", "a:zz", &format!("a:{}", "0".repeat(63))] {
            let headers = signed(HeaderValue::from_str(bad).unwrap());
            assert_eq!(
                verify(&keys, &headers, "r", token),
                Err(BadSignature::Malformed),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn bad_keys_are_refused_with_their_id() {
        let err = SigningKey::new("a b", [0u8; 32]).unwrap_err();
        assert!(err.to_string().contains("\"a b\""), "{err}");
        let err = SigningKey::new("k1", [0u8; 31]).unwrap_err();
        assert!(err.to_string().contains("\"k1\" has 31 bytes"), "{err}");
        assert!(SigningKey::new("", [0u8; 32]).is_err());
        assert!(SigningKey::new("x".repeat(33), [0u8; 32]).is_err());
    }
}
