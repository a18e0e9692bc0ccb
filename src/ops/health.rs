//! The plain-HTTP operations port: `GET /metrics` (Prometheus), `GET /healthz` (the process
//! answers) and `GET /readyz` (every readiness check passes), kept off the webhook's TLS port
//! so scraping and probing never compete with admission traffic.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::metrics::Metrics;

type Check = Arc<dyn Fn() -> bool + Send + Sync>;

/// One part's readiness, shared between the task that knows it and the checks that read it
/// (the webhook serving its certificate, a cache filled). Cloning shares the state; it starts
/// not ready.
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Named readiness checks; ready when all pass.
#[derive(Clone, Default)]
pub struct Health {
    checks: Arc<RwLock<Vec<(&'static str, Check)>>>,
}

impl Health {
    /// Adds a check, e.g. `("webhook", …)` true once the certificate is loaded and serving.
    pub fn add(&self, name: &'static str, check: impl Fn() -> bool + Send + Sync + 'static) {
        self.checks.write().unwrap_or_else(std::sync::PoisonError::into_inner).push((name, Arc::new(check)));
    }

    /// Adds a part's readiness as a check.
    pub fn add_readiness(&self, name: &'static str, readiness: &Readiness) {
        let readiness = readiness.clone();
        self.add(name, move || readiness.is_ready());
    }

    /// Every check with its result, in the order added.
    pub fn report(&self) -> Vec<(&'static str, bool)> {
        let checks = self.checks.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        checks.iter().map(|(name, check)| (*name, check())).collect()
    }

    pub fn is_ready(&self) -> bool {
        self.report().iter().all(|(_, ok)| *ok)
    }
}

/// The operations router.
pub fn router(metrics: Metrics, health: Health) -> Router {
    Router::new()
        .route("/metrics", get(move |headers: HeaderMap| exposition(metrics.clone(), headers)))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(move || readyz(health.clone())))
}

/// OpenMetrics for a scraper that asks for it (Prometheus does), the Prometheus text format
/// for everyone else (`curl`, `promtool`, older scrapers).
async fn exposition(metrics: Metrics, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if accept.contains("application/openmetrics-text") {
        let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
        ([(header::CONTENT_TYPE, content_type)], metrics.encode()).into_response()
    } else {
        let content_type = "text/plain; version=0.0.4; charset=utf-8";
        ([(header::CONTENT_TYPE, content_type)], metrics.encode_prometheus_text()).into_response()
    }
}

async fn readyz(health: Health) -> Response {
    let report = health.report();
    let ready = report.iter().all(|(_, ok)| *ok);
    let mut body: String =
        report.iter().map(|(name, ok)| format!("[{}] {name}\n", if *ok { "+" } else { "-" })).collect();
    body.push_str(if ready { "ready\n" } else { "not ready\n" });
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, body).into_response()
}

/// Serves the operations port until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Metrics,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(metrics, health)).with_graceful_shutdown(shutdown).await
}

/// Binds the operations port.
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get(app: Router, path: &str) -> (StatusCode, String) {
        let response = app.oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn readiness_follows_every_check() {
        let health = Health::default();
        let certificates = Readiness::default();
        health.add_readiness("webhook", &certificates);
        health.add("envoy-cache", || true);
        let app = router(Metrics::new(), health);

        let (status, body) = get(app.clone(), "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "[-] webhook\n[+] envoy-cache\nnot ready\n");

        certificates.set(true);
        let (status, body) = get(app.clone(), "/readyz").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.ends_with("ready\n"));
        assert_eq!(get(app, "/healthz").await, (StatusCode::OK, "ok\n".to_owned()));
    }

    #[tokio::test]
    async fn metrics_are_exposed_in_the_format_asked_for() {
        let metrics = Metrics::new();
        metrics.admitted("validate", "denied", std::time::Duration::from_micros(30));
        let app = router(metrics, Health::default());
        let (status, body) = get(app.clone(), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("# TYPE envoy_operator_admission_requests_total counter"), "{body}");
        assert!(!body.contains("# EOF"));
        let request = Request::get("/metrics")
            .header("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
            .body(Body::empty())
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        let body =
            String::from_utf8(axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap().to_vec())
                .unwrap();
        let status = StatusCode::OK;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains(
            "envoy_operator_admission_requests_total{endpoint=\"validate\",decision=\"denied\"} 1"
        ));
        assert!(body.ends_with("# EOF\n"));
    }
}
