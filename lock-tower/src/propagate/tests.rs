//! The `fencing-token` header on arbitrary input: no panic, every token
//! read back exactly, and only plain decimals accepted.

use http::HeaderValue;
use proptest::prelude::*;

use super::fencing_token;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn any_header_bytes_are_read_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        if let Ok(value) = HeaderValue::from_bytes(&bytes) {
            let mut headers = http::HeaderMap::new();
            headers.insert("fencing-token", value);
            let _ = fencing_token(&headers);
        }
    }

    #[test]
    fn fencing_tokens_read_back_exactly(token in any::<u64>()) {
        let mut headers = http::HeaderMap::new();
        headers.insert("fencing-token", HeaderValue::from(token));
        prop_assert_eq!(fencing_token(&headers), Ok(Some(lock_core::FencingToken::new(token))));
    }

    #[test]
    fn a_fencing_token_header_is_accepted_only_as_plain_decimal(text in "[0-9+\\- a]{0,24}") {
        let mut headers = http::HeaderMap::new();
        headers.insert("fencing-token", HeaderValue::from_str(&text).unwrap());
        let plain = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
        match fencing_token(&headers) {
            Ok(Some(token)) => {
                prop_assert!(plain);
                prop_assert_eq!(text.parse::<u64>(), Ok(token.get()));
            }
            Ok(None) => prop_assert!(false, "the header is there"),
            Err(_) => prop_assert!(!plain || text.parse::<u64>().is_err()),
        }
    }
}
