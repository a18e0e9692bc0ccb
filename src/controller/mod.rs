//! Reconcilers: Foo -> Deployment; Envoy -> bootstrap ConfigMap + Deployment + Service (and
//! the fleet's xDS status from the replicas' reports, [`fleet_reports`]); EnvoyRoute -> its
//! status ([`routes`]); the Gateway API's GatewayClasses, Gateways (with their fleets) and
//! HTTPRoutes -> their statuses ([`gateways`]).
//!
//! Level-driven: every reconcile computes the desired children and status from the parent
//! alone (pure builders in [`envoy_operator_core::children`]), compares them with the cached
//! children, and writes only the difference with server-side apply ([`sync`]). The
//! kube-runtime `Controller` ([`watch`]) supplies watches, caches and the per-object queue;
//! this module adds the shared [`Context`], the error type and the backoff policy.

pub mod fleet_reports;
pub mod gateways;
pub mod identity;
pub mod mesh_identity;
pub mod metrics;
pub mod rejections;
mod route_events;
pub mod routes;
pub mod sync;
pub mod terminating;
pub mod transitions;
pub mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy_operator_core::children::envoy::ControlPlaneTrust;

use crate::certs::identity_ca::IdentityCa;
use crate::index::Index;
use crate::ops::logging::KubeError;
use envoy_operator_core::children::install::InstallId;
use envoy_operator_core::names::{DEFAULT_NGINX_IMAGE, EVENT_REPORTER};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Client;
use kube::core::DynamicObject;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::OnceCell;

pub use self::fleet_reports::FleetReports;
pub use self::metrics::{ControllerMetrics, NoMetrics, ReconcileMetrics};
pub use self::watch::{ControllerConfig, run, run_with_index};

/// Errors of one reconcile. Each maps to a fixed metric label.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{verb} {kind} {name:?}: {}", KubeError(.source))]
    Api {
        verb: &'static str,
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("{kind} {name:?} already exists and is not managed by {owner_kind} {owner:?}")]
    NameClash { kind: &'static str, name: String, owner_kind: &'static str, owner: String },

    #[error("{kind} has no metadata.{field}")]
    MissingMetadata { kind: &'static str, field: &'static str },

    #[error("the cache of {0} stopped before it was listed")]
    CacheUnavailable(String),

    #[error("connecting to the Kubernetes API: {}", KubeError(.0))]
    Client(#[source] kube::Error),

    #[error("issuing the fleet's xDS client certificate: {0}")]
    Identity(String),

    #[error("the Service {name:?} cannot take its cluster IP: {message}")]
    AddressNotUsable { name: String, message: String },
}

impl Error {
    /// Every [`metric_label`](Self::metric_label).
    pub const METRIC_LABELS: [&str; 8] = [
        "conflict",
        "api",
        "name_clash",
        "missing_metadata",
        "cache_unavailable",
        "client",
        "identity",
        "address_not_usable",
    ];

    /// A short, fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Api { source: kube::Error::Api(status), .. } if status.code == 409 => "conflict",
            Self::Api { .. } => "api",
            Self::NameClash { .. } => "name_clash",
            Self::MissingMetadata { .. } => "missing_metadata",
            Self::CacheUnavailable(_) => "cache_unavailable",
            Self::Client(_) => "client",
            Self::Identity(_) => "identity",
            Self::AddressNotUsable { .. } => "address_not_usable",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Per-object exponential backoff after failed reconciles: `base * 2^(n-1)` for the n-th
/// consecutive failure, capped. A success resets the count. No jitter: the controller
/// already spreads objects out, and a deterministic policy is testable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackoffPolicy {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self { base: Duration::from_secs(5), cap: Duration::from_secs(300) }
    }
}

impl BackoffPolicy {
    /// Delay before retrying after the `failures`-th consecutive failure (1-based).
    pub fn delay(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(31);
        self.base.saturating_mul(1u32 << exponent).min(self.cap)
    }
}

/// The key of an object in the backoff map: its kind, namespace and name.
pub type ObjectKey = ObjectRef<DynamicObject>;

/// Consecutive failures per object. An object's entry goes on a success and when the object
/// is deleted, so the map holds only objects that exist and are failing.
#[derive(Debug, Default)]
pub struct Backoff {
    policy: BackoffPolicy,
    failures: Mutex<HashMap<ObjectKey, u32>>,
}

impl Backoff {
    fn failures_map(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, u32>> {
        self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a failure of `key` and returns how long to wait before retrying.
    pub fn failed(&self, key: &ObjectKey) -> Duration {
        let mut failures = self.failures_map();
        let count = failures.entry(key.clone()).or_insert(0);
        *count = count.saturating_add(1);
        self.policy.delay(*count)
    }

    /// Forgets the failures of `key`: after a success, or once the object is deleted.
    pub fn forget(&self, key: &ObjectKey) {
        self.failures_map().remove(key);
    }

    /// Consecutive failures recorded for `key`.
    pub fn failures(&self, key: &ObjectKey) -> u32 {
        self.failures_map().get(key).copied().unwrap_or(0)
    }

    /// Objects with failures on record.
    pub fn len(&self) -> usize {
        self.failures_map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Settings of the reconcilers (from the command line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Image of a Foo's nginx pods.
    pub nginx_image: String,
    /// Periodic re-check of an object that reconciled fine (a safety net; costs no writes).
    pub resync: Duration,
    /// This install's identity, marked on every child it applies: a parent whose children
    /// another install marked is left to that install ([`envoy_operator_core::children::install`]).
    pub install: InstallId,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            nginx_image: DEFAULT_NGINX_IMAGE.to_owned(),
            resync: Duration::from_secs(600),
            install: InstallId::default(),
        }
    }
}

/// The caches of children the reconcilers read: the index's ([`Stores::of_index`]), or any
/// filled stores (tests).
#[derive(Clone)]
pub struct Stores {
    /// Foos' and Envoys' Deployments alike.
    pub deployments: Store<Deployment>,
    pub config_maps: Store<ConfigMap>,
    pub services: Store<Service>,
    listing: Listing,
}

/// What "the caches are listed" waits on.
#[derive(Clone)]
enum Listing {
    /// The index's one signal.
    Index(Arc<Index>),
    /// The stores themselves. `Store::wait_until_ready` wakes only the last of several
    /// concurrent waiters (it sits on a oneshot channel, which keeps one waker): every
    /// reconcile waits on this cell instead, so exactly one task waits on the stores and the
    /// others are woken by the cell.
    Stores(Arc<OnceCell<()>>),
}

impl Stores {
    /// Stores filled by their own watches (or by hand).
    pub fn new(
        deployments: Store<Deployment>,
        config_maps: Store<ConfigMap>,
        services: Store<Service>,
    ) -> Self {
        Self { deployments, config_maps, services, listing: Listing::Stores(Arc::default()) }
    }

    /// The index's caches of the children (their watches start now).
    pub fn of_index(index: &Arc<Index>) -> Self {
        Self {
            deployments: index.deployments().store().clone(),
            config_maps: index.config_maps().store().clone(),
            services: index.services().store().clone(),
            listing: Listing::Index(index.clone()),
        }
    }

    /// Waits until the caches have been listed once, so a reconcile never mistakes a child not
    /// yet listed for a missing one.
    pub async fn listed(&self) -> Result<()> {
        match &self.listing {
            Listing::Index(index) => {
                index.listed().await.map_err(|unavailable| Error::CacheUnavailable(unavailable.0))
            }
            Listing::Stores(cell) => {
                let unavailable = |what: &str| {
                    let what = what.to_owned();
                    move |_| Error::CacheUnavailable(what)
                };
                cell.get_or_try_init(|| async {
                    self.config_maps.wait_until_ready().await.map_err(unavailable("ConfigMap"))?;
                    self.deployments.wait_until_ready().await.map_err(unavailable("Deployment"))?;
                    self.services.wait_until_ready().await.map_err(unavailable("Service"))
                })
                .await?;
                Ok(())
            }
        }
    }
}

/// Everything a reconcile needs; shared by all reconciles of both kinds.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub settings: Settings,
    pub stores: Stores,
    pub backoff: Backoff,
    pub metrics: Arc<dyn ReconcileMetrics>,
    /// The operator's control plane, with its current CA, for Envoys without `spec.xds`; `None`
    /// where none runs (their proxies are then admin-only).
    pub control_plane: Option<tokio::sync::watch::Receiver<ControlPlaneTrust>>,
    /// The CA that issues the fleets of the operator's control plane their client certificates
    /// ([`identity`]); `None` leaves them without (tests of other concerns).
    pub identity_issuer: Option<tokio::sync::watch::Receiver<Arc<IdentityCa>>>,
    /// The xDS replicas' reports, for the `status.xds` and `ConfigAccepted` of Envoys without
    /// `spec.xds`; `None` where the operator serves no xDS (set by [`run`] from
    /// [`ControllerConfig::xds_reports_namespace`]).
    pub fleet_reports: Option<FleetReports>,
    /// The `ConfigRejected` events told per Envoy, to tell each rejection once.
    pub rejection_events: rejections::RejectionEvents,
    /// The namespaces being deleted, told once each in the log.
    pub terminating: terminating::TerminatingNamespaces,
}

impl Context {
    /// A context with the default backoff policy and no metrics.
    pub fn new(client: Client, settings: Settings, stores: Stores) -> Self {
        Self {
            recorder: Recorder::new(client.clone(), EVENT_REPORTER.into()),
            client,
            settings,
            stores,
            backoff: Backoff::default(),
            metrics: Arc::new(NoMetrics),
            control_plane: None,
            identity_issuer: None,
            fleet_reports: None,
            rejection_events: rejections::RejectionEvents::default(),
            terminating: terminating::TerminatingNamespaces::default(),
        }
    }

    /// Envoys without `spec.xds` use the operator's control plane, trusting the CA `trust`
    /// holds (it changes when the certificate rotates).
    #[must_use]
    pub fn with_control_plane(mut self, trust: tokio::sync::watch::Receiver<ControlPlaneTrust>) -> Self {
        self.control_plane = Some(trust);
        self
    }

    /// Fleets of the operator's control plane get client certificates `issuer` issues (it
    /// changes when the CA rotates).
    #[must_use]
    pub fn with_identity_issuer(mut self, issuer: tokio::sync::watch::Receiver<Arc<IdentityCa>>) -> Self {
        self.identity_issuer = Some(issuer);
        self
    }

    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<dyn ReconcileMetrics>) -> Self {
        self.metrics = metrics;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let policy = BackoffPolicy::default();
        let delays: Vec<u64> = (1..=9).map(|n| policy.delay(n).as_secs()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(policy.delay(u32::MAX), Duration::from_secs(300));
    }

    #[test]
    fn backoff_is_per_object_and_resets_on_success() {
        let key = |name: &str| ObjectRef::<envoy_operator_core::api::Foo>::new(name).within("ns").erase();
        let backoff = Backoff::default();
        assert_eq!(backoff.failed(&key("a")), Duration::from_secs(5));
        assert_eq!(backoff.failed(&key("a")), Duration::from_secs(10));
        assert_eq!(backoff.failed(&key("b")), Duration::from_secs(5));
        backoff.forget(&key("a"));
        assert_eq!(backoff.failures(&key("a")), 0);
        assert_eq!(backoff.failed(&key("a")), Duration::from_secs(5));
    }

    #[test]
    fn backoff_keys_tell_kinds_apart() {
        let backoff = Backoff::default();
        let foo = ObjectRef::<envoy_operator_core::api::Foo>::new("a").within("ns").erase();
        let envoy = ObjectRef::<envoy_operator_core::api::Envoy>::new("a").within("ns").erase();
        backoff.failed(&foo);
        assert_eq!(backoff.failures(&envoy), 0, "an Envoy and a Foo of one name are two objects");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn every_concurrent_waiter_sees_the_caches_become_ready() {
        use kube::runtime::{reflector, watcher};
        let (deployments, mut deployment_writer) = reflector::store::<Deployment>();
        let (config_maps, mut config_map_writer) = reflector::store::<ConfigMap>();
        let (services, mut service_writer) = reflector::store::<Service>();
        let stores = Stores::new(deployments, config_maps, services);
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let stores = stores.clone();
                tokio::spawn(async move { stores.listed().await })
            })
            .collect();
        // Let every waiter run up to its wait before the caches fill.
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
        deployment_writer.apply_watcher_event(&watcher::Event::Init);
        deployment_writer.apply_watcher_event(&watcher::Event::InitDone);
        config_map_writer.apply_watcher_event(&watcher::Event::Init);
        config_map_writer.apply_watcher_event(&watcher::Event::InitDone);
        service_writer.apply_watcher_event(&watcher::Event::Init);
        service_writer.apply_watcher_event(&watcher::Event::InitDone);
        for waiter in waiters {
            let woken = tokio::time::timeout(Duration::from_secs(10), waiter).await;
            assert!(matches!(woken, Ok(Ok(Ok(())))), "a waiter was never woken: {woken:?}");
        }
    }

    #[test]
    fn reconciles_reach_the_prometheus_registry() {
        let mut builder = crate::ops::metrics::Metrics::builder();
        let controllers = builder.register(ControllerMetrics::register);
        let registry = builder.build();
        let metrics: Arc<dyn ReconcileMetrics> = Arc::new(controllers);
        metrics.reconciled("Foo", Some("conflict"), Duration::from_millis(3));
        let text = registry.encode();
        // Every series starts at zero: the Foo's conflict is the one that counted.
        let line =
            text.lines().find(|l| l.contains("reconcile") && l.contains("conflict") && l.contains("Foo"));
        assert!(line.is_some_and(|l| l.contains("Foo") && l.ends_with(" 1")), "{text}");
    }

    #[test]
    fn conflicts_have_their_own_label() {
        let conflict = kube::Error::Api(Box::new(kube::core::Status { code: 409, ..Default::default() }));
        let error = Error::Api { verb: "apply", kind: "Deployment", name: "x".into(), source: conflict };
        assert_eq!(error.metric_label(), "conflict");
    }
}
