//! The e2e harness: a fresh, labelled namespace per test; the CRDs installed idempotently; the
//! operator run in-process (the same `operator::run` as `envoy-operator run`, through the
//! caller's [`Launcher`]; its replicas' webhooks behind one address on `E2E_WEBHOOK_HOST`
//! ([`WebhookFront`]) registered in URL mode by webhook configurations scoped to this run's
//! namespaces; watching the run's namespace, or every namespace for a story that spans several
//! ([`Watch`])) or, with `E2E_IN_CLUSTER=1`, the operator already deployed from `deploy/`; and
//! cleanup (configurations, namespaces) even when the test panics. Used by `tests/e2e/` and
//! `examples/bench_reconcile.rs`.
//!
//! Two operators must never reconcile the same objects (each would undo what the other writes:
//! fleets' bootstraps naming different control planes, statuses). So an in-process run refuses
//! to start while another operator holds its leader Lease where it would overlap: a deployed
//! one (it watches every namespace) for any run; any other for a run watching every namespace.
//! Within one test process, a run watching every namespace waits until the others are done,
//! and they wait for it ([`Watch`]).

mod front;
mod preconditions;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_operator_core::api::Foo;
use envoy_operator_core::bootstrap::ControlPlane;
use envoy_operator_core::crd;
use envoy_operator_core::kube_version;
use envoy_operator_core::webhook_config::{self, WebhookOptions, WebhookTarget};
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use self::front::WebhookFront;
pub use self::preconditions::{
    DEPLOYED_NAME, DEPLOYED_NAMESPACE, LiveOperator, no_nodes_declared, pod_state, pods_state,
    schedulable_node,
};

/// On every namespace and configuration the harness creates (for finding leftovers).
pub const E2E_LABEL: &str = "envoy-operator.example.com/e2e";
/// On this run's namespaces only; the webhook configurations select on it.
pub const RUN_LABEL: &str = "envoy-operator.example.com/e2e-run";
/// On an in-process operator's namespace: what it watches ([`Watch::label`]).
pub const WATCH_LABEL: &str = "envoy-operator.example.com/e2e-watch";
pub const TEST_MANAGER: &str = "envoy-operator-e2e";
/// Creating objects and the controller reacting.
pub const SHORT: Duration = Duration::from_secs(60);
/// Pulling images and starting pods.
pub const LONG: Duration = Duration::from_secs(240);
/// The leader Lease's duration (`ops::leader::LeaseConfig::new`): how long a crashed
/// leader's Lease blocks the next one.
pub const LEASE: Duration = Duration::from_secs(15);

/// `E2E_IN_CLUSTER=1`: the operator is deployed (`kubectl apply -k deploy/`), not started here.
pub fn in_cluster_mode() -> bool {
    std::env::var("E2E_IN_CLUSTER").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// The address the API server dials for the in-process webhook (and the one it binds).
pub fn webhook_host() -> IpAddr {
    let host = std::env::var("E2E_WEBHOOK_HOST").unwrap_or_else(|_| "127.0.0.1".to_owned());
    host.parse().unwrap_or_else(|_| panic!("E2E_WEBHOOK_HOST={host:?} is not an IP address"))
}

/// A free TCP port on `host` (bound, then released for the server to take).
pub fn free_port(host: IpAddr) -> SocketAddr {
    let listener = std::net::TcpListener::bind((host, 0)).unwrap_or_else(|error| {
        panic!("binding {host}:0 (E2E_WEBHOOK_HOST must be a local address): {error}")
    });
    listener.local_addr().expect("a bound address")
}

/// Which namespaces an in-process operator watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watch {
    /// The run's test namespace only: most stories, which run beside each other.
    RunNamespace,
    /// Every namespace: a story spanning namespaces (the Gateway API's). It reconciles every
    /// run's objects, so in this process it runs alone: it waits for the running stories to
    /// finish, and later ones wait for it.
    AllNamespaces,
}

impl Watch {
    /// The value of [`WATCH_LABEL`] on the operator's namespace.
    fn label(self) -> &'static str {
        match self {
            Watch::RunNamespace => "run",
            Watch::AllNamespaces => "all",
        }
    }

    /// Whether an operator holding its Lease in a namespace labelled `labels` would reconcile
    /// objects this run's operator does: every other one when this one watches every
    /// namespace; otherwise any but another run's operator watching its own namespace.
    fn overlaps(self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        match self {
            Watch::AllNamespaces => true,
            Watch::RunNamespace => {
                labels.get(WATCH_LABEL).map(String::as_str) != Some(Watch::RunNamespace.label())
            }
        }
    }

    /// Takes this process's turn: shared by runs of their own namespace, alone for every namespace.
    async fn turn(self) -> Turn {
        static TURNS: std::sync::LazyLock<Arc<tokio::sync::RwLock<()>>> =
            std::sync::LazyLock::new(|| Arc::new(tokio::sync::RwLock::new(())));
        match self {
            Watch::RunNamespace => Turn::Shared(TURNS.clone().read_owned().await),
            Watch::AllNamespaces => Turn::Alone(TURNS.clone().write_owned().await),
        }
    }
}

/// A run's turn ([`Watch::turn`]), held until it is cleaned up.
#[allow(dead_code)] // held for its drop
enum Turn {
    Shared(tokio::sync::OwnedRwLockReadGuard<()>),
    Alone(tokio::sync::OwnedRwLockWriteGuard<()>),
}

/// What the harness needs of the operator's library, which this crate does not depend on.
pub trait Launcher: Send + Sync + 'static {
    /// The controllers' periodic re-check when a test sets none.
    fn default_resync(&self) -> Duration;

    /// Writes a webhook serving certificate (`service_name` in `namespace`, also naming
    /// `extra_names`, valid `days`) to `dir` as the operator reads it; returns its CA as PEM.
    fn write_certificates(
        &self,
        dir: &Path,
        service_name: &str,
        namespace: &str,
        days: u32,
        extra_names: Vec<String>,
    ) -> String;

    /// The operator (`operator::run`) as `setup` says, as the replica `identity`, with its
    /// operations port on `metrics`, until `shutdown`; its error as text.
    fn run(
        &self,
        setup: &OperatorSetup,
        identity: &str,
        metrics: SocketAddr,
        client: Client,
        shutdown: BoxFuture<'static, ()>,
    ) -> BoxFuture<'static, Result<(), String>>;
}

/// The operator's control plane: where it listens and what it advertises.
#[derive(Clone, Debug)]
pub struct XdsPorts {
    pub listen: SocketAddr,
    pub advertise: ControlPlane,
}

/// The operator started in-process with `operator::run`, on a runtime of its own (with its own
/// client), so that killing it is a crash: every task it spawned stops at once, nothing is
/// released, the Lease stays held until it expires.
pub struct Operator {
    pub identity: String,
    /// The operator's operations port (`/metrics`, `/readyz`); read by the reconcile benchmark.
    pub metrics: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), String>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

/// What an in-process operator is started with; kept so it can be restarted the same way.
#[derive(Clone)]
pub struct OperatorSetup {
    pub launcher: Arc<dyn Launcher>,
    pub watch_namespace: Option<String>,
    pub operator_namespace: String,
    pub cert_dir: std::path::PathBuf,
    /// This replica's webhook port.
    pub listen: SocketAddr,
    /// Where the API server calls the webhooks: every replica started with this setup (or
    /// [`Self::another_replica`]) behind one address.
    pub front: Arc<WebhookFront>,
    pub resync: Duration,
    /// The control plane, served as in production (client certificates required: the stories'
    /// Envoys present the identity Secret the operator issued their fleet); advertised as
    /// `localhost` (which the test certificate names) since they run on this machine.
    pub xds: XdsPorts,
}

impl OperatorSetup {
    /// Another replica on this machine: the same operator on webhook and xDS ports of its own,
    /// behind the same [`WebhookFront`].
    pub fn another_replica(&self) -> OperatorSetup {
        let xds = free_port(IpAddr::from([127, 0, 0, 1]));
        OperatorSetup {
            listen: free_port(self.listen.ip()),
            xds: XdsPorts {
                listen: xds,
                advertise: ControlPlane { port: xds.port(), ..self.xds.advertise.clone() },
            },
            ..self.clone()
        }
    }
}

impl Operator {
    pub async fn start(setup: &OperatorSetup, identity: &str) -> Operator {
        setup.front.add(setup.listen);
        let (stop, stopped) = oneshot::channel::<()>();
        let metrics_listen = free_port(IpAddr::from([127, 0, 0, 1]));
        let (launcher, run_setup, run_identity) =
            (setup.launcher.clone(), setup.clone(), identity.to_owned());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("operator-{identity}"))
            .enable_all()
            .build()
            .expect("a runtime for the operator");
        let task = runtime.spawn(async move {
            let client = Client::try_default().await.map_err(|e| format!("the operator's client: {e}"))?;
            launcher.run(&run_setup, &run_identity, metrics_listen, client, stopped.map(|_| ()).boxed()).await
        });
        let mut operator = Operator {
            identity: identity.to_owned(),
            metrics: metrics_listen,
            stop: Some(stop),
            task: Some(task),
            runtime: Some(runtime),
        };
        // The webhook listens once its port accepts connections.
        let listen = setup.listen;
        let what = format!("the in-process operator's webhook to listen on {listen}");
        let started = Instant::now();
        loop {
            if tokio::net::TcpStream::connect(listen).await.is_ok() {
                return operator;
            }
            if let Some(task) = operator.task.as_mut().filter(|t| t.is_finished()) {
                let outcome = task.await;
                panic!("the in-process operator stopped before serving: {outcome:?}");
            }
            if started.elapsed() > SHORT {
                panic!("waited {SHORT:?} for {what}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A crash: the operator's runtime is dropped mid-way; nothing is released (the Lease
    /// stays held until it expires, [`LEASE`]).
    pub fn kill(mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }

    /// A graceful stop (webhook drained, controllers stopped, Lease released).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            match tokio::time::timeout(SHORT, task).await {
                Ok(Ok(Err(error))) => eprintln!("the operator stopped with an error: {error}"),
                Ok(_) => {}
                Err(_) => eprintln!("the operator did not stop within {SHORT:?}; dropping it"),
            }
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is not allowed inside the test's runtime.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// One test's world.
pub struct Cluster {
    pub client: Client,
    pub run_id: String,
    /// The test namespace (labelled with [`E2E_LABEL`] and [`RUN_LABEL`]).
    pub namespace: String,
    /// `Ok` when a node runs pods; else why none does ([`Cluster::runs_pods`]).
    pub nodes: Result<(), String>,
    /// `None` with `E2E_IN_CLUSTER=1`.
    pub setup: Option<OperatorSetup>,
    pub operator: tokio::sync::Mutex<Option<Operator>>,
    /// Every namespace created for this run (deleted on cleanup).
    namespaces: std::sync::Mutex<Vec<String>>,
    _cert_dir: Option<tempfile::TempDir>,
    /// Dropped after the cleanup, letting the next run that waits for it start.
    _turn: Option<Turn>,
}

impl Cluster {
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub async fn create<K>(&self, object: Value) -> K
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + serde::de::DeserializeOwned,
    {
        create_in(&self.api::<K>(), object).await
    }

    /// Whether `what` (checks that need running pods) can run here: with a node that takes
    /// pods, yes; without, it fails saying why none does, unless `E2E_NO_NODES=1` declares a
    /// cluster without nodes, where it is skipped with a note.
    pub fn runs_pods(&self, what: &str) -> bool {
        match &self.nodes {
            Ok(()) => true,
            Err(why) if no_nodes_declared() => {
                eprintln!("note: E2E_NO_NODES=1 ({why}): {what} skipped");
                false
            }
            Err(why) => panic!(
                "{what} needs running pods, and {why}; on a control plane without nodes, set E2E_NO_NODES=1 to skip such checks"
            ),
        }
    }

    /// Creates another namespace for this run, with `labels` besides the run's own.
    pub async fn extra_namespace(&self, purpose: &str, labels: Value) -> String {
        let name = format!("eo-e2e-{purpose}-{}", self.run_id);
        let mut all = json!({E2E_LABEL: "true", RUN_LABEL: self.run_id});
        if let (Some(all), Some(extra)) = (all.as_object_mut(), labels.as_object()) {
            all.extend(extra.clone());
        }
        // Recorded first: cleaned up even if creating it fails half-way.
        self.namespaces.lock().unwrap_or_else(|p| p.into_inner()).push(name.clone());
        create_namespace(&self.client, &name, all).await;
        name
    }

    /// The names of this run's webhook configurations (in-process mode).
    pub fn configuration_name(&self) -> String {
        configuration_name(&self.run_id)
    }

    /// Deletes this run's webhook configurations (in-process mode).
    pub async fn remove_webhook_configurations(&self) {
        delete_configurations(&self.client, &self.configuration_name()).await;
    }

    /// Starts the operator again under a new identity (in-process mode).
    pub async fn start_operator(&self, identity: &str) {
        let setup = self.setup.as_ref().expect("in-process mode");
        // A killed runtime closes its listener in the background (std binds with
        // SO_REUSEADDR on Unix, so only a listener still open makes this fail).
        for listen in [setup.listen, setup.xds.listen] {
            wait_for(
                &format!("the previous operator's listener on {listen} to close"),
                SHORT,
                || async move { std::net::TcpListener::bind(listen).map(drop).map_err(|e| e.to_string()) },
            )
            .await;
        }
        let operator = Operator::start(setup, identity).await;
        *self.operator.lock().await = Some(operator);
    }

    pub async fn clean_up(self) {
        if let Some(operator) = self.operator.lock().await.take() {
            operator.stop().await;
        }
        if self.setup.is_some() {
            delete_configurations(&self.client, &self.configuration_name()).await;
        }
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let names = self.namespaces.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for name in names {
            match namespaces.delete(&name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(error) if is_not_found(&error) => {}
                Err(error) => eprintln!("could not delete namespace {name}: {error}"),
            }
        }
    }
}

pub async fn create_in<K>(api: &Api<K>, object: Value) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let object: K = serde_json::from_value(object).expect("a valid object");
    let name = object.name_any();
    api.create(&PostParams::default(), &object).await.unwrap_or_else(|error| {
        panic!(
            "creating {} {name}: {error}",
            std::any::type_name::<K>().rsplit("::").next().unwrap_or("object")
        )
    })
}

pub fn configuration_name(run_id: &str) -> String {
    format!("envoy-operator-e2e-{run_id}")
}

async fn create_namespace(client: &Client, name: &str, labels: Value) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let body = json!({"metadata": {"name": name, "labels": labels}});
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(body).expect("namespace"))
        .await
        .unwrap_or_else(|error| panic!("creating the namespace {name}: {error}"));
}

/// Sets everything up, runs `test`, and always cleans up.
pub async fn in_cluster(launcher: Arc<dyn Launcher>, story: &str, test: impl AsyncFnOnce(&Cluster)) {
    in_cluster_watching(launcher, story, Watch::RunNamespace, test).await;
}

/// [`in_cluster`] with an in-process operator watching `watch`.
pub async fn in_cluster_watching(
    launcher: Arc<dyn Launcher>,
    story: &str,
    watch: Watch,
    test: impl AsyncFnOnce(&Cluster),
) {
    let resync = launcher.default_resync();
    let cluster = set_up_watching(launcher, story, resync, watch).await;
    let outcome = AssertUnwindSafe(test(&cluster)).catch_unwind().await;
    cluster.clean_up().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Everything but the test: client, CRDs, namespaces, operator, webhook configurations.
/// `resync` is the controllers' periodic re-check (in-process mode).
pub async fn set_up_with(launcher: Arc<dyn Launcher>, story: &str, resync: Duration) -> Cluster {
    set_up_watching(launcher, story, resync, Watch::RunNamespace).await
}

/// [`set_up_with`] with an in-process operator watching `watch`.
pub async fn set_up_watching(
    launcher: Arc<dyn Launcher>,
    story: &str,
    resync: Duration,
    watch: Watch,
) -> Cluster {
    let client = Client::try_default().await.expect("a kubeconfig context or in-cluster configuration");
    check_kubernetes_version(&client).await;
    let turn = if in_cluster_mode() {
        preconditions::require_deployed_operator(&client).await;
        None
    } else {
        let turn = watch.turn().await;
        refuse_overlapping_operators(&client, watch).await;
        Some(turn)
    };
    install_crds(&client).await;
    let run_id = random_suffix();
    let namespace = format!("eo-e2e-{story}-{run_id}");
    create_namespace(&client, &namespace, json!({E2E_LABEL: "true", RUN_LABEL: run_id})).await;
    let nodes = schedulable_node(&client).await;
    let mut cluster = Cluster {
        client: client.clone(),
        run_id: run_id.clone(),
        namespace: namespace.clone(),
        nodes,
        setup: None,
        operator: tokio::sync::Mutex::new(None),
        namespaces: std::sync::Mutex::new(vec![namespace]),
        _cert_dir: None,
        _turn: turn,
    };
    // From here on, whatever fails is cleaned up before the panic goes on.
    let started = AssertUnwindSafe(start(&mut cluster, launcher, resync, watch)).catch_unwind().await;
    if let Err(panic) = started {
        cluster.clean_up().await;
        std::panic::resume_unwind(panic);
    }
    cluster
}

/// Fails, naming them, if operators hold their Lease where an in-process one watching `watch`
/// would reconcile the same objects.
async fn refuse_overlapping_operators(client: &Client, watch: Watch) {
    let overlapping: Vec<String> = preconditions::live_operators(client)
        .await
        .into_iter()
        .filter(|(_, labels)| watch.overlaps(labels))
        .map(|(operator, _)| operator.to_string())
        .collect();
    assert!(
        overlapping.is_empty(),
        "another operator is running where this run's in-process operator (watching {}) would reconcile too, and each would undo what the other writes: {}. \
         Test the deployed one with E2E_IN_CLUSTER=1, or stop it (`kubectl scale -n {DEPLOYED_NAMESPACE} deployment/{DEPLOYED_NAME} --replicas=0`), or wait for the other run to end",
        match watch {
            Watch::RunNamespace => "its own namespace",
            Watch::AllNamespaces => "every namespace",
        },
        overlapping.join("; ")
    );
}

/// The operator (in-process mode) and its webhook configurations; then waits until the API
/// server calls the webhooks.
async fn start(cluster: &mut Cluster, launcher: Arc<dyn Launcher>, resync: Duration, watch: Watch) {
    if in_cluster_mode() {
        eprintln!("E2E_IN_CLUSTER=1: using the operator deployed from deploy/");
    } else {
        let (client, run_id) = (cluster.client.clone(), cluster.run_id.clone());
        let operator_namespace = format!("eo-e2e-op-{run_id}");
        cluster.namespaces.get_mut().unwrap_or_else(|p| p.into_inner()).push(operator_namespace.clone());
        // Not labelled with RUN_LABEL: the run's webhooks never see the operator's namespace.
        let labels = json!({E2E_LABEL: "true", WATCH_LABEL: watch.label()});
        create_namespace(&client, &operator_namespace, labels).await;
        let host = webhook_host();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ca_pem = launcher.write_certificates(
            dir.path(),
            "envoy-operator-e2e",
            &operator_namespace,
            1,
            vec![host.to_string()],
        );
        let front = Arc::new(WebhookFront::start(free_port(host)));
        let setup = OperatorSetup {
            launcher,
            watch_namespace: match watch {
                Watch::RunNamespace => Some(cluster.namespace.clone()),
                Watch::AllNamespaces => None,
            },
            operator_namespace,
            cert_dir: dir.path().to_owned(),
            listen: free_port(host),
            front: front.clone(),
            resync,
            xds: {
                let listen = free_port(IpAddr::from([127, 0, 0, 1]));
                XdsPorts {
                    listen,
                    advertise: ControlPlane { host: "localhost".to_owned(), port: listen.port() },
                }
            },
        };
        let base = match host {
            IpAddr::V4(_) => format!("https://{}", front.address),
            IpAddr::V6(v6) => format!("https://[{v6}]:{}", front.address.port()),
        };
        cluster.setup = Some(setup.clone());
        cluster._cert_dir = Some(dir);
        let target = WebhookTarget::Url { base, ca_bundle: ca_pem.into_bytes() };
        install_configurations(&client, &run_id, &setup.operator_namespace, target).await;
        let operator = Operator::start(&setup, &format!("e2e-{run_id}-1")).await;
        *cluster.operator.get_mut() = Some(operator);
    }
    wait_for_webhooks(cluster).await;
}

/// Waits until the API server calls the defaulting webhook for the test namespace: a
/// dry-run Foo with an empty spec comes back defaulted (configurations take effect a little
/// after they are written).
pub async fn wait_for_webhooks(cluster: &Cluster) {
    let foos: Api<Foo> = cluster.api();
    let probe: Foo = serde_json::from_value(json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo", "metadata": {"name": "webhook-probe"}, "spec": {}}))
    .expect("a Foo");
    let params = PostParams { dry_run: true, ..PostParams::default() };
    let what = match &cluster.setup {
        Some(setup) => format!(
            "the API server to call the defaulting webhook at https://{} (a dry-run Foo comes back \
             defaulted; the API server must reach this address: see E2E_WEBHOOK_HOST in the README)",
            setup.front.address
        ),
        None => "the API server to call the deployed defaulting webhook (a dry-run Foo comes back defaulted)"
            .to_owned(),
    };
    wait_for(&what, SHORT, || {
        let (foos, probe, params) = (foos.clone(), probe.clone(), params.clone());
        async move {
            match foos.create(&params, &probe).await {
                Ok(foo) if foo.spec.replicas.is_some() => Ok(()),
                Ok(foo) => Err(format!("not defaulted: spec {:?}", foo.spec)),
                Err(error) => Err(error.to_string()),
            }
        }
    })
    .await;
}

/// The run's two configurations: the generator's webhooks, renamed per run and narrowed to
/// namespaces labelled with this run's id, so a crashed run cannot affect anything else.
async fn install_configurations(
    client: &Client,
    run_id: &str,
    operator_namespace: &str,
    target: WebhookTarget,
) {
    let options = WebhookOptions { target, operator_namespace: operator_namespace.to_owned() };
    let name = configuration_name(run_id);
    let scope = |selector: &mut Option<LabelSelector>| {
        let selector = selector.get_or_insert_with(LabelSelector::default);
        selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(RUN_LABEL.to_owned(), run_id.to_owned());
    };
    let mut mutating = webhook_config::mutating_webhooks(&options);
    mutating.iter_mut().for_each(|w| scope(&mut w.namespace_selector));
    let mut validating = webhook_config::validating_webhooks(&options);
    validating.iter_mut().for_each(|w| scope(&mut w.namespace_selector));
    let mut mutating = webhook_config::mutating_configuration(mutating);
    let mut validating = webhook_config::validating_configuration(validating);
    for metadata in [&mut mutating.metadata, &mut validating.metadata] {
        metadata.name = Some(name.clone());
        metadata.labels.get_or_insert_with(Default::default).insert(E2E_LABEL.to_owned(), "true".to_owned());
    }
    let params = PatchParams::apply(TEST_MANAGER).force();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(&name, &params, &Patch::Apply(&mutating))
        .await
        .unwrap_or_else(|error| panic!("applying MutatingWebhookConfiguration {name}: {error}"));
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .patch(&name, &params, &Patch::Apply(&validating))
        .await
        .unwrap_or_else(|error| panic!("applying ValidatingWebhookConfiguration {name}: {error}"));
}

async fn delete_configurations(client: &Client, name: &str) {
    let ignore_missing = |result: Result<_, kube::Error>, kind: &str| match result {
        Ok(_) => {}
        Err(error) if is_not_found(&error) => {}
        Err(error) => eprintln!("could not delete {kind} {name}: {error}"),
    };
    let params = DeleteParams::default();
    ignore_missing(
        Api::<MutatingWebhookConfiguration>::all(client.clone()).delete(name, &params).await.map(|_| ()),
        "MutatingWebhookConfiguration",
    );
    ignore_missing(
        Api::<ValidatingWebhookConfiguration>::all(client.clone()).delete(name, &params).await.map(|_| ()),
        "ValidatingWebhookConfiguration",
    );
}

pub fn random_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
    );
    format!("{:06x}", hasher.finish() & 0xff_ffff)
}

/// States the Kubernetes version the suite runs against (once per run, past the test
/// harness's output capture, so every run's output says it) and stops a test at once, saying
/// why, on an API server older than envoy-operator supports.
pub async fn check_kubernetes_version(client: &Client) {
    static STATED: std::sync::Once = std::sync::Once::new();
    let version = client
        .apiserver_version()
        .await
        .unwrap_or_else(|error| panic!("asking the API server its version (GET /version): {error}"));
    if let Err(unsupported) = kube_version::check(&version.major, &version.minor, &version.git_version) {
        panic!("the e2e suite cannot run here: {unsupported}");
    }
    STATED.call_once(|| {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "e2e: against Kubernetes {} ({}; envoy-operator supports {} and newer)",
            version.git_version,
            version.platform,
            kube_version::MINIMUM
        );
    });
}

/// Applies the CRDs (server-side apply: idempotent) and waits until each is Established.
pub async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for definition in crd::all() {
        let name = definition.name_any();
        crds.patch(&name, &PatchParams::apply(TEST_MANAGER).force(), &Patch::Apply(&definition))
            .await
            .unwrap_or_else(|error| panic!("installing CRD {name}: {error}"));
        tokio::time::timeout(SHORT, await_condition(crds.clone(), &name, conditions::is_crd_established()))
            .await
            .unwrap_or_else(|_| panic!("waited {SHORT:?} for CRD {name} to be Established"))
            .expect("watching the CRD");
    }
}

/// Polls `check` until it yields a value; on timeout, fails saying what was awaited and
/// what was last seen.
pub async fn wait_for<T, Fut>(what: &str, timeout: Duration, mut check: impl FnMut() -> Fut) -> T
where
    Fut: Future<Output = Result<T, String>>,
{
    let started = Instant::now();
    let mut seen = String::from("nothing yet");
    while started.elapsed() < timeout {
        match check().await {
            Ok(value) => return value,
            Err(now) => seen = now,
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("waited {timeout:?} for {what}; last saw: {seen}")
}

pub async fn get<K>(api: &Api<K>, name: &str) -> Result<K, String>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    match api.get_opt(name).await {
        Ok(Some(object)) => Ok(object),
        Ok(None) => Err(format!("{name} does not exist")),
        Err(error) => Err(format!("error reading {name}: {error}")),
    }
}

/// Gone, or being deleted.
pub async fn gone<K>(api: &Api<K>, name: &str) -> Result<(), String>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    match api.get_opt(name).await {
        Ok(None) => Ok(()),
        Ok(Some(object)) if object.meta().deletion_timestamp.is_some() => Ok(()),
        Ok(Some(_)) => Err(format!("{name} still exists")),
        Err(error) => Err(error.to_string()),
    }
}

/// `(status, reason)` of the condition `type_` in a status as JSON.
pub fn condition(status: Option<&Value>, type_: &str) -> Option<(String, String)> {
    let found = status?.get("conditions")?.as_array()?.iter().find(|c| c["type"] == type_)?;
    Some((found["status"].as_str()?.to_owned(), found["reason"].as_str()?.to_owned()))
}

pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// The API server's answer to a refused request: `(code, message)`.
pub fn api_error(error: kube::Error) -> (u16, String) {
    match error {
        kube::Error::Api(status) => (status.code, status.message),
        other => panic!("expected an API error status, got {other}"),
    }
}

/// How long one probe of the API server may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// A client for the cluster of the current kubeconfig context or the in-cluster
/// configuration, when one answers (for tools such as the reconcile benchmark).
pub async fn reachable_cluster() -> Result<Client, String> {
    let config = kube::Config::infer().await.map_err(|e| format!("no Kubernetes configuration: {e}"))?;
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(|e| format!("{server}: {e}"))?;
    match tokio::time::timeout(PROBE_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(version)) => {
            tracing::info!(version = %version.git_version, %server, "connected to the Kubernetes API server");
            Ok(client)
        }
        Ok(Err(error)) => Err(format!("the Kubernetes API server at {server} did not answer: {error}")),
        Err(_) => {
            Err(format!("the Kubernetes API server at {server} did not answer within {PROBE_TIMEOUT:?}"))
        }
    }
}
