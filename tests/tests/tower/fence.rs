//! The fence check against hostile callers: signed tokens, a bounded table.

use axum::Router;
use axum::routing::{post, put};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lock_core::{FencingToken, Locker};
use lock_tower::{
    FENCING_TOKEN_HEADER, FenceCheckLayer, KeyFrom, LockLayer, PropagateFencingTokenLayer,
    SigningKey,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

use crate::serve;

fn key(id: &str, byte: u8) -> SigningKey {
    SigningKey::new(id, [byte; 32]).unwrap()
}

fn accounts() -> KeyFrom {
    KeyFrom::path("/accounts/{id}", "account:<id>")
}

/// A downstream service whose writes to accounts need a signed token.
async fn downstream(keys: Vec<SigningKey>) -> String {
    let check = FenceCheckLayer::new(accounts()).verify(keys).unwrap();
    let app = Router::new()
        .route(
            "/accounts/{id}",
            put(|token: FencingToken| async move { token.to_string() }),
        )
        .layer(check);
    format!("http://{}", serve(app).await)
}

/// A PUT to `url` with these headers: the status and body.
async fn put_with(url: &str, headers: &[(&str, &str)]) -> (StatusCode, String) {
    let mut request = Request::put(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let client = Client::builder(TokioExecutor::new()).build_http();
    let response: Response<_> = client
        .request(request.body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A PUT to `url` through a client signing under `key`, with `token`.
async fn put_signed(url: &str, key: SigningKey, token: u64) -> (StatusCode, String) {
    let resource = accounts();
    let mut client = ServiceBuilder::new()
        .layer(PropagateFencingTokenLayer::signed(key).resource(resource))
        .service(Client::builder(TokioExecutor::new()).build_http());
    let mut request = Request::put(url).body(Empty::<Bytes>::new()).unwrap();
    request.extensions_mut().insert(FencingToken::new(token));
    let response = client.ready().await.unwrap().call(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_handler_signs_for_its_lock_key_and_the_check_verifies_it() {
    let signing = key("k1", 1);
    let check = downstream(vec![signing.clone()]).await;
    // The upstream holds `account:<id>` and calls the downstream inside it.
    let upstream = Router::new()
        .route(
            "/accounts/{id}/move",
            post(
                |axum::extract::State((check, signing)): axum::extract::State<(
                    String,
                    SigningKey,
                )>,
                 axum::extract::Path(id): axum::extract::Path<u64>,
                 token: FencingToken| async move {
                    let mut client = ServiceBuilder::new()
                        .layer(PropagateFencingTokenLayer::signed(signing))
                        .service(Client::builder(TokioExecutor::new()).build_http());
                    let request = Request::put(format!("{check}/accounts/{id}"))
                        .body(Empty::<Bytes>::new())
                        .unwrap();
                    let response = client.ready().await.unwrap().call(request).await.unwrap();
                    assert_eq!(response.status(), StatusCode::OK);
                    let seen = response.into_body().collect().await.unwrap().to_bytes();
                    assert_eq!(seen, token.to_string().as_bytes());
                    "moved"
                },
            ),
        )
        .layer(LockLayer::new(
            Locker::memory(),
            KeyFrom::path("/accounts/{id}/move", "account:<id>"),
        ))
        .with_state((check, signing));
    let upstream = serve(upstream).await;
    let (status, body) = {
        let client = Client::builder(TokioExecutor::new()).build_http();
        let request = Request::post(format!("http://{upstream}/accounts/7/move"))
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = client.request(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, body)
    };
    assert_eq!(status, StatusCode::OK, "{body:?}");
    assert_eq!(body, "moved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_missing_and_misdirected_signatures_are_401_and_replays_409() {
    let signing = key("k1", 1);
    let check = downstream(vec![signing.clone()]).await;
    let seven = format!("{check}/accounts/7");
    let eight = format!("{check}/accounts/8");
    assert_eq!(
        put_signed(&seven, signing.clone(), 10).await.0,
        StatusCode::OK
    );

    // A caller that picks its own token, unsigned: refused, and not recorded.
    let (status, body) = put_with(&seven, &[("fencing-token", "18446744073709551615")]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(
        body.contains("missing") && body.contains("account:7"),
        "{body}"
    );

    // Forged: a well-formed MAC under the right key id that does not match.
    let forged = format!("k1:{}", "ab".repeat(32));
    let (status, body) = put_with(
        &seven,
        &[
            ("fencing-token", "11"),
            ("fencing-token-signature", &forged),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("does not match"), "{body}");

    // A key the checker does not know, and a malformed header.
    let other_key = key("k9", 9).sign("account:7", FencingToken::new(11));
    let (status, body) = put_with(
        &seven,
        &[
            ("fencing-token", "11"),
            ("fencing-token-signature", other_key.to_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("not accepted"), "{body}");
    let (status, _) = put_with(
        &seven,
        &[("fencing-token", "11"), ("fencing-token-signature", "k1")],
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A valid MAC for account 7, sent with a write to account 8.
    let for_seven = signing.sign("account:7", FencingToken::new(12));
    let (status, body) = put_with(
        &eight,
        &[
            ("fencing-token", "12"),
            ("fencing-token-signature", for_seven.to_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");

    // A valid, older signed token replayed: authentic, but stale.
    assert_eq!(
        put_signed(&seven, signing.clone(), 20).await.0,
        StatusCode::OK
    );
    let replay = signing.sign("account:7", FencingToken::new(10));
    let (status, body) = put_with(
        &seven,
        &[
            ("fencing-token", "10"),
            ("fencing-token-signature", replay.to_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("older than 20"), "{body}");
    // None of the refused requests moved the newest token: 20 still writes.
    assert_eq!(put_signed(&seven, signing, 20).await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotates_without_refusing_a_signed_write() {
    let (old, new) = (key("2026-10", 1), key("2026-11", 2));
    // Step 1: checkers accept both; signers still on the old key, then the new.
    let both = downstream(vec![new.clone(), old.clone()]).await;
    let url = format!("{both}/accounts/1");
    assert_eq!(put_signed(&url, old.clone(), 1).await.0, StatusCode::OK);
    assert_eq!(put_signed(&url, new.clone(), 2).await.0, StatusCode::OK);
    // Step 2: the old key dropped; a signature under it is refused.
    let new_only = downstream(vec![new.clone()]).await;
    let url = format!("{new_only}/accounts/1");
    assert_eq!(put_signed(&url, new, 3).await.0, StatusCode::OK);
    assert_eq!(put_signed(&url, old, 4).await.0, StatusCode::UNAUTHORIZED);
    // A checker with no key, or two of one id, is refused at setup.
    let err = FenceCheckLayer::new(accounts()).verify([]).unwrap_err();
    assert!(err.to_string().contains("at least one"), "{err}");
    let err = FenceCheckLayer::new(accounts())
        .verify([key("k", 1), key("k", 2)])
        .unwrap_err();
    assert!(err.to_string().contains("\"k\""), "{err}");
}

/// One unsigned PUT for `resource` with `token` straight through `service`.
fn request(id: u64, token: u64) -> Request<Empty<Bytes>> {
    Request::put(format!("/accounts/{id}"))
        .header(FENCING_TOKEN_HEADER, token)
        .body(Empty::new())
        .unwrap()
}

#[test]
fn the_newest_token_table_stays_bounded_and_never_lets_a_stale_token_pass() {
    const MAX: usize = 1_000;
    const RESOURCES: u64 = 100_000;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let check = FenceCheckLayer::new(accounts()).max_resources(MAX);
    let newest = check.newest_tokens().clone();
    let service = check.layer(tower::service_fn(|_: Request<Empty<Bytes>>| async {
        Ok::<_, std::convert::Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let status = |id, token| {
        let response = runtime.block_on(service.clone().oneshot(request(id, token)));
        response.unwrap().status()
    };
    metrics::with_local_recorder(&recorder, || {
        // A caller sends one resource after another, tokens rising.
        for id in 0..RESOURCES {
            assert_eq!(status(id, 1_000 + id), StatusCode::OK);
        }
        assert!(newest.len() <= MAX, "{} resources kept", newest.len());
        // Every resource, remembered or forgotten, refuses an older token.
        for id in (0..RESOURCES).step_by(97) {
            assert_eq!(
                status(id, 1_000 + id - 1),
                StatusCode::CONFLICT,
                "account {id}"
            );
        }
    });
    let counters: Vec<(String, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(n) => Some((key.key().name().to_owned(), n)),
            _ => None,
        })
        .collect();
    let counter = |name: &str| {
        counters
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, n)| *n)
    };
    assert!(
        counter("lock_fence_forgotten_total") >= RESOURCES - MAX as u64,
        "{counters:?}"
    );
    assert!(counter("lock_fence_below_floor_total") > 0, "{counters:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_key_is_signed_with_its_own_leases_token() {
    let signing = key("k1", 1);
    let check = FenceCheckLayer::new(KeyFrom::path("/orders/{id}", "order:<id>"))
        .verify([signing.clone()])
        .unwrap();
    let app = Router::new()
        .route(
            "/orders/{id}",
            put(|token: FencingToken| async move { token.to_string() }),
        )
        .layer(check);
    let url = format!("http://{}/orders/1", serve(app).await);
    let locker = Locker::memory();
    let guard = locker.lock("order:1").await.unwrap();
    let mut client = ServiceBuilder::new()
        .layer(PropagateFencingTokenLayer::signed(signing))
        .service(Client::builder(TokioExecutor::new()).build_http());
    let mut request = Request::put(url).body(Empty::<Bytes>::new()).unwrap();
    // A stray token of another lock beside the lease: the lease's is signed.
    request.extensions_mut().insert(guard.lease());
    request
        .extensions_mut()
        .insert(FencingToken::new(guard.token().get() + 1_000));
    let response = client.ready().await.unwrap().call(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, guard.token().to_string().as_bytes());
    guard.release().await.unwrap();
}
