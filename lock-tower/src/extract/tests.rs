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
