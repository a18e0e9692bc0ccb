//! The HTTP surface: `POST` admission endpoints, `GET /healthz` and `GET /readyz`, and the
//! limits that keep one bad client from hurting the API server's other calls.
//!
//! Every admission endpoint is a path and a [`Handler`]; adding one (e.g. the Pod injector at
//! `/inject`) is one more [`Endpoint`] in the list given to [`router`]. Every answer is counted
//! in the metrics per endpoint and decision, with its latency.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use envoy_operator_core::names::{MUTATE_PATH, VALIDATE_PATH};

use super::handler;
use super::review::{AdmissionRequest, AdmissionResponse};
use crate::ops::metrics::Metrics;

/// What an endpoint decides for one request: a pure function, or a closure holding what it
/// needs (the injector's configuration and Envoy cache).
pub type Handler = Arc<dyn Fn(&AdmissionRequest) -> AdmissionResponse + Send + Sync>;

/// One admission endpoint: `POST <path>` answers reviews with `admit`.
#[derive(Clone)]
pub struct Endpoint {
    pub path: &'static str,
    pub admit: Handler,
}

impl Endpoint {
    pub fn new(
        path: &'static str,
        admit: impl Fn(&AdmissionRequest) -> AdmissionResponse + Send + Sync + 'static,
    ) -> Self {
        Self { path, admit: Arc::new(admit) }
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("path", &self.path).finish_non_exhaustive()
    }
}

/// The Foo and Envoy endpoints: `/mutate` (defaults) and `/validate` (rules).
pub fn standard_endpoints() -> Vec<Endpoint> {
    vec![Endpoint::new(MUTATE_PATH, handler::mutate), Endpoint::new(VALIDATE_PATH, handler::validate)]
}

/// Limits on admission requests.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request body; bigger ones get 413. An AdmissionReview carries the object and
    /// the old object, each up to the API server's ~1.5 MiB.
    pub max_body_bytes: usize,
    /// Admission requests handled at once; more wait for a slot (within the timeout).
    pub max_concurrent: usize,
    /// Time to answer one request, waiting included; the API server gives up after
    /// the configuration's `timeoutSeconds` anyway.
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 6 * 1024 * 1024,
            max_concurrent: 256,
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// Whether the server should get traffic: true once its certificate is loaded and it is
/// listening, false again when it starts shutting down.
pub use crate::ops::health::Readiness;

/// The webhook's router: the given admission endpoints plus health and readiness.
pub fn router(endpoints: &[Endpoint], readiness: Readiness, limits: Limits, metrics: Metrics) -> Router {
    let mut admission = Router::new();
    for endpoint in endpoints {
        let admit = endpoint.admit.clone();
        let path = endpoint.path;
        let metrics = metrics.clone();
        admission = admission.route(
            path,
            post(move |headers: HeaderMap, body: Bytes| async move {
                let started = std::time::Instant::now();
                let (response, decision) = review(path, admit.as_ref(), &headers, &body);
                metrics.admitted(path.trim_start_matches('/'), decision, started.elapsed());
                response
            }),
        );
    }
    let admission = admission
        .layer(DefaultBodyLimit::disable())
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes))
        .layer(GlobalConcurrencyLimitLayer::new(limits.max_concurrent))
        .layer(TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, limits.request_timeout))
        .layer(axum::middleware::map_response(move |response| explain_status(response, limits)));

    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(move || ready(readiness.clone())))
        .merge(admission)
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(CatchPanicLayer::custom(panicked))
}

/// Answers one AdmissionReview body with `admit`; malformed HTTP gets a 4xx with a message.
/// Returns the decision's metric label with the response.
fn review(
    path: &'static str,
    admit: &(dyn Fn(&AdmissionRequest) -> AdmissionResponse + Send + Sync),
    headers: &HeaderMap,
    body: &[u8],
) -> (Response, &'static str) {
    if !is_json(headers) {
        let response = plain(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "expected Content-Type: application/json (an admission.k8s.io/v1 AdmissionReview)".to_owned(),
        );
        return (response, "malformed");
    }
    match handler::review(admit, body) {
        Ok(reviewed) => {
            let (request, response) = (&reviewed.request, &reviewed.response);
            let outcome = response.outcome();
            let message = response.status.as_ref().map(|status| status.message.as_str()).unwrap_or("");
            macro_rules! log {
                ($level:ident) => {
                    tracing::$level!(
                        endpoint = path,
                        uid = %request.uid,
                        kind = %request.kind.kind,
                        namespace = request.namespace.as_deref().unwrap_or(""),
                        name = %request.display_name(),
                        operation = request.operation.as_str(),
                        dry_run = request.is_dry_run(),
                        user = %request.user_info.username,
                        outcome = outcome.metric_label(),
                        status_message = message,
                        "admission review"
                    )
                };
            }
            if response.allowed {
                log!(debug);
            } else {
                log!(info);
            }
            let mut http = Response::new(Body::from(reviewed.body));
            http.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            (http, outcome.metric_label())
        }
        Err(error) => {
            tracing::info!(endpoint = path, %error, kind = error.metric_label(), "malformed admission request");
            (plain(StatusCode::BAD_REQUEST, error.to_string()), "malformed")
        }
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

async fn ready(readiness: Readiness) -> Response {
    if readiness.is_ready() {
        plain(StatusCode::OK, "ok".to_owned())
    } else {
        plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: certificate not loaded or shutting down".to_owned(),
        )
    }
}

async fn not_found(uri: axum::http::Uri) -> Response {
    plain(
        StatusCode::NOT_FOUND,
        format!("no such endpoint: {}; admission reviews are POSTed to the configured paths", uri.path()),
    )
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    plain(StatusCode::METHOD_NOT_ALLOWED, format!("{method} is not allowed on {}", uri.path()))
}

/// Gives the bare statuses that layers produce (413 from the body limit, 503 from the
/// timeout) a message saying what happened.
async fn explain_status(response: Response, limits: Limits) -> Response {
    match response.status() {
        StatusCode::PAYLOAD_TOO_LARGE => plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is over the {}-byte limit for one AdmissionReview",
                limits.max_body_bytes
            ),
        ),
        StatusCode::SERVICE_UNAVAILABLE => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("no answer within {:?}: the webhook is overloaded", limits.request_timeout),
        ),
        _ => response,
    }
}

/// A panic in a handler becomes a 500 for that request; the server keeps serving.
fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    tracing::error!(panic = detail, "an admission handler panicked");
    plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error: the request could not be handled".to_owned())
}

fn plain(status: StatusCode, mut message: String) -> Response {
    if !message.ends_with('\n') {
        message.push('\n');
    }
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], message).into_response()
}
