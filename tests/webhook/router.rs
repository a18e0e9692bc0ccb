//! The router in-process (`oneshot`): paths, methods, content types, limits, panics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use envoy_operator::webhook::metrics::WebhookMetrics;
use envoy_operator::webhook::review::{AdmissionRequest, AdmissionResponse};
use envoy_operator::webhook::router::{Endpoint, Limits, Readiness, router, standard_endpoints};
use tower::ServiceExt;

use crate::common::{fixture, patch_of, response_of};

fn app() -> Router {
    let readiness = Readiness::default();
    readiness.set(true);
    router(&standard_endpoints(), readiness, Limits::default(), WebhookMetrics::default())
}

async fn send(app: Router, request: Request<Body>) -> (StatusCode, Option<String>, Vec<u8>) {
    let response = app.oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_owned());
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, content_type, body.to_vec())
}

fn post(uri: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post(uri).header(header::CONTENT_TYPE, "application/json").body(body.into()).unwrap()
}

fn text(body: &[u8]) -> &str {
    std::str::from_utf8(body).unwrap()
}

#[tokio::test]
async fn mutate_answers_with_the_defaults_patch_and_accepts_the_timeout_query() {
    let request = post("/mutate?timeout=10s", fixture("foo-create-sparse-mutate.json"));
    let (status, content_type, body) = send(app(), request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type.as_deref(), Some("application/json"));
    let response = response_of(&body);
    assert_eq!(response["uid"], "c3a9e7b1-5d2f-4e8a-9b6c-1f0e2d3c0a03");
    assert!(patch_of(&response).is_some());
}

#[tokio::test]
async fn validate_denies_in_the_review_with_http_200() {
    let request = post("/validate?timeout=10s", fixture("envoy-create-xds-port-70000-validate.json"));
    let (status, _, body) = send(app(), request).await;
    assert_eq!(status, StatusCode::OK);
    let response = response_of(&body);
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 422);
}

#[tokio::test]
async fn a_charset_parameter_is_still_json() {
    let request = Request::post("/validate")
        .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
        .body(Body::from(fixture("foo-create-validate.json")))
        .unwrap();
    let (status, _, body) = send(app(), request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response_of(&body)["allowed"], true);
}

#[tokio::test]
async fn malformed_http_gets_a_4xx_with_a_message() {
    let cases: Vec<(Request<Body>, StatusCode, &str)> = vec![
        (post("/validate", "{not json"), StatusCode::BAD_REQUEST, "not a JSON AdmissionReview"),
        (
            post("/validate", r#"{"apiVersion":"v1","kind":"Pod"}"#),
            StatusCode::BAD_REQUEST,
            "expected apiVersion admission.k8s.io/v1",
        ),
        (
            post("/mutate", r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#),
            StatusCode::BAD_REQUEST,
            "has no request",
        ),
        (
            Request::post("/validate")
                .header(header::CONTENT_TYPE, "text/yaml")
                .body(Body::from(fixture("foo-create-validate.json")))
                .unwrap(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "expected Content-Type: application/json",
        ),
        (
            Request::post("/validate").body(Body::from("{}")).unwrap(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "application/json",
        ),
        (
            Request::get("/validate").body(Body::empty()).unwrap(),
            StatusCode::METHOD_NOT_ALLOWED,
            "GET is not allowed on /validate",
        ),
        (
            Request::put("/mutate").body(Body::empty()).unwrap(),
            StatusCode::METHOD_NOT_ALLOWED,
            "PUT is not allowed on /mutate",
        ),
        (post("/admit", "{}"), StatusCode::NOT_FOUND, "no such endpoint: /admit"),
        (Request::get("/").body(Body::empty()).unwrap(), StatusCode::NOT_FOUND, "no such endpoint: /"),
        (
            Request::post("/healthz").body(Body::empty()).unwrap(),
            StatusCode::METHOD_NOT_ALLOWED,
            "POST is not allowed",
        ),
    ];
    for (request, expected, message) in cases {
        let what = format!("{} {}", request.method(), request.uri());
        let (status, content_type, body) = send(app(), request).await;
        assert_eq!(status, expected, "{what}: {}", text(&body));
        assert_eq!(content_type.as_deref(), Some("text/plain; charset=utf-8"), "{what}");
        assert!(text(&body).contains(message), "{what}: {}", text(&body));
    }
}

#[tokio::test]
async fn a_body_over_the_limit_gets_413_with_a_message() {
    let limits = Limits { max_body_bytes: 1024, ..Limits::default() };
    let app = router(&standard_endpoints(), Readiness::default(), limits, WebhookMetrics::default());
    // Announced by Content-Length, and streamed without one (chunked).
    let sized = post("/validate", fixture("foo-create-validate.json"));
    let chunks = futures::stream::iter(
        fixture("foo-create-validate.json")
            .chunks(100)
            .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
            .collect::<Vec<_>>(),
    );
    let streamed = post("/validate", Body::from_stream(chunks));
    for request in [sized, streamed] {
        let (status, _, body) = send(app.clone(), request).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(text(&body).contains("over the 1024-byte limit"), "{}", text(&body));
    }
}

#[tokio::test]
async fn health_and_readiness() {
    let readiness = Readiness::default();
    let app = router(&standard_endpoints(), readiness.clone(), Limits::default(), WebhookMetrics::default());
    let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
    assert_eq!(send(app.clone(), get("/healthz")).await.0, StatusCode::OK);
    let (status, _, body) = send(app.clone(), get("/readyz")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(text(&body).starts_with("not ready"));
    readiness.set(true);
    assert_eq!(send(app.clone(), get("/readyz")).await.0, StatusCode::OK);
}

fn panics(_: &AdmissionRequest) -> AdmissionResponse {
    panic!("a bug in a handler")
}

fn allows(request: &AdmissionRequest) -> AdmissionResponse {
    AdmissionResponse::allow(&request.uid)
}

#[tokio::test]
async fn a_panicking_handler_gets_500_and_the_router_keeps_serving() {
    let mut endpoints = standard_endpoints();
    endpoints.push(Endpoint::new("/panic", panics));
    let app = router(&endpoints, Readiness::default(), Limits::default(), WebhookMetrics::default());
    let (status, _, body) = send(app.clone(), post("/panic", fixture("foo-create-validate.json"))).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(text(&body).starts_with("internal error"));
    let (status, _, body) = send(app, post("/validate", fixture("foo-create-validate.json"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response_of(&body)["allowed"], true);
}

#[tokio::test]
async fn one_more_endpoint_is_one_more_entry() {
    let mut endpoints = standard_endpoints();
    endpoints.push(Endpoint::new("/inject", allows));
    let app = router(&endpoints, Readiness::default(), Limits::default(), WebhookMetrics::default());
    let (status, _, body) = send(app, post("/inject", fixture("pod-create-direct-mutate.json"))).await;
    assert_eq!(status, StatusCode::OK);
    let response = response_of(&body);
    assert_eq!(response["allowed"], true);
    assert_eq!(
        response["uid"],
        crate::common::fixture_json("pod-create-direct-mutate.json")["request"]["uid"]
    );
}

#[tokio::test]
async fn a_body_that_never_arrives_gets_408_with_a_message() {
    // The body is read under the request's deadline, before any slot is taken.
    let limits = Limits { request_timeout: Duration::from_millis(50), ..Limits::default() };
    let app = router(&standard_endpoints(), Readiness::default(), limits, WebhookMetrics::default());
    let endless = futures::stream::pending::<Result<Vec<u8>, std::io::Error>>();
    let (status, _, body) = send(app, post("/validate", Body::from_stream(endless))).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert!(text(&body).contains("did not arrive within 50ms"), "{}", text(&body));
}

/// Blocks its thread until `release` is set (or, so a regression fails instead of hanging,
/// 20 s pass), then allows.
fn stalls_until(
    release: &'static AtomicBool,
) -> impl Fn(&AdmissionRequest) -> AdmissionResponse + Send + Sync {
    move |request| {
        let give_up = std::time::Instant::now() + Duration::from_secs(20);
        while !release.load(Ordering::SeqCst) && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(5));
        }
        AdmissionResponse::allow(&request.uid)
    }
}

#[tokio::test]
async fn a_review_over_the_time_limit_gets_503_with_a_message() {
    static RELEASE: AtomicBool = AtomicBool::new(false);
    let mut endpoints = standard_endpoints();
    endpoints.push(Endpoint::new("/stall", stalls_until(&RELEASE)));
    // Every review goes to the blocking pool, and none may take more than 50 ms.
    let limits =
        Limits { request_timeout: Duration::from_millis(50), inline_review_bytes: 0, ..Limits::default() };
    let app = router(&endpoints, Readiness::default(), limits, WebhookMetrics::default());
    let (status, _, body) = send(app, post("/stall", fixture("foo-create-validate.json"))).await;
    RELEASE.store(true, Ordering::SeqCst);
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(text(&body).contains("no answer within 50ms"), "{}", text(&body));
}

#[tokio::test(flavor = "current_thread")]
async fn a_long_review_does_not_hold_up_health_or_other_reviews() {
    // One async worker thread: a review computed on it would stop everything else.
    static RELEASE: AtomicBool = AtomicBool::new(false);
    let mut endpoints = standard_endpoints();
    endpoints.push(Endpoint::new("/stall", stalls_until(&RELEASE)));
    let limits =
        Limits { inline_review_bytes: 1024, request_timeout: Duration::from_secs(60), ..Limits::default() };
    let app = router(&endpoints, Readiness::default(), limits, WebhookMetrics::default());
    let big = {
        let mut review = crate::common::fixture_json("foo-create-validate.json");
        review["request"]["object"]["metadata"]["annotations"] = serde_json::json!({"pad": "x".repeat(4096)});
        serde_json::to_vec(&review).unwrap()
    };
    let stalled = tokio::spawn(send(app.clone(), post("/stall", big)));
    tokio::task::yield_now().await;
    let get = Request::get("/healthz").body(Body::empty()).unwrap();
    assert_eq!(send(app.clone(), get).await.0, StatusCode::OK);
    let (status, _, body) = send(app.clone(), post("/validate", fixture("foo-create-validate.json"))).await;
    assert_eq!((status, response_of(&body)["allowed"].clone()), (StatusCode::OK, serde_json::json!(true)));
    assert!(!stalled.is_finished(), "answered while the long review still ran");
    RELEASE.store(true, Ordering::SeqCst);
    assert_eq!(stalled.await.unwrap().0, StatusCode::OK);
}

#[tokio::test]
async fn fifteen_thousand_bad_ports_get_a_short_answer() {
    // Listener ports of port 0 (under the cap on JSON values), and a 1 MB image: one error
    // each, each echoed, before the caps.
    let mut review = crate::common::fixture_json("envoy-create-validate.json");
    let ports: Vec<serde_json::Value> =
        (0..15_000).map(|n| serde_json::json!({"name": format!("p{n}"), "port": 0})).collect();
    review["request"]["object"]["spec"]["ports"] = serde_json::Value::Array(ports);
    review["request"]["object"]["spec"]["image"] = serde_json::json!("x".repeat(1_000_000));
    let body = serde_json::to_vec(&review).unwrap();
    let (status, _, answer) = send(app(), post("/validate", body.clone())).await;
    assert_eq!(status, StatusCode::OK);
    assert!(answer.len() < 16 * 1024, "{} bytes answer a {}-byte review", answer.len(), body.len());
    let response = response_of(&answer);
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.contains("spec.ports: Forbidden: must have at most 16 items"), "{message}");
    assert!(message.contains("more bytes)"), "the image is echoed cut: {message}");
    let causes = response["status"]["details"]["causes"].as_array().unwrap();
    assert!(causes.len() <= envoy_operator_core::rules::MAX_LISTED_ERRORS, "{} causes", causes.len());
}

#[tokio::test]
async fn a_review_of_too_many_json_values_is_refused_before_parsing() {
    let limits = Limits { max_json_values: 1000, ..Limits::default() };
    let app = router(&standard_endpoints(), Readiness::default(), limits, WebhookMetrics::default());
    let mut review = crate::common::fixture_json("foo-create-validate.json");
    review["request"]["object"]["metadata"]["annotations"] =
        serde_json::json!({"a": serde_json::Value::Array(vec![serde_json::json!([]); 2000])});
    let (status, _, body) = send(app, post("/validate", serde_json::to_vec(&review).unwrap())).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(text(&body).contains("more than 1000 JSON values"), "{}", text(&body));
}
