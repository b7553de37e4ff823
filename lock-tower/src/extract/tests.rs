use super::*;

fn get(uri: &str) -> Request<()> {
    Request::builder().uri(uri).body(()).unwrap()
}

#[test]
fn path_templates_capture_segments() {
    let k = KeyFrom::path("/orders/{id}/pay", "order:<id>");
    assert_eq!(
        k.extract(&get("/orders/42/pay")),
        Key::Lock("order:42".into())
    );
    assert_eq!(
        k.extract(&get("/orders/42/pay?x=1")),
        Key::Lock("order:42".into())
    );
    assert_eq!(k.extract(&get("/orders/42")), Key::Pass);
    assert_eq!(k.extract(&get("/orders/42/refund")), Key::Pass);
    assert_eq!(
        k.extract(&get("/orders/a%7Bb%7D/pay")),
        Key::Lock("order:a{b}".into())
    );
    assert!(matches!(
        k.extract(&get("/orders/%FF/pay")),
        Key::Invalid(_)
    ));
    let long = format!("/orders/{}/pay", "9".repeat(MAX_VALUE_LEN + 1));
    assert!(matches!(k.extract(&get(&long)), Key::Invalid(reason) if reason.contains("limit")));
}

#[test]
fn bad_templates_are_errors() {
    assert!(KeyFrom::try_path("orders/{id}", "order:<id>").is_err());
    assert!(KeyFrom::try_path("/orders/{id}", "order:<nope>").is_err());
    assert!(KeyFrom::try_path("/orders/x{id}", "order:<id>").is_err());
    assert!(KeyFrom::try_path("/orders/{id}", "order:<id").is_err());
    assert!(KeyFrom::try_path("/orders/{id}/{id}", "<id>").is_err());
    assert!(KeyFrom::try_path("/t/{a}/{b}", "<a><b>").is_err());
    assert!(KeyFrom::try_path("/t/{a}/{b}", "<a>%<b>").is_err());
}

#[test]
fn values_of_several_captures_escape_their_separators() {
    let k = KeyFrom::path("/t/{a}/{b}", "k:<a>:<b>");
    assert_eq!(k.extract(&get("/t/x%3Ay/z")), Key::Lock("k:x%3Ay:z".into()));
    assert_eq!(k.extract(&get("/t/x/y%3Az")), Key::Lock("k:x:y%3Az".into()));
    assert_eq!(k.extract(&get("/t/50%25/z")), Key::Lock("k:50%25:z".into()));
}

#[test]
fn headers_and_queries() {
    let h = KeyFrom::header("x-order-id").prefix("order:");
    let req = Request::builder()
        .header("x-order-id", "7")
        .body(())
        .unwrap();
    assert_eq!(h.extract(&req), Key::Lock("order:7".into()));
    assert_eq!(h.extract(&get("/")), Key::Pass);
    let bad = Request::builder()
        .header(
            "x-order-id",
            http::HeaderValue::from_bytes(b"\xff").unwrap(),
        )
        .body(())
        .unwrap();
    assert!(matches!(h.extract(&bad), Key::Invalid(_)));
    let q = KeyFrom::query("account");
    assert_eq!(
        q.extract(&get("/x?account=a%20b&y=1")),
        Key::Lock("a b".into())
    );
    assert_eq!(q.extract(&get("/x?y=1")), Key::Pass);
    assert!(matches!(q.extract(&get("/x?account=")), Key::Invalid(_)));
}

#[test]
fn closures_are_extractors() {
    let f = |req: &Request<()>| {
        req.uri()
            .path()
            .strip_prefix("/jobs/")
            .map(|id| format!("job:{id}"))
    };
    assert_eq!(f.extract(&get("/jobs/9")), Key::Lock("job:9".into()));
}

mod properties {
    //! Every parser of request data, on arbitrary input: no panic, and no
    //! two different values made into one key.

    use http::HeaderValue;
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    use proptest::prelude::*;

    use super::super::*;

    fn config() -> ProptestConfig {
        ProptestConfig::with_cases(10_000)
    }

    /// Values drawn from few characters, so that collisions would be found.
    fn value() -> impl Strategy<Value = String> {
        "[a:%/2é ]{1,6}"
    }

    fn key_of<B>(extractor: &KeyFrom, request: &Request<B>) -> Option<String> {
        match extractor.extract(request) {
            Key::Lock(key) => Some(key),
            _ => None,
        }
    }

    fn path_request(values: &[&str]) -> Request<()> {
        let mut uri = String::from("/t");
        for v in values {
            uri.push('/');
            uri.extend(utf8_percent_encode(v, NON_ALPHANUMERIC));
        }
        Request::builder().uri(uri).body(()).unwrap()
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn templates_parse_or_fail_without_panicking(path in ".{0,40}", key in ".{0,40}") {
            let _ = KeyFrom::try_path(&path, &key);
        }

        #[test]
        fn any_path_is_matched_without_panicking(path in "/[a-z0-9%/{}<>é.]{0,60}") {
            let extractor = KeyFrom::path("/orders/{id}/{line}", "o:<id>:<line>");
            if let Ok(request) = Request::builder().uri(path.as_str()).body(()) {
                let _ = extractor.extract(&request);
            }
        }

        #[test]
        fn two_captures_make_one_key_only_of_equal_values(
            a in value(), b in value(), c in value(), d in value(),
        ) {
            let extractor = KeyFrom::path("/t/{a}/{b}", "k:<a>:<b>");
            let one = key_of(&extractor, &path_request(&[&a, &b]));
            let two = key_of(&extractor, &path_request(&[&c, &d]));
            if one.is_some() && one == two {
                prop_assert_eq!((a, b), (c, d));
            }
        }

        #[test]
        fn one_capture_makes_one_key_only_of_equal_values(a in value(), b in value()) {
            let extractor = KeyFrom::path("/t/{a}", "k:<a>");
            let one = key_of(&extractor, &path_request(&[&a]));
            let two = key_of(&extractor, &path_request(&[&b]));
            if one.is_some() && one == two {
                prop_assert_eq!(a, b);
            }
        }

        #[test]
        fn headers_make_one_key_only_of_equal_values(a in value(), b in value()) {
            let extractor = KeyFrom::header("x-id").prefix("k:");
            let request = |v: &str| {
                let mut request = Request::new(());
                if let Ok(value) = HeaderValue::from_str(v) {
                    request.headers_mut().insert("x-id", value);
                }
                request
            };
            let (one, two) = (key_of(&extractor, &request(&a)), key_of(&extractor, &request(&b)));
            if one.is_some() && one == two {
                // Header values are taken without surrounding whitespace.
                prop_assert_eq!(a.trim(), b.trim());
            }
        }

        #[test]
        fn any_header_bytes_are_read_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(value) = HeaderValue::from_bytes(&bytes) {
                let mut request = Request::new(());
                request.headers_mut().insert("x-id", value);
                let _ = KeyFrom::header("x-id").extract(&request);
            }
        }

        #[test]
        fn queries_make_one_key_only_of_equal_values(a in value(), b in value()) {
            let extractor = KeyFrom::query("id").prefix("k:");
            let request = |v: &str| {
                let query: String = form_urlencoded::Serializer::new(String::new())
                    .append_pair("x", "1")
                    .append_pair("id", v)
                    .finish();
                Request::builder().uri(format!("/t?{query}")).body(()).unwrap()
            };
            let (one, two) = (key_of(&extractor, &request(&a)), key_of(&extractor, &request(&b)));
            if one.is_some() && one == two {
                prop_assert_eq!(a, b);
            }
        }

        #[test]
        fn any_query_is_read_without_panicking(query in "[a-z=&%+0-9é]{0,60}") {
            if let Ok(request) = Request::builder().uri(format!("/t?{query}")).body(()) {
                let _ = KeyFrom::query("id").extract(&request);
            }
        }
    }
}
