//! The HTTP surface: `POST` admission endpoints, `GET /healthz` and `GET /readyz`, and the
//! limits that keep one bad client from hurting the API server's other calls.
//!
//! Every admission endpoint is a path and a [`Handler`]; adding one (e.g. the Pod injector at
//! `/inject`) is one more [`Endpoint`] in the list given to [`router`]. Every answer is counted
//! in the metrics per endpoint and decision, with its latency.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use envoy_operator_core::bounded;
use envoy_operator_core::names::{MUTATE_PATH, VALIDATE_PATH};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio::sync::Semaphore;
use tokio::time::timeout_at;
use tower_http::catch_panic::CatchPanicLayer;

use super::handler;
use super::metrics::WebhookMetrics;
use super::review::{AdmissionRequest, AdmissionResponse, ReviewReader, read_whole};

/// What an endpoint decides for one request: a pure function, or a closure holding what it
/// needs (the injector's configuration and Envoy cache).
pub type Handler = Arc<dyn Fn(&AdmissionRequest) -> AdmissionResponse + Send + Sync>;

/// One admission endpoint: `POST <path>` answers reviews with `admit`, its objects read by
/// `read` (whole, unless the endpoint looks at only part of them).
#[derive(Clone)]
pub struct Endpoint {
    pub path: &'static str,
    pub admit: Handler,
    pub read: ReviewReader,
}

impl Endpoint {
    pub fn new(
        path: &'static str,
        admit: impl Fn(&AdmissionRequest) -> AdmissionResponse + Send + Sync + 'static,
    ) -> Self {
        Self { path, admit: Arc::new(admit), read: read_whole }
    }

    /// Reads the objects of its reviews with `read`.
    #[must_use]
    pub fn reading(mut self, read: ReviewReader) -> Self {
        self.read = read;
        self
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

/// Limits on admission requests. The defaults are the memory budget README.md works out:
/// what one request may cost at most, and how many may cost it at once.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request body; bigger ones get 413. The API server's own cap on a request is
    /// 3 MiB, and it never sends a review larger than what it accepted.
    pub max_body_bytes: usize,
    /// Request bodies buffered at once, in bytes, over all connections and streams. A request
    /// reserves its `Content-Length` (or `max_body_bytes` when it sends none) before its body is
    /// read; when the budget is spent it waits, within its deadline, then gets 503.
    pub body_budget_bytes: usize,
    /// Reviews computed at once, on the blocking pool (the bigger ones, see
    /// `inline_review_bytes`). A slot is taken only once the body is read, so slow clients
    /// never hold one.
    pub max_concurrent: usize,
    /// Bodies up to this size are reviewed right on the async worker: their work is bounded
    /// by their size (every step is linear) and small enough that handing it to another
    /// thread would cost more than it saves.
    pub inline_review_bytes: usize,
    /// JSON values (objects, arrays, strings, numbers…) one review may hold, checked by a
    /// linear scan before parsing: parsing costs up to ~100 bytes of memory per value, so this
    /// bounds what a review may cost whatever its shape.
    pub max_json_values: usize,
    /// Time to answer one request from its arrival, reading the body included. Below the
    /// API server's `timeoutSeconds` (5), so a slow answer is an explicit 503 the API server
    /// still receives rather than its own timeout; a shorter `?timeout=` from the API server
    /// shortens it further.
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 3 * 1024 * 1024,
            body_budget_bytes: 24 * 1024 * 1024,
            max_concurrent: 2,
            inline_review_bytes: 64 * 1024,
            max_json_values: 50_000,
            request_timeout: Duration::from_secs(4),
        }
    }
}

/// Whether the server should get traffic: true once its certificate is loaded and it is
/// listening, false again when it starts shutting down.
pub use crate::ops::health::Readiness;

/// What every admission route shares: the limits and the semaphores that enforce them.
struct Admission {
    limits: Limits,
    metrics: WebhookMetrics,
    /// Permits of 1 KiB of request body each.
    body_budget: Arc<Semaphore>,
    /// Reviews on the blocking pool.
    workers: Arc<Semaphore>,
}

/// The webhook's router: the given admission endpoints plus health and readiness.
pub fn router(
    endpoints: &[Endpoint],
    readiness: Readiness,
    limits: Limits,
    metrics: WebhookMetrics,
) -> Router {
    let admission = Arc::new(Admission {
        limits,
        metrics,
        body_budget: Arc::new(Semaphore::new(kib(limits.body_budget_bytes.max(limits.max_body_bytes)))),
        workers: Arc::new(Semaphore::new(limits.max_concurrent.max(1))),
    });
    let mut routes = Router::new();
    for endpoint in endpoints {
        let (admission, endpoint) = (admission.clone(), endpoint.clone());
        routes = routes.route(
            endpoint.path,
            post(move |request: Request| {
                let (admission, endpoint) = (admission.clone(), endpoint.clone());
                async move {
                    let started = Instant::now();
                    let (response, decision) = admission.answer(&endpoint, request).await;
                    admission.metrics.admitted(
                        endpoint.path.trim_start_matches('/'),
                        decision,
                        started.elapsed(),
                    );
                    response
                }
            }),
        );
    }
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(move || ready(readiness.clone())))
        .merge(routes.layer(DefaultBodyLimit::disable()))
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(CatchPanicLayer::custom(panicked))
}

/// Why a request got no review: each is an HTTP status with a message, and a metric label.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("expected Content-Type: application/json (an admission.k8s.io/v1 AdmissionReview)")]
    NotJson,
    #[error("the request body is over the {0}-byte limit for one AdmissionReview")]
    TooLarge(usize),
    #[error("the AdmissionReview holds more than {0} JSON values")]
    TooManyValues(usize),
    #[error("the request body did not arrive within {0:?}")]
    BodyTimeout(Duration),
    #[error("reading the request body: {0}")]
    BodyError(String),
    #[error("the webhook is overloaded: no capacity for this request within {0:?}")]
    Overloaded(Duration),
    #[error("no answer within {0:?}: the webhook is overloaded")]
    Deadline(Duration),
    #[error("internal error: the request could not be handled")]
    Panicked,
}

impl Refusal {
    fn status(&self) -> StatusCode {
        match self {
            Self::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::TooLarge(_) | Self::TooManyValues(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::BodyError(_) => StatusCode::BAD_REQUEST,
            Self::Overloaded(_) | Self::Deadline(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Panicked => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn metric_label(&self) -> &'static str {
        match self {
            Self::NotJson | Self::BodyError(_) => "malformed",
            Self::TooLarge(_) | Self::TooManyValues(_) => "too_large",
            Self::BodyTimeout(_) => "body_timeout",
            Self::Overloaded(_) => "overloaded",
            Self::Deadline(_) => "deadline",
            Self::Panicked => "panicked",
        }
    }
}

impl Admission {
    /// One admission request, in the order that keeps a bad client from costing more than its
    /// share: check what the headers announce, reserve the body's bytes, read the body under
    /// the deadline, and only then take a slot to compute the review.
    async fn answer(&self, endpoint: &Endpoint, request: Request) -> (Response, &'static str) {
        match self.try_answer(endpoint, request).await {
            Ok(answer) => answer,
            Err(refusal) => {
                tracing::info!(endpoint = endpoint.path, reason = refusal.metric_label(), %refusal, "admission request refused");
                (plain(refusal.status(), refusal.to_string()), refusal.metric_label())
            }
        }
    }

    async fn try_answer(
        &self,
        endpoint: &Endpoint,
        request: Request,
    ) -> Result<(Response, &'static str), Refusal> {
        let limits = &self.limits;
        let budget = deadline_of(limits, request.uri().query());
        let deadline = tokio::time::Instant::now() + budget;
        let (parts, body) = request.into_parts();
        if !is_json(&parts.headers) {
            return Err(Refusal::NotJson);
        }
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<usize>().ok());
        if declared.is_some_and(|length| length > limits.max_body_bytes) {
            return Err(Refusal::TooLarge(limits.max_body_bytes));
        }
        let reserved = declared.unwrap_or(limits.max_body_bytes);
        let reservation =
            timeout_at(deadline, self.body_budget.clone().acquire_many_owned(kib(reserved) as u32))
                .await
                .map_err(|_| Refusal::Overloaded(budget))?
                .map_err(|_| Refusal::Overloaded(budget))?;
        let collected = timeout_at(deadline, Limited::new(body, limits.max_body_bytes).collect())
            .await
            .map_err(|_| Refusal::BodyTimeout(budget))?;
        let body = match collected {
            Ok(body) => body.to_bytes(),
            Err(error) if error.is::<LengthLimitError>() => {
                return Err(Refusal::TooLarge(limits.max_body_bytes));
            }
            Err(error) => return Err(Refusal::BodyError(bounded::echo(&error.to_string()).into_owned())),
        };

        let inline = body.len() <= limits.inline_review_bytes;
        let (admit, read) = (endpoint.admit.clone(), endpoint.read);
        let (path, max_values) = (endpoint.path, limits.max_json_values);
        let work = move || review(path, admit.as_ref(), read, &body, max_values);
        if inline {
            return work();
        }
        // Bigger reviews leave the async workers: /healthz, small reviews and every other
        // connection keep being served while one runs. The permits go with the work, so
        // they are held until it really ends, even if this request gave up on it.
        let slot = timeout_at(deadline, self.workers.clone().acquire_owned())
            .await
            .map_err(|_| Refusal::Overloaded(budget))?
            .map_err(|_| Refusal::Overloaded(budget))?;
        let task = tokio::task::spawn_blocking(move || {
            let _held = (slot, reservation);
            work()
        });
        match timeout_at(deadline, task).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_panicked)) => Err(Refusal::Panicked),
            Err(_) => Err(Refusal::Deadline(budget)),
        }
    }
}

/// Kibibytes, rounded up, as semaphore permits.
fn kib(bytes: usize) -> usize {
    bytes.div_ceil(1024).max(1)
}

/// The time one request may take: [`Limits::request_timeout`], or less when the API server
/// says (`?timeout=5s`) it gives up sooner, minus a margin for the answer to travel back.
fn deadline_of(limits: &Limits, query: Option<&str>) -> Duration {
    const MARGIN: Duration = Duration::from_millis(500);
    let asked = query
        .into_iter()
        .flat_map(|query| query.split('&'))
        .find_map(|pair| pair.strip_prefix("timeout="))
        .and_then(parse_go_duration);
    match asked {
        Some(asked) => limits.request_timeout.min(asked.saturating_sub(MARGIN).max(MARGIN)),
        None => limits.request_timeout,
    }
}

/// A Go duration as the API server writes `timeout` (`10s`, `1m0s`, `500ms`); `None` for
/// anything else.
fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let number: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "h" => Duration::from_secs(3600),
            "m" => Duration::from_secs(60),
            "s" => Duration::from_secs(1),
            "ms" => Duration::from_millis(1),
            _ => return None,
        };
        total = total.checked_add(unit.checked_mul(u32::try_from(number).ok()?)?)?;
        rest = &rest[unit_len..];
    }
    (!text.is_empty()).then_some(total)
}

/// Answers one AdmissionReview body with `admit` (synchronous, bounded work); malformed
/// requests get a 4xx with a message. Returns the decision's metric label with the response.
fn review(
    path: &'static str,
    admit: &(dyn Fn(&AdmissionRequest) -> AdmissionResponse + Send + Sync),
    read: ReviewReader,
    body: &[u8],
    max_json_values: usize,
) -> Result<(Response, &'static str), Refusal> {
    if json_values_exceed(body, max_json_values) {
        return Err(Refusal::TooManyValues(max_json_values));
    }
    match handler::review_with(admit, read, body) {
        Ok(reviewed) => {
            let (request, response) = (&reviewed.request, &reviewed.response);
            let outcome = response.outcome();
            let message = response.status.as_ref().map(|status| status.message.as_str()).unwrap_or("");
            let message = bounded::truncate(message, 1024);
            let who = request.log_fields();
            macro_rules! log {
                ($level:ident) => {
                    tracing::$level!(
                        endpoint = path,
                        uid = %who.uid,
                        kind = %who.kind,
                        namespace = %who.namespace,
                        name = %who.name,
                        operation = request.operation.as_str(),
                        dry_run = request.is_dry_run(),
                        user = %who.user,
                        outcome = outcome.metric_label(),
                        status_message = %message,
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
            Ok((http, outcome.metric_label()))
        }
        Err(error) => {
            let message = bounded::truncate(&error.to_string(), 1024).into_owned();
            tracing::info!(endpoint = path, error = %message, kind = error.metric_label(), "malformed admission request");
            Ok((plain(StatusCode::BAD_REQUEST, message), "malformed"))
        }
    }
}

/// Whether `json` holds more than `max` values, by a linear scan that counts the tokens
/// starting a value (`[`, `{`, `,`) outside strings: a close upper bound, and no allocation.
/// Every byte adds at most one, so a body shorter than `max` needs no scan: a typical review
/// (a few KiB) is let through at no cost.
pub fn json_values_exceed(json: &[u8], max: usize) -> bool {
    if json.len() < max {
        return false;
    }
    let (mut values, mut in_string, mut escaped) = (1usize, false, false);
    for &byte in json {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else {
            match byte {
                b'"' => in_string = true,
                b'[' | b'{' | b',' => {
                    values += 1;
                    if values > max {
                        return true;
                    }
                }
                _ => {}
            }
        }
    }
    false
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

fn plain(status: StatusCode, message: String) -> Response {
    let mut message = match bounded::truncate(&message, 1024) {
        std::borrow::Cow::Borrowed(_) => message,
        std::borrow::Cow::Owned(cut) => cut,
    };
    if !message.ends_with('\n') {
        message.push('\n');
    }
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], message).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortest bodies of more than `max` values are `max` bytes long: the scan is skipped
    /// only where it could not find too many.
    #[test]
    fn only_bodies_too_short_to_exceed_are_not_scanned() {
        for max in [1, 2, 10, 1000] {
            assert!(!json_values_exceed(&b"[".repeat(max - 1), max));
            assert!(json_values_exceed(&b"[".repeat(max), max));
            assert!(json_values_exceed(&b",".repeat(max), max));
            assert!(!json_values_exceed(&b"\"".repeat(max), max), "quotes open and close strings");
        }
    }

    #[test]
    fn json_values_are_counted_outside_strings_only() {
        assert!(!json_values_exceed(br#"{"a":[1,2,3]}"#, 5));
        assert!(json_values_exceed(br#"{"a":[1,2,3],"b":[]}"#, 5));
        assert!(
            !json_values_exceed(br#"{"a":"[,,,{{{\",,,"}"#, 2),
            "brackets and commas in strings do not count"
        );
        assert!(!json_values_exceed(b"7", 1));
    }

    #[test]
    fn the_deadline_follows_the_api_servers_timeout() {
        let limits = Limits::default();
        assert_eq!(deadline_of(&limits, None), limits.request_timeout);
        assert_eq!(deadline_of(&limits, Some("timeout=10s")), limits.request_timeout);
        assert_eq!(deadline_of(&limits, Some("dryRun=All&timeout=2s")), Duration::from_millis(1500));
        assert_eq!(deadline_of(&limits, Some("timeout=100ms")), Duration::from_millis(500), "a floor");
        assert_eq!(deadline_of(&limits, Some("timeout=soon")), limits.request_timeout);
        assert_eq!(parse_go_duration("1m0s"), Some(Duration::from_secs(60)));
        assert_eq!(parse_go_duration("1h2m3s"), Some(Duration::from_secs(3723)));
        assert_eq!(parse_go_duration(""), None);
        assert_eq!(parse_go_duration("5"), None);
    }
}
