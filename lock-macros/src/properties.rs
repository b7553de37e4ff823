//! The attribute's parsers on arbitrary input: key templates, durations
//! and whole argument lists parse or fail with an error, never a panic,
//! and the expansion of what parses does not panic either.

use std::time::Duration;

use proptest::prelude::*;

use crate::args::LockArgs;
use crate::expand::expand;
use crate::template;

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(10_000)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_key_template_parses_or_fails(template in "[a-z:<>.{}_ 0-9]{0,30}|\\PC{0,20}") {
        let _ = template::parse(&template);
    }

    #[test]
    fn any_duration_parses_or_fails(ttl in "[0-9]{0,22}(ms|s|m|h|d|x|)|\\PC{0,12}") {
        let _ = syn::parse_str::<LockArgs>(&format!("key = \"k\", ttl = {ttl:?}"));
    }

    #[test]
    fn durations_are_read_back(ms in 1u64..10_000_000_000) {
        let args = syn::parse_str::<LockArgs>(&format!("key = \"k\", ttl = \"{ms}ms\", wait = \"{ms}ms\""))
            .unwrap();
        prop_assert_eq!(args.ttl, Some(Duration::from_millis(ms)));
        prop_assert_eq!(args.wait, Some(Duration::from_millis(ms)));
    }

    #[test]
    fn whatever_parses_expands_or_fails(key in "[a-z:<>.{}_ 0-9]{0,30}", args in "[a-z =\",_0-9]{0,30}") {
        let source = format!("key = {key:?}{}{args}", if args.is_empty() { "" } else { ", " });
        if let Ok(args) = syn::parse_str::<LockArgs>(&source) {
            let func = syn::parse_str("async fn pay(id: u64, order: Order) -> u64 { id }").unwrap();
            let _ = expand(args, func);
        }
    }
}
