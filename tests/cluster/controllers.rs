//! The controllers running against an in-memory API server, as `controller::run` starts them,
//! with reconciles counted by a test's own [`ReconcileMetrics`].

use std::sync::Arc;
use std::time::Duration;

use envoy_operator::controller::{self, ControllerConfig, ReconcileMetrics, Settings};
use envoy_operator_testkit::fake_api::FakeApi;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Guards against hangs; never part of an assertion about speed.
pub const HANG_GUARD: Duration = Duration::from_secs(30);

/// Running controllers, their reconciles counted in `reconciles`.
pub struct Controllers<R> {
    pub reconciles: Arc<R>,
    pub stop: oneshot::Sender<()>,
    pub task: JoinHandle<Result<(), controller::Error>>,
}

impl<R: ReconcileMetrics + Default + 'static> Controllers<R> {
    /// All of them, watching `namespace` (every one with `None`).
    pub fn start(api: &FakeApi, namespace: Option<&str>) -> Self {
        let reconciles = Arc::new(R::default());
        let metrics: Arc<dyn ReconcileMetrics> = reconciles.clone();
        let config = ControllerConfig {
            namespace: namespace.map(str::to_owned),
            concurrency: 4,
            settings: Settings::default(),
            xds_reports_namespace: None,
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async {
            let _ = stopped.await;
        };
        let task = tokio::spawn(controller::run(api.client(), config, shutdown, move |ctx| {
            ctx.with_metrics(metrics)
        }));
        Self { reconciles, stop, task }
    }
}

impl<R> Controllers<R> {
    /// Stops them and checks they ran and ended cleanly.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(HANG_GUARD, self.task)
            .await
            .expect("the controllers stop")
            .expect("the controllers did not panic")
            .expect("the controllers ran without error");
    }
}
