//! The layer in axum stacks.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Extension, Router};
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use lock_core::{FencingToken, Lease, LockError, Locker, distributed_lock};
use lock_testkit::{RedisServer, TestStore};
use lock_tower::{FencingHeader, KeyFrom, LockLayer, OnLost, PropagateFencingTokenLayer};
use tokio::sync::{Barrier, Notify, mpsc};
use tower::{Service, ServiceBuilder, ServiceExt};

use crate::serve;

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

async fn call(
    client: &HttpClient,
    method: &str,
    url: String,
) -> (StatusCode, http::HeaderMap, String) {
    let request = Request::builder()
        .method(method)
        .uri(&url)
        .body(Empty::new())
        .unwrap();
    let answered = async {
        let response = client.request(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        (
            parts.status,
            parts.headers,
            String::from_utf8_lossy(&body).into_owned(),
        )
    };
    // A handler entered that should not have been waits forever: fail then.
    let answered = tokio::time::timeout(ANSWER_BOUND, answered).await;
    answered.unwrap_or_else(|_| panic!("{method} {url}: no answer within {ANSWER_BOUND:?}"))
}

/// How long a test waits for an answer before it fails.
const ANSWER_BOUND: Duration = Duration::from_secs(30);

/// Handler state: who is inside which order, and any overlap seen.
#[derive(Default)]
struct Inside {
    orders: Mutex<HashMap<u64, bool>>,
    overlaps: AtomicU64,
}

async fn exclusive(
    State(inside): State<Arc<Inside>>,
    Path(id): Path<u64>,
    token: FencingToken,
) -> String {
    let was = inside
        .orders
        .lock()
        .unwrap()
        .insert(id, true)
        .unwrap_or(false);
    if was {
        inside.overlaps.fetch_add(1, Ordering::SeqCst);
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    inside.orders.lock().unwrap().insert(id, false);
    token.to_string()
}

fn order_layer(locker: Locker) -> LockLayer<KeyFrom> {
    LockLayer::new(locker, KeyFrom::path("/orders/{id}/pay", "order:<id>"))
        .wait(Duration::from_secs(20))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_order_requests_serialise_across_replicas() {
    let server = RedisServer::start();
    let inside = Arc::new(Inside::default());
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let locker = Locker::redis(&server.url()).await.unwrap();
        let app = Router::new()
            .route("/orders/{id}/pay", post(exclusive))
            .layer(order_layer(locker))
            .with_state(inside.clone());
        replicas.push(serve(app).await);
    }
    let client = client();
    let requests = (0..24).map(|i| {
        let (client, addr) = (client.clone(), replicas[i % 2]);
        let order = 1 + (i / 2) % 3;
        async move { call(&client, "POST", format!("http://{addr}/orders/{order}/pay")).await }
    });
    let mut tokens: HashMap<u64, Vec<u64>> = HashMap::new();
    for (i, (status, _, body)) in futures_util::future::join_all(requests)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(status, StatusCode::OK, "{body}");
        tokens
            .entry(1 + (i as u64 / 2) % 3)
            .or_default()
            .push(body.parse().unwrap());
    }
    assert_eq!(
        inside.overlaps.load(Ordering::SeqCst),
        0,
        "two requests for one order ran at once"
    );
    for (order, mut t) in tokens {
        t.sort();
        t.dedup();
        assert_eq!(t.len(), 8, "order {order}: every request had its own token");
    }
}

async fn meet(State(barrier): State<Arc<Barrier>>) -> &'static str {
    barrier.wait().await;
    "met"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_orders_run_in_parallel() {
    let locker = Locker::memory();
    let app = Router::new()
        .route("/orders/{id}/pay", post(meet))
        .layer(order_layer(locker))
        .with_state(Arc::new(Barrier::new(2)));
    let addr = serve(app).await;
    let client = client();
    let both = futures_util::future::join(
        call(&client, "POST", format!("http://{addr}/orders/1/pay")),
        call(&client, "POST", format!("http://{addr}/orders/2/pay")),
    );
    let (a, b) = tokio::time::timeout(Duration::from_secs(10), both)
        .await
        .expect("requests for different orders were serialised");
    assert_eq!((a.0, b.0), (StatusCode::OK, StatusCode::OK));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_is_answered_with_423_and_retry_after() {
    let locker = Locker::memory();
    let app = Router::new()
        .route("/orders/{id}/pay", post(|| async { "paid" }))
        .layer(order_layer(locker.clone()).wait(Duration::from_millis(100)));
    let addr = serve(app).await;
    // Another holder, in another "process" of the same store.
    let holder = locker
        .lock("order:5")
        .ttl(Duration::from_secs(12))
        .await
        .unwrap();
    let (status, headers, body) =
        call(&client(), "POST", format!("http://{addr}/orders/5/pay")).await;
    assert_eq!(status, StatusCode::LOCKED);
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=12).contains(&retry), "Retry-After {retry}");
    assert!(body.contains("`order:5`"), "{body}");
    holder.release().await.unwrap();
    let (status, _, _) = call(&client(), "POST", format!("http://{addr}/orders/5/pay")).await;
    assert_eq!(status, StatusCode::OK);
}

/// A job triggered on every replica: with `if_held_skip` the first request
/// runs it, one while it runs or within its `hold_at_least` is answered
/// 409 at once without entering the handler, and one after runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skipping_layer_answers_409_without_running_the_handler() {
    let locker = Locker::memory();
    let runs = Arc::new(AtomicU64::new(0));
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let job = {
        let (runs, entered, release) = (runs.clone(), entered.clone(), release.clone());
        move || async move {
            runs.fetch_add(1, Ordering::SeqCst);
            entered.notify_one();
            release.notified().await;
            "done"
        }
    };
    let hold = Duration::from_secs(2);
    let layer = LockLayer::new(locker.clone(), KeyFrom::path("/jobs/{name}", "job:<name>"))
        .wait(Duration::from_secs(5))
        .if_held_skip()
        .hold_at_least(hold);
    let app = Router::new().route("/jobs/{name}", post(job)).layer(layer);
    let addr = serve(app).await;
    let url = format!("http://{addr}/jobs/report");
    let first = {
        let url = url.clone();
        tokio::spawn(async move { call(&client(), "POST", url).await })
    };
    let bound = Duration::from_secs(10);
    let ran = tokio::time::timeout(bound, entered.notified()).await;
    ran.expect("the job never ran");
    let started = std::time::Instant::now();
    let (status, headers, body) = call(&client(), "POST", url.clone()).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(headers.get("retry-after").is_none());
    assert!(
        body.contains("`job:report`") && body.contains("skipped"),
        "{body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the skip waited"
    );
    release.notify_one();
    assert_eq!(first.await.unwrap().0, StatusCode::OK);
    // Done, but held at least `hold` after it was taken: still skipped.
    let (status, _, _) = call(&client(), "POST", url.clone()).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "a skipped request ran the job"
    );
    // Once the hold is over the next trigger runs it (the lock is free again).
    locker
        .lock("job:report")
        .wait(hold * 4)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let second = tokio::spawn(async move { call(&client(), "POST", url).await });
    let ran = tokio::time::timeout(bound, entered.notified()).await;
    ran.expect("the job never ran again");
    release.notify_one();
    assert_eq!(second.await.unwrap().0, StatusCode::OK);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// A streaming body whose chunks the test sends.
async fn streaming(State(chunks): State<Arc<Mutex<Option<mpsc::Receiver<Bytes>>>>>) -> Body {
    let rx = chunks
        .lock()
        .unwrap()
        .take()
        .expect("one streaming request per test");
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, Infallible>(chunk), rx))
    });
    Body::from_stream(stream)
}

fn streaming_app(locker: Locker) -> (Router, mpsc::Sender<Bytes>) {
    let (tx, rx) = mpsc::channel(4);
    let app = Router::new()
        .route("/reports/{id}", get(streaming))
        .layer(LockLayer::new(
            locker,
            KeyFrom::path("/reports/{id}", "report:<id>"),
        ))
        .with_state(Arc::new(Mutex::new(Some(rx))));
    (app, tx)
}

/// Starts a streaming report on a Redis-backed layer and reads its first
/// chunk; returns the body, the chunk sender and another owner's Locker.
async fn first_chunk_of_a_report(
    store: &TestStore,
) -> (hyper::body::Incoming, mpsc::Sender<Bytes>, Locker) {
    let locker = store.locker().await;
    let other = store.locker().await;
    let (app, chunks) = streaming_app(locker);
    let addr = serve(app).await;
    let request = Request::get(format!("http://{addr}/reports/1"))
        .body(Empty::new())
        .unwrap();
    let response = client().request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    chunks.send(Bytes::from_static(b"first ")).await.unwrap();
    let frame = body.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_data().unwrap(), "first ");
    // Headers and a chunk are out; the lock is still held.
    assert!(other.try_lock("report:1").await.unwrap().is_none());
    (body, chunks, other)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_body_keeps_the_lock_until_its_last_chunk() {
    let store = TestStore::redis();
    let (body, chunks, other) = first_chunk_of_a_report(&store).await;
    chunks.send(Bytes::from_static(b"last")).await.unwrap();
    drop(chunks);
    let rest = body.collect().await.unwrap().to_bytes();
    assert_eq!(rest, "last");
    // Released at the end of the body, not at the 30 s TTL.
    let guard = other
        .lock("report:1")
        .wait(Duration::from_secs(5))
        .await
        .unwrap();
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_mid_body_releases() {
    let store = TestStore::redis();
    let (body, chunks, other) = first_chunk_of_a_report(&store).await;
    // The client goes away mid-body (body, client and connection dropped).
    drop(body);
    // Well within the 30 s TTL: only the dropped body can have freed it.
    let guard = other
        .lock("report:1")
        .wait(Duration::from_secs(2))
        .await
        .unwrap();
    guard.release().await.unwrap();
    drop(chunks);
}

/// A body that never ends: a chunk every 20 ms.
async fn endless() -> Body {
    let ticks = futures_util::stream::unfold((), |()| async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Some((Ok::<_, Infallible>(Bytes::from_static(b"tick\n")), ()))
    });
    Body::from_stream(ticks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_ending_body_holds_its_lock_only_until_max_hold() {
    let store = TestStore::redis();
    for on_lost in [OnLost::Abort, OnLost::Continue] {
        let (locker, _) = store
            .locker_with(|b| {
                b.ttl(Duration::from_millis(400))
                    .max_hold(Duration::from_millis(800))
            })
            .await;
        let other = store.locker().await;
        let app = Router::new().route("/reports/{id}", get(endless)).layer(
            LockLayer::new(locker, KeyFrom::path("/reports/{id}", "report:<id>")).on_lost(on_lost),
        );
        let addr = serve(app).await;
        let request = Request::get(format!("http://{addr}/reports/1"))
            .body(Empty::new())
            .unwrap();
        let mut body = client().request(request).await.unwrap().into_body();
        assert!(body.frame().await.unwrap().is_ok());
        assert!(other.try_lock("report:1").await.unwrap().is_none());
        // Freed in the store at max_hold plus at most one ttl, while the
        // body still streams: another process takes the lock.
        let next = other
            .lock("report:1")
            .wait(Duration::from_secs(10))
            .await
            .unwrap();
        let after_loss = async {
            let mut frames = 0;
            loop {
                match body.frame().await {
                    Some(Ok(_)) if on_lost == OnLost::Continue && frames == 10 => {
                        return "went on";
                    }
                    Some(Ok(_)) => frames += 1,
                    Some(Err(_)) => return "cut",
                    None => return "ended as if complete",
                }
            }
        };
        let seen = tokio::time::timeout(Duration::from_secs(10), after_loss)
            .await
            .expect("the body neither cut nor went on");
        match on_lost {
            OnLost::Abort => assert_eq!(seen, "cut"),
            _ => assert_eq!(seen, "went on"),
        }
        next.release().await.unwrap();
    }
}

async fn unlocked(token: Option<FencingToken>) -> String {
    format!("{token:?}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_key_pass_through() {
    let locker = Locker::memory();
    let app = Router::new()
        .route("/health", get(unlocked))
        .route("/orders/{id}/pay", post(unlocked))
        .layer(order_layer(locker.clone()));
    let addr = serve(app).await;
    let _held = locker.lock("order:9").await.unwrap();
    let (status, _, body) = call(&client(), "GET", format!("http://{addr}/health")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "None"));
    assert_eq!(locker.local_queues(), 1, "only the test's own lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_key_is_400_without_asking_the_store() {
    for store in [TestStore::memory(), TestStore::redis()] {
        let (locker, counting) = store.locker_with(|builder| builder).await;
        let app = Router::new()
            .route("/orders/{id}/pay", post(unlocked))
            .layer(order_layer(locker));
        let addr = serve(app).await;
        let long = "9".repeat(300);
        let (status, _, body) = call(
            &client(),
            "POST",
            format!("http://{addr}/orders/{long}/pay"),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("limit"), "{body}");
        assert_eq!(counting.acquires(), 0, "a bad key never reaches the store");
    }
}

#[distributed_lock(key = "order:<id>", locker = locker)]
async fn nested_write(locker: &Locker, id: u64) -> Result<FencingToken, LockError> {
    Ok(FencingToken::current().unwrap())
}

async fn scoped(
    State(locker): State<Locker>,
    Path(id): Path<u64>,
    Extension(token): Extension<FencingToken>,
    Extension(lease): Extension<Lease>,
) -> String {
    let current = FencingToken::current();
    // A locked function on the same key inside the handler is reentrant.
    let nested = tokio::time::timeout(Duration::from_secs(5), nested_write(&locker, id))
        .await
        .expect("deadlock")
        .unwrap();
    format!(
        "{} {} {} {}",
        token,
        current.unwrap(),
        nested,
        lease.is_held()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_run_in_the_lock_scope() {
    let locker = Locker::memory();
    let app = Router::new()
        .route("/orders/{id}/pay", post(scoped))
        .layer(order_layer(locker.clone()))
        .with_state(locker);
    let addr = serve(app).await;
    let (status, _, body) = call(&client(), "POST", format!("http://{addr}/orders/3/pay")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let parts: Vec<&str> = body.split(' ').collect();
    assert_eq!(parts[0], parts[1]);
    assert_eq!(parts[0], parts[2]);
    assert_eq!(parts[3], "true");
}

async fn stalls(State(entered): State<Arc<Notify>>) -> &'static str {
    entered.notify_one();
    std::future::pending::<()>().await;
    "never"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lost_mid_request_stops_the_handler_with_503() {
    let store = TestStore::redis();
    let locker = store.locker().await;
    let entered = Arc::new(Notify::new());
    let app = Router::new()
        .route("/orders/{id}/pay", post(stalls))
        .layer(
            order_layer(locker.clone())
                .ttl(Duration::from_millis(600))
                .on_lost(OnLost::Abort),
        )
        .with_state(entered.clone());
    let addr = serve(app).await;
    let http = client();
    let request = call(&http, "POST", format!("http://{addr}/orders/4/pay"));
    let steal = async {
        entered.notified().await;
        store.steal(&locker, "order:4").await;
    };
    let ((status, _, body), ()) = tokio::time::timeout(
        Duration::from_secs(10),
        futures_util::future::join(request, steal),
    )
    .await
    .expect("the handler was not stopped");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("was lost"), "{body}");
}

async fn downstream(FencingHeader(token): FencingHeader) -> String {
    token.map_or("none".into(), |t| t.to_string())
}

async fn upstream(State(downstream): State<String>, token: FencingToken) -> String {
    // An outgoing call made inside the locked handler carries the token.
    let mut client = ServiceBuilder::new()
        .layer(PropagateFencingTokenLayer)
        .service(client());
    let request = Request::get(downstream).body(Empty::new()).unwrap();
    let response = client.ready().await.unwrap().call(request).await.unwrap();
    let seen = response.into_body().collect().await.unwrap().to_bytes();
    format!("{token} {}", String::from_utf8_lossy(&seen))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_propagates_between_services() {
    let b = serve(Router::new().route("/write", get(downstream))).await;
    let a = serve(
        Router::new()
            .route("/orders/{id}/pay", post(upstream))
            .layer(order_layer(Locker::memory()))
            .with_state(format!("http://{b}/write")),
    )
    .await;
    let (status, _, body) = call(&client(), "POST", format!("http://{a}/orders/1/pay")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (sent, seen) = body.split_once(' ').unwrap();
    assert_eq!(sent, seen, "downstream saw another token");
    // Outside a lock nothing is added; a malformed header is a 400.
    let (_, _, body) = call(&client(), "GET", format!("http://{b}/write")).await;
    assert_eq!(body, "none");
    let request = Request::get(format!("http://{b}/write"))
        .header("fencing-token", "12abc")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = client().request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_down_is_503() {
    let mut server = RedisServer::start();
    let locker = Locker::builder()
        .timeout(Duration::from_millis(300))
        .redis(&server.url())
        .await
        .unwrap();
    server.kill();
    let app = Router::new()
        .route("/orders/{id}/pay", post(|| async { "paid" }))
        .layer(order_layer(locker));
    let addr = serve(app).await;
    let (status, headers, body) =
        call(&client(), "POST", format!("http://{addr}/orders/1/pay")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(headers.contains_key("retry-after"));
    assert!(body.contains("`order:1`"), "{body}");
}

async fn call_with_token(
    client: &HttpClient,
    url: String,
    token: Option<&str>,
) -> (StatusCode, String) {
    let mut request = Request::put(&url);
    if let Some(token) = token {
        request = request.header("fencing-token", token);
    }
    let answered = async {
        let response = client
            .request(request.body(Empty::new()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    };
    let answered = tokio::time::timeout(ANSWER_BOUND, answered).await;
    answered.unwrap_or_else(|_| panic!("PUT {url}: no answer within {ANSWER_BOUND:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downstream_service_rejects_stale_tokens_with_409() {
    let check = lock_tower::FenceCheckLayer::new(KeyFrom::path("/accounts/{id}", "account:<id>"));
    let newest = check.newest_tokens().clone();
    let app = Router::new()
        .route(
            "/accounts/{id}",
            axum::routing::put(|token: FencingToken| async move { token.to_string() }),
        )
        .route("/health", get(|| async { "ok" }))
        .layer(check);
    let addr = serve(app).await;
    let client = client();
    let url = format!("http://{addr}/accounts/7");
    assert_eq!(
        call_with_token(&client, url.clone(), Some("5")).await.0,
        StatusCode::OK
    );
    assert_eq!(
        call_with_token(&client, url.clone(), Some("7")).await.0,
        StatusCode::OK
    );
    let (status, body) = call_with_token(&client, url.clone(), Some("6")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        body.contains("older than 7") && body.contains("account:7"),
        "{body}"
    );
    // Equal tokens pass (one holder, several writes); other resources are apart.
    assert_eq!(
        call_with_token(&client, url.clone(), Some("7")).await.0,
        StatusCode::OK
    );
    let other = format!("http://{addr}/accounts/8");
    assert_eq!(
        call_with_token(&client, other, Some("1")).await.0,
        StatusCode::OK
    );
    assert_eq!(
        call_with_token(&client, url.clone(), None).await.0,
        StatusCode::PRECONDITION_REQUIRED
    );
    assert_eq!(
        call_with_token(&client, url.clone(), Some("x7")).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(newest.newest("account:7"), Some(FencingToken::new(7)));
    let (status, _, _) = call(&client, "GET", format!("http://{addr}/health")).await;
    assert_eq!(status, StatusCode::OK);
}

/// An inner service that counts its clones and answers with the token.
#[derive(Default)]
struct CountsClones {
    clones: Arc<AtomicU64>,
}

impl Clone for CountsClones {
    fn clone(&self) -> Self {
        self.clones.fetch_add(1, Ordering::Relaxed);
        CountsClones {
            clones: Arc::clone(&self.clones),
        }
    }
}

impl Service<Request<Body>> for CountsClones {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let token = request.extensions().get::<FencingToken>().copied();
        let body = token.map_or_else(String::new, |t| t.to_string());
        std::future::ready(Ok(http::Response::new(Body::from(body))))
    }
}

#[tokio::test]
async fn a_lock_to_be_had_at_once_calls_the_inner_service_without_cloning_it() {
    let locker = Locker::memory();
    let inner = CountsClones::default();
    let clones = Arc::clone(&inner.clones);
    let mut service = ServiceBuilder::new()
        .layer(order_layer(locker.clone()))
        .service(inner);
    let request = || Request::post("/orders/7/pay").body(Body::empty()).unwrap();
    // Free key on the in-process store: taken in `call`, the ready inner
    // service called there and then.
    let response = service
        .ready()
        .await
        .unwrap()
        .call(request())
        .await
        .unwrap();
    let token = response.into_body().collect().await.unwrap().to_bytes();
    assert!(!token.is_empty(), "the handler saw the token");
    assert_eq!(clones.load(Ordering::Relaxed), 0);
    // A held key: the request waits, so the inner service goes with it and
    // a clone stays behind (tower's rule for deferred calls).
    let held = locker.lock("order:7").await.unwrap();
    let waiting = service.ready().await.unwrap().call(request());
    assert_eq!(clones.load(Ordering::Relaxed), 1);
    held.release().await.unwrap();
    let response = waiting.await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    assert_eq!(
        locker.local_queues(),
        0,
        "the lock ends with the response body"
    );
}

/// Reads and writes of documents, counting who is inside.
#[derive(Default)]
struct Readers {
    inside: AtomicU64,
    most: AtomicU64,
    writes_beside_reads: AtomicU64,
}

async fn read_doc(State(readers): State<Arc<Readers>>) -> String {
    let now = readers.inside.fetch_add(1, Ordering::SeqCst) + 1;
    readers.most.fetch_max(now, Ordering::SeqCst);
    // Long enough for the other readers to come in beside this one.
    let shared = async {
        while readers.most.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), shared).await;
    readers.inside.fetch_sub(1, Ordering::SeqCst);
    "read".to_owned()
}

async fn write_doc(State(readers): State<Arc<Readers>>) -> String {
    if readers.inside.load(Ordering::SeqCst) > 0 {
        readers.writes_beside_reads.fetch_add(1, Ordering::SeqCst);
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    "written".to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_layer_lets_reads_share_and_writes_run_alone() {
    let server = RedisServer::start();
    let readers = Arc::new(Readers::default());
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let locker = Locker::redis(&server.url()).await.unwrap();
        let keys = KeyFrom::path("/docs/{id}", "doc:<id>");
        let layer = LockLayer::read_write(locker, keys)
            // POST reads too here; PUT writes.
            .reads_when(|method, uri| {
                lock_tower::lock::safe_methods_read(method, uri) || method == http::Method::POST
            })
            .wait(Duration::from_secs(20));
        let app = Router::new()
            .route("/docs/{id}", get(read_doc).put(write_doc).post(read_doc))
            .layer(layer)
            .with_state(readers.clone());
        replicas.push(serve(app).await);
    }
    let client = client();
    // Three readers over both replicas, one of them through the override:
    // all inside at once. Without the override the POST is a write: it
    // waits for both GETs, which then never see a third reader beside them.
    let reads = ["GET", "GET", "POST"]
        .into_iter()
        .enumerate()
        .map(|(i, method)| {
            let (client, addr) = (client.clone(), replicas[i % 2]);
            async move { call(&client, method, format!("http://{addr}/docs/7")).await }
        });
    let results = futures_util::future::join_all(reads).await;
    assert!(
        results
            .iter()
            .all(|(status, _, _)| *status == StatusCode::OK)
    );
    assert_eq!(
        readers.most.load(Ordering::SeqCst),
        3,
        "reads did not share"
    );
    // Writes and reads mixed: no write ever beside a read.
    let mixed = (0..12).map(|i| {
        let (client, addr) = (client.clone(), replicas[i % 2]);
        let method = if i % 3 == 0 { "PUT" } else { "GET" };
        async move { call(&client, method, format!("http://{addr}/docs/8")).await }
    });
    for (status, _, body) in futures_util::future::join_all(mixed).await {
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    assert_eq!(readers.writes_beside_reads.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_layer_serves_requests_in_arrival_order() {
    let locker = Locker::memory();
    let order = Arc::new(Mutex::new(Vec::new()));
    let served = order.clone();
    let app = Router::new()
        .route(
            "/queue/{n}",
            post(move |Path(n): Path<u32>| async move {
                served.lock().unwrap().push(n);
            }),
        )
        .layer(LockLayer::new(locker.clone(), KeyFrom::path("/queue/{n}", "queue")).fair());
    let addr = serve(app).await;
    let held = locker.fair_lock("queue").await.unwrap();
    let client = client();
    let mut requests = Vec::new();
    for n in 0..4u32 {
        let client = client.clone();
        requests.push(tokio::spawn(async move {
            call(&client, "POST", format!("http://{addr}/queue/{n}")).await
        }));
        // In line before the next one is sent.
        while locker.local_waiters("queue") <= n as usize {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    held.release().await.unwrap();
    for request in requests {
        assert_eq!(request.await.unwrap().0, StatusCode::OK);
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
}
