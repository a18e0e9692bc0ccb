//! The controllers' metrics: reconciles (count, duration, errors) and the writes they send to
//! the API server. The reconcilers call the [`ReconcileMetrics`] hooks; [`ControllerMetrics`]
//! records them in the operator's registry, and [`NoMetrics`] nowhere.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::Error;

/// Hooks for metrics; the `run` command plugs the registry in ([`ControllerMetrics`]). Every
/// method defaults to doing nothing.
pub trait ReconcileMetrics: Send + Sync {
    /// A reconcile of `kind` finished; `error` is the failure's metric label.
    fn reconciled(&self, _kind: &'static str, _error: Option<&'static str>, _elapsed: Duration) {}
    /// A write request (`apply`, `apply_status`, `delete`, `publish`) about an object of `kind`.
    fn wrote(&self, _kind: &'static str, _verb: &'static str) {}
}

/// Metrics that go nowhere.
#[derive(Debug, Default)]
pub struct NoMetrics;
impl ReconcileMetrics for NoMetrics {}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileErrorLabels {
    pub kind: &'static str,
    pub error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub kind: &'static str,
    pub verb: &'static str,
}

/// The label values the controllers' families start with, at zero.
pub mod series {
    pub const KINDS: [&str; 3] = ["Foo", "Envoy", "EnvoyRoute"];
    /// Objects the reconcilers write, and how.
    pub const WRITES: [(&str, &str); 11] = [
        ("Deployment", "apply"),
        ("Deployment", "delete"),
        ("ConfigMap", "apply"),
        ("ConfigMap", "patch"),
        ("ConfigMap", "delete"),
        ("Service", "apply"),
        ("Service", "delete"),
        ("Foo", "apply_status"),
        ("Envoy", "apply_status"),
        ("EnvoyRoute", "apply_status"),
        ("Event", "publish"),
    ];

    pub fn reconcile_errors() -> impl Iterator<Item = &'static str> {
        super::Error::METRIC_LABELS.into_iter()
    }
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn reconcile_buckets() -> Histogram {
    // 1 ms to ~16 s: a reconcile is a few API round trips.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// The controllers' families in the operator's registry:
/// `Context::with_metrics(Arc::new(metrics.clone()))`.
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    reconciliations: Family<KindLabels, Counter>,
    reconcile_errors: Family<ReconcileErrorLabels, Counter>,
    reconcile_duration: HistogramFamily<KindLabels>,
    api_writes: Family<WriteLabels, Counter>,
}

impl Default for ControllerMetrics {
    /// Families in no registry (tests).
    fn default() -> Self {
        Self::register(&mut Registry::default())
    }
}

impl ControllerMetrics {
    /// Registers the controllers' families in `registry`, every series at zero.
    pub fn register(registry: &mut Registry) -> Self {
        let reconciliations = Family::<KindLabels, Counter>::default();
        registry.register("reconciliations", "Reconciliations run, per kind", reconciliations.clone());
        let reconcile_errors = Family::<ReconcileErrorLabels, Counter>::default();
        registry.register(
            "reconcile_errors",
            "Reconciliations that failed, per kind and error",
            reconcile_errors.clone(),
        );
        let reconcile_duration: HistogramFamily<KindLabels> = Family::new_with_constructor(reconcile_buckets);
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconciliation",
            reconcile_duration.clone(),
        );
        let api_writes = Family::<WriteLabels, Counter>::default();
        registry.register(
            "api_writes",
            "Write requests the reconcilers sent to the API server, per kind of object and verb",
            api_writes.clone(),
        );
        for kind in series::KINDS {
            let _ = reconciliations.get_or_create(&KindLabels { kind });
            let _ = reconcile_duration.get_or_create(&KindLabels { kind });
            for error in series::reconcile_errors() {
                let _ = reconcile_errors.get_or_create(&ReconcileErrorLabels { kind, error });
            }
        }
        for (kind, verb) in series::WRITES {
            let _ = api_writes.get_or_create(&WriteLabels { kind, verb });
        }
        Self { reconciliations, reconcile_errors, reconcile_duration, api_writes }
    }
}

impl ReconcileMetrics for ControllerMetrics {
    fn reconciled(&self, kind: &'static str, error: Option<&'static str>, elapsed: Duration) {
        self.reconciliations.get_or_create(&KindLabels { kind }).inc();
        self.reconcile_duration.get_or_create(&KindLabels { kind }).observe(elapsed.as_secs_f64());
        if let Some(error) = error {
            self.reconcile_errors.get_or_create(&ReconcileErrorLabels { kind, error }).inc();
        }
    }

    fn wrote(&self, kind: &'static str, verb: &'static str) {
        self.api_writes.get_or_create(&WriteLabels { kind, verb }).inc();
    }
}
