//! The plain-HTTP operations port: `GET /metrics` (Prometheus), `GET /healthz` (every
//! liveness check passes, e.g. the async runtime still runs tasks) and `GET /readyz` (every
//! readiness check passes), kept off the webhook's TLS port so scraping and probing never
//! compete with admission traffic.
//!
//! The port is served from a thread and runtime of its own, with the same connection bounds as
//! the webhook ([`crate::net`]): the liveness probe still gets an answer — "not live" — when
//! the operator's runtime is wedged, and the kubelet restarts the pod, where a port served by the
//! wedged runtime would only time out (and a port that answers "ok" from a separate task would
//! never fail at all).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;
use crate::net::{ConnectionLimits, ConnectionMetrics, Http, ServeConfig, Shutdown};
use crate::xds::debug::ProxyDebug;

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

/// Named readiness checks (ready when all pass) and liveness checks (live when all pass).
#[derive(Clone, Default)]
pub struct Health {
    checks: Arc<RwLock<Vec<(&'static str, Check)>>>,
    live: Arc<RwLock<Vec<(&'static str, Check)>>>,
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

    /// Adds a liveness check: when it fails, the process is wedged and should be restarted.
    pub fn add_liveness(&self, name: &'static str, check: impl Fn() -> bool + Send + Sync + 'static) {
        self.live.write().unwrap_or_else(std::sync::PoisonError::into_inner).push((name, Arc::new(check)));
    }

    /// Every liveness check with its result.
    pub fn liveness_report(&self) -> Vec<(&'static str, bool)> {
        let checks = self.live.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        checks.iter().map(|(name, check)| (*name, check())).collect()
    }
}

/// A heartbeat of the async runtime it was started on: a task that beats every
/// [`HEARTBEAT`]. When the runtime is wedged (every worker blocked, or a deadlock), the beats
/// stop, and [`Heartbeat::is_beating`] turns false after `stall` without one.
#[derive(Clone, Debug)]
pub struct Heartbeat {
    epoch: std::time::Instant,
    last: Arc<AtomicU64>,
    stall: Duration,
}

/// How often the heartbeat task beats.
pub const HEARTBEAT: Duration = Duration::from_millis(500);
/// Without a beat for this long, the runtime counts as wedged: far above any scheduling delay
/// of a healthy process, and the liveness probe still needs three failures to restart it.
pub const DEFAULT_STALL: Duration = Duration::from_secs(10);

impl Heartbeat {
    /// Starts beating on the current runtime; the task ends when the runtime does.
    pub fn start(stall: Duration) -> Self {
        let heartbeat = Self { epoch: std::time::Instant::now(), last: Arc::default(), stall };
        let beating = heartbeat.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(HEARTBEAT);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                beating.last.store(beating.millis(), Ordering::Release);
            }
        });
        heartbeat
    }

    fn millis(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn is_beating(&self) -> bool {
        let since = self.millis().saturating_sub(self.last.load(Ordering::Acquire));
        Duration::from_millis(since) < self.stall
    }
}

/// The operations router.
pub fn router(metrics: Metrics, health: Health, debug: &ProxyDebug) -> Router {
    debug
        .router()
        .route("/metrics", get(move |headers: HeaderMap| exposition(metrics.clone(), headers)))
        .route(
            "/healthz",
            get({
                let health = health.clone();
                move || healthz(health.clone())
            }),
        )
        .route("/readyz", get(move || readyz(health.clone())))
}

async fn healthz(health: Health) -> Response {
    let report = health.liveness_report();
    let live = report.iter().all(|(_, ok)| *ok);
    if live {
        return (StatusCode::OK, "ok\n").into_response();
    }
    let mut body: String =
        report.iter().map(|(name, ok)| format!("[{}] {name}\n", if *ok { "+" } else { "-" })).collect();
    body.push_str("not live\n");
    (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
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

/// Serves the operations port until `shutdown` resolves, on a thread and runtime of its own,
/// with a liveness check that the calling runtime still runs tasks. `metrics` is exposed;
/// the port's own connections are counted in `connections`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Metrics,
    connections: ConnectionMetrics,
    health: Health,
    debug: ProxyDebug,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let heartbeat = Heartbeat::start(DEFAULT_STALL);
    health.add_liveness("runtime", move || heartbeat.is_beating());
    let stop = CancellationToken::new();
    let served =
        serve_on_own_thread(listener.into_std()?, metrics, connections, health, debug, stop.clone())?;
    shutdown.await;
    stop.cancel();
    served.await.unwrap_or_else(|_| Err(std::io::Error::other("the operations thread ended without a word")))
}

/// Starts the operations server on a new thread with a current-thread runtime; the receiver
/// gets its result once `stop` is cancelled and it has stopped.
pub fn serve_on_own_thread(
    listener: std::net::TcpListener,
    metrics: Metrics,
    connections: ConnectionMetrics,
    health: Health,
    debug: ProxyDebug,
    stop: CancellationToken,
) -> std::io::Result<tokio::sync::oneshot::Receiver<std::io::Result<()>>> {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new().name("operations".to_owned()).spawn(move || {
        let served = tokio::runtime::Builder::new_current_thread().enable_all().build().and_then(|runtime| {
            runtime.block_on(async {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                let options = ServeConfig::http(
                    "operations",
                    ConnectionLimits::operations(),
                    Http { tls: None, metrics: connections },
                    Duration::from_secs(5),
                );
                let shutdown = Shutdown { drain: stop.clone(), stop };
                crate::net::serve(listener, router(metrics, health, &debug), options, shutdown).await;
                Ok(())
            })
        });
        let _ = done.send(served);
    })?;
    Ok(result)
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
        let app = router(Metrics::new(), health, &ProxyDebug::default());

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
    async fn a_wedged_runtime_fails_liveness() {
        use std::sync::atomic::AtomicBool;
        let (wedge, observed) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (started, heartbeat) = std::sync::mpsc::channel();
        // A runtime of its own, with one thread, that the test wedges.
        let runtime_thread = {
            let (wedge, observed) = (wedge.clone(), observed.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                runtime.block_on(async move {
                    started.send(Heartbeat::start(Duration::from_millis(300))).unwrap();
                    loop {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        if wedge.load(Ordering::SeqCst) {
                            // Blocks the only worker until the stall was seen (or 30 s passed).
                            let give_up = std::time::Instant::now() + Duration::from_secs(30);
                            while !observed.load(Ordering::SeqCst) && std::time::Instant::now() < give_up {
                                std::thread::sleep(Duration::from_millis(10));
                            }
                            return;
                        }
                    }
                })
            })
        };
        let heartbeat = heartbeat.recv().unwrap();
        let health = Health::default();
        let beating = heartbeat.clone();
        health.add_liveness("runtime", move || beating.is_beating());
        let app = router(Metrics::new(), health, &ProxyDebug::default());
        let until = |wanted: StatusCode| {
            let app = app.clone();
            async move {
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                loop {
                    let (status, body) = get(app.clone(), "/healthz").await;
                    if status == wanted || std::time::Instant::now() > deadline {
                        return (status, body);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        assert_eq!(until(StatusCode::OK).await, (StatusCode::OK, "ok\n".to_owned()));
        wedge.store(true, Ordering::SeqCst);
        let (status, body) = until(StatusCode::SERVICE_UNAVAILABLE).await;
        observed.store(true, Ordering::SeqCst);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "[-] runtime\nnot live\n");
        runtime_thread.join().unwrap();
    }
}
