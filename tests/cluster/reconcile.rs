//! Reconcile tests against a mock API server (kube-rs `ApiServerVerifier` style): each test
//! lists the exact requests a reconcile must make, in order, answers them, and fails on any
//! request missing, out of order or extra.

use std::sync::Arc;
use std::time::Duration;

use envoy_operator::certs::identity_ca::IdentityCa;
use envoy_operator::controller::routes::{RouteCaches, RouteContext, reconcile_route, route_error_policy};
use envoy_operator::controller::sync::{backoff_key, error_policy, reconcile_envoy, reconcile_foo};
use envoy_operator::controller::{Context, Error, Settings, Stores};
use envoy_operator::xds::publish::RouteOutcomes;
use envoy_operator_core::api::{Envoy, EnvoyRoute, EnvoySpec, Foo, FooSpec, XdsServer};
use envoy_operator_core::bootstrap::ControlPlane;
use envoy_operator_core::children::envoy::{ControlPlaneTrust, desired_children};
use envoy_operator_core::children::foo::desired_deployment;
use envoy_operator_core::children::install::{self, InstallId, MANAGED_ELSEWHERE};
use envoy_operator_core::children::{labels, status};
use envoy_operator_core::identity;
use envoy_operator_core::names::{self, DEFAULT_NGINX_IMAGE};
use envoy_operator_core::rules;
use envoy_operator_core::translate::envoyroute::namespace::{NamespaceInputs, translate_namespace};
use envoy_operator_testkit::fake_api::FakeApi;
use envoy_operator_testkit::rbac;
use http::{Request, Response};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::client::Body;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

const NS: &str = "ns";
const FOO_UID: &str = "foo-uid";
const ENVOY_UID: &str = "envoy-uid";
/// How long a test waits for a request it expects before failing with a clear message.
const PATIENCE: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// The verifier

/// One expected request and how the mock API server answers it.
struct Call {
    method: &'static str,
    path: String,
    /// Query parameters the request must carry (`key=value`).
    query: Vec<&'static str>,
    /// Checks the request body (JSON) and returns the status code and body to answer with.
    answer: Box<dyn FnOnce(Value) -> (u16, Value) + Send>,
}

impl Call {
    fn new(
        method: &'static str,
        path: String,
        answer: impl FnOnce(Value) -> (u16, Value) + Send + 'static,
    ) -> Self {
        Self { method, path, query: Vec::new(), answer: Box::new(answer) }
    }

    fn query(mut self, query: &[&'static str]) -> Self {
        self.query = query.to_vec();
        self
    }
}

fn deployment_path(name: &str) -> String {
    format!("/apis/apps/v1/namespaces/{NS}/deployments/{name}")
}

fn foo_status_path() -> String {
    format!("/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{NS}/foos/example-foo/status")
}

fn envoy_status_path() -> String {
    format!("/apis/example.com/v1/namespaces/{NS}/envoys/edge/status")
}

fn not_found(name: &str) -> (u16, Value) {
    status_body(404, "NotFound", &format!("deployments.apps {name:?} not found"))
}

fn status_body(code: u16, reason: &str, message: &str) -> (u16, Value) {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code});
    (code, body)
}

/// A GET answered with `answer`.
fn get(path: String, answer: (u16, Value)) -> Call {
    Call::new("GET", path, move |_| answer)
}

/// A server-side apply of a child; `check` looks at the body, the answer echoes it as the
/// API server would (with a uid and a resourceVersion).
fn apply(path: String, force: bool, check: impl FnOnce(&Value) + Send + 'static) -> Call {
    let query: &[&'static str] =
        if force { &["fieldManager=envoy-operator", "force=true"] } else { &["fieldManager=envoy-operator"] };
    Call::new("PATCH", path, move |mut body| {
        check(&body);
        body["metadata"]["uid"] = json!("child-uid");
        body["metadata"]["resourceVersion"] = json!("2");
        (200, body)
    })
    .query(query)
}

/// A server-side apply of a parent's status.
fn apply_status(path: String, parent: Value, check: impl FnOnce(&Value) + Send + 'static) -> Call {
    Call::new("PATCH", path, move |body| {
        check(&body);
        let mut parent = parent;
        parent["status"] = body["status"].clone();
        (200, parent)
    })
    .query(&["fieldManager=envoy-operator", "force=true"])
}

/// An event with this type and reason, about the object at `regarding`.
fn event(type_: &'static str, reason: &'static str, note_contains: &'static str) -> Call {
    Call::new("POST", format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"), move |body| {
        assert_eq!(body["type"], type_, "event type in {body}");
        assert_eq!(body["reason"], reason, "event reason in {body}");
        assert_eq!(body["reportingController"], "envoy-operator");
        let note = body["note"].as_str().unwrap_or_default();
        assert!(note.contains(note_contains), "event note {note:?} lacks {note_contains:?}");
        (201, body)
    })
}

/// Answers `calls` in order, then fails on any further request until the client is dropped.
fn verify(mut handle: Handle, calls: Vec<Call>) -> JoinHandle<()> {
    let install = rbac::cluster_wide();
    tokio::spawn(async move {
        let total = calls.len();
        for (i, call) in calls.into_iter().enumerate() {
            let what = format!("request {} of {total}: {} {}", i + 1, call.method, call.path);
            let next = tokio::time::timeout(PATIENCE, handle.next_request()).await;
            let (request, send) = match next {
                Ok(Some(pair)) => pair,
                Ok(None) => panic!("the reconcile finished without making {what}"),
                Err(_) => panic!("waited {PATIENCE:?} for {what}; none came"),
            };
            assert_eq!(
                (request.method().as_str(), request.uri().path()),
                (call.method, call.path.as_str()),
                "{what}: got {} {}",
                request.method(),
                request.uri()
            );
            let query = request.uri().query().unwrap_or_default().to_owned();
            // Every request must be one the cluster-wide RBAC allows (an apply may create).
            let content_type = request
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            for access in
                rbac::accesses(request.method().as_str(), request.uri().path(), &query, &content_type, false)
            {
                assert!(
                    !install.allowing(&access).is_empty(),
                    "{what}: deploy/rbac.yaml does not allow {access}"
                );
            }
            for wanted in &call.query {
                assert!(query.split('&').any(|q| q == *wanted), "{what}: query {query:?} lacks {wanted}");
            }
            if call.method == "PATCH" && call.query.iter().any(|q| q.starts_with("fieldManager")) {
                let content_type = request.headers().get("content-type").and_then(|v| v.to_str().ok());
                assert_eq!(
                    content_type,
                    Some("application/apply-patch+yaml"),
                    "{what}: not a server-side apply"
                );
            }
            let bytes = request.into_body().collect_bytes().await.expect("request body");
            let body = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).expect("JSON body")
            };
            let (code, answer) = (call.answer)(body);
            let response = Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&answer).expect("answer")))
                .expect("response");
            send.send_response(response);
        }
        if let Some((request, _)) = handle.next_request().await {
            panic!("unexpected request after the {total} expected: {} {}", request.method(), request.uri());
        }
    })
}

// ---------------------------------------------------------------------------------------
// Fixtures

/// A store already filled by its watch.
fn store<K>(objects: Vec<K>) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let (reader, mut writer) = reflector::store();
    writer.apply_watcher_event(&watcher::Event::Init);
    for object in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(object));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    reader
}

struct Harness {
    ctx: Arc<Context>,
    verifier: JoinHandle<()>,
}

impl Harness {
    fn new(stores: Stores, calls: Vec<Call>) -> Self {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, NS);
        let ctx = Arc::new(Context::new(client, Settings::default(), stores));
        Self { ctx, verifier: verify(handle, calls) }
    }

    /// A harness whose reconciles serve Envoys without spec.xds from the operator's control
    /// plane, trusting `trust`.
    fn served(stores: Stores, calls: Vec<Call>, trust: ControlPlaneTrust) -> Self {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, NS);
        let (_, trust) = tokio::sync::watch::channel(trust);
        let ctx = Context::new(client, Settings::default(), stores).with_control_plane(trust);
        Self { ctx: Arc::new(ctx), verifier: verify(handle, calls) }
    }

    /// Drops the client so the verifier can tell "no more requests" apart from "not yet".
    async fn finish(self) {
        drop(self.ctx);
        match tokio::time::timeout(PATIENCE, self.verifier).await {
            Ok(Ok(())) => {}
            Ok(Err(panic)) => std::panic::resume_unwind(panic.into_panic()),
            Err(_) => panic!("the verifier did not finish within {PATIENCE:?}"),
        }
    }
}

fn stores(foo_deployments: Vec<Deployment>) -> Stores {
    Stores::new(store(foo_deployments), store(vec![]), store(vec![]))
}

fn foo(deployment_name: &str, replicas: i32) -> Foo {
    let mut foo = Foo::new(
        "example-foo",
        FooSpec { deployment_name: Some(deployment_name.to_owned()), replicas: Some(replicas) },
    );
    foo.metadata.namespace = Some(NS.to_owned());
    foo.metadata.uid = Some(FOO_UID.to_owned());
    foo.metadata.generation = Some(1);
    foo
}

fn an_hour_ago() -> Time {
    Time(Timestamp::from_second(Timestamp::now().as_second() - 3600).unwrap())
}

/// `child` marked as managed by `install`.
fn marked_by<K: Resource>(mut child: K, install: &InstallId) -> K {
    install::mark(child.meta_mut(), install);
    child
}

/// `child` marked as managed by the install the harness runs as (`Settings::default()`).
fn marked<K: Resource>(child: K) -> K {
    marked_by(child, &InstallId::default())
}

/// `desired` as the API server holds it, applied by this install: defaults filled in, a uid, a
/// rolled-out status.
fn served(deployment: Deployment, available: i32) -> Deployment {
    marked(served_unmarked(deployment, available))
}

/// [`served`], as an operator from before install marks applied it.
fn served_unmarked(mut deployment: Deployment, available: i32) -> Deployment {
    deployment.metadata.uid = Some(format!("{}-uid", deployment.name_any()));
    deployment.metadata.resource_version = Some("1".into());
    deployment.metadata.generation = Some(1);
    let spec = deployment.spec.as_mut().unwrap();
    spec.revision_history_limit = Some(10);
    let pod = spec.template.spec.as_mut().unwrap();
    pod.restart_policy = Some("Always".into());
    pod.dns_policy = Some("ClusterFirst".into());
    for container in &mut pod.containers {
        container.image_pull_policy = Some("IfNotPresent".into());
        container.termination_message_path = Some("/dev/termination-log".into());
    }
    let desired = spec.replicas.unwrap_or(1);
    deployment.status = Some(DeploymentStatus {
        observed_generation: Some(1),
        replicas: Some(desired),
        updated_replicas: Some(desired),
        ready_replicas: Some(available),
        available_replicas: Some(available),
        ..Default::default()
    });
    deployment
}

fn owned_by(uid: &str, kind: &str, name: &str) -> Option<Vec<OwnerReference>> {
    Some(vec![OwnerReference {
        api_version: "samplecontroller.k8s.io/v1alpha1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }])
}

fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

// ---------------------------------------------------------------------------------------
// Foo

#[tokio::test]
async fn new_foo_costs_one_child_apply_and_one_status_write() {
    let foo = foo("web", 3);
    let parent = serde_json::to_value(&foo).unwrap();
    let harness = Harness::new(
        stores(vec![]),
        vec![
            // Not in the cache: is the name free, or taken by an object we do not watch?
            get(deployment_path("web"), not_found("web")),
            apply(deployment_path("web"), false, |body| {
                assert_eq!(body["kind"], "Deployment");
                assert_eq!(body["spec"]["replicas"], 3);
                assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], FOO_UID);
                assert_eq!(body["spec"]["template"]["spec"]["containers"][0]["image"], DEFAULT_NGINX_IMAGE);
                assert!(body.get("status").is_none());
            }),
            apply_status(foo_status_path(), parent, |body| {
                assert_eq!(body["kind"], "Foo");
                let status = &body["status"];
                assert_eq!(status["observedGeneration"], 1);
                assert_eq!(status["selector"], "app=nginx,controller=example-foo");
                assert_eq!(condition(status, "Ready")["status"], "False");
                assert_eq!(condition(status, "Progressing")["status"], "True");
            }),
            event("Normal", "Synced", "Foo synced successfully"),
        ],
    );
    let action = reconcile_foo(Arc::new(foo), harness.ctx.clone()).await.expect("reconcile");
    assert_eq!(action, Action::requeue(Settings::default().resync));
    harness.finish().await;
}

#[tokio::test]
async fn steady_state_makes_no_requests() {
    let mut foo = foo("web", 3);
    let deployment = served(desired_deployment(&rules::defaulted(foo.clone()), DEFAULT_NGINX_IMAGE), 3);
    foo.status = Some(status::foo_status(
        &rules::defaulted(foo.clone()),
        "app=nginx,controller=example-foo".into(),
        Some(&deployment),
        None,
        &an_hour_ago(),
    ));
    let harness = Harness::new(stores(vec![deployment]), vec![]);
    let ctx = harness.ctx.clone();
    let foo = Arc::new(foo);
    // A resync or an unrelated event reconciles again: still nothing to send.
    for _ in 0..3 {
        reconcile_foo(foo.clone(), ctx.clone()).await.expect("reconcile");
    }
    drop(ctx);
    harness.finish().await;
}

#[tokio::test]
async fn a_foreign_deployment_is_never_touched() {
    let foo = foo("web", 3);
    let mut foreign = served(desired_deployment(&rules::defaulted(foo.clone()), "nginx:other"), 1);
    foreign.metadata.owner_references = owned_by("someone-else", "Foo", "other-foo");
    let parent = serde_json::to_value(&foo).unwrap();
    let harness = Harness::new(
        stores(vec![foreign]),
        vec![
            event(
                "Warning",
                "ErrResourceExists",
                "Resource \"web\" already exists and is not managed by Foo",
            ),
            apply_status(foo_status_path(), parent, |body| {
                let ready = condition(&body["status"], "Ready");
                assert_eq!(ready["status"], "False");
                assert_eq!(ready["reason"], "ErrResourceExists");
                assert_eq!(ready["message"], "Resource \"web\" already exists and is not managed by Foo");
                assert_eq!(condition(&body["status"], "Degraded")["status"], "True");
            }),
        ],
    );
    let foo = Arc::new(foo);
    let error =
        reconcile_foo(foo.clone(), harness.ctx.clone()).await.expect_err("a clash is an error, retried");
    assert!(matches!(error, Error::NameClash { .. }), "{error}");
    assert_eq!(error.metric_label(), "name_clash");
    // Retried with backoff, not at a fixed pace.
    assert_eq!(
        error_policy(foo.clone(), &error, harness.ctx.clone()),
        Action::requeue(Duration::from_secs(5))
    );
    assert_eq!(error_policy(foo, &error, harness.ctx.clone()), Action::requeue(Duration::from_secs(10)));
    harness.finish().await;
}

#[tokio::test]
async fn an_unwatched_deployment_of_that_name_is_never_adopted() {
    // Created by hand: no managed-by label, so not in the cache; found by the GET.
    let foo = foo("web", 3);
    let mut foreign = served(desired_deployment(&rules::defaulted(foo.clone()), DEFAULT_NGINX_IMAGE), 1);
    foreign.metadata.owner_references = None;
    foreign.metadata.labels = None;
    let parent = serde_json::to_value(&foo).unwrap();
    let foreign = serde_json::to_value(&foreign).unwrap();
    let harness = Harness::new(
        stores(vec![]),
        vec![
            get(deployment_path("web"), (200, foreign)),
            event("Warning", "ErrResourceExists", "not managed by Foo"),
            apply_status(foo_status_path(), parent, |body| {
                assert_eq!(condition(&body["status"], "Ready")["reason"], "ErrResourceExists");
            }),
        ],
    );
    let error = reconcile_foo(Arc::new(foo), harness.ctx.clone()).await.expect_err("clash");
    assert!(matches!(error, Error::NameClash { .. }));
    harness.finish().await;
}

#[tokio::test]
async fn renaming_creates_the_new_deployment_and_deletes_the_old() {
    let old = foo("web", 3);
    let mut old_deployment =
        served(desired_deployment(&rules::defaulted(old.clone()), DEFAULT_NGINX_IMAGE), 3);
    old_deployment.metadata.uid = Some("old-deployment-uid".into());
    let mut foo = foo("web2", 3);
    foo.metadata.generation = Some(2);
    let parent = serde_json::to_value(&foo).unwrap();
    let harness = Harness::new(
        stores(vec![old_deployment]),
        vec![
            get(deployment_path("web2"), not_found("web2")),
            apply(deployment_path("web2"), false, |body| assert_eq!(body["metadata"]["name"], "web2")),
            Call::new("DELETE", deployment_path("web"), |body| {
                // Never delete a same-named replacement: only the object we saw.
                assert_eq!(body["preconditions"]["uid"], "old-deployment-uid");
                assert_eq!(body["propagationPolicy"], "Background");
                (200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}))
            }),
            event("Normal", "DeletedOldDeployment", "Deleted Deployment \"web\""),
            apply_status(foo_status_path(), parent, |body| {
                assert_eq!(body["status"]["observedGeneration"], 2)
            }),
            event("Normal", "Synced", "Foo synced successfully"),
        ],
    );
    reconcile_foo(Arc::new(foo), harness.ctx.clone()).await.expect("reconcile");
    harness.finish().await;
}

#[tokio::test]
async fn drift_is_put_back_and_nothing_else_is_written() {
    let mut foo = foo("web", 3);
    let desired = desired_deployment(&rules::defaulted(foo.clone()), DEFAULT_NGINX_IMAGE);
    let mut scaled = served(desired.clone(), 3);
    scaled.spec.as_mut().unwrap().replicas = Some(5);
    // The status already says what the corrected Deployment will give.
    let corrected = served(desired, 3);
    foo.status = Some(status::foo_status(
        &rules::defaulted(foo.clone()),
        "app=nginx,controller=example-foo".into(),
        Some(&corrected),
        None,
        &an_hour_ago(),
    ));
    let corrected = serde_json::to_value(&corrected).unwrap();
    let harness = Harness::new(
        stores(vec![scaled]),
        vec![
            Call::new("PATCH", deployment_path("web"), move |body| {
                assert_eq!(body["spec"]["replicas"], 3, "drift corrected");
                (200, corrected)
            })
            .query(&["fieldManager=envoy-operator", "force=true"]),
            event("Normal", "Synced", "Foo synced successfully"),
        ],
    );
    reconcile_foo(Arc::new(foo), harness.ctx.clone()).await.expect("reconcile");
    harness.finish().await;
}

#[tokio::test]
async fn api_errors_back_off_exponentially_and_success_resets() {
    let foo = Arc::new(foo("web", 3));
    let parent = serde_json::to_value(foo.as_ref()).unwrap();
    let unavailable = || status_body(503, "ServiceUnavailable", "etcdserver: leader changed");
    let harness = Harness::new(
        stores(vec![]),
        vec![
            get(deployment_path("web"), unavailable()),
            get(deployment_path("web"), unavailable()),
            get(deployment_path("web"), not_found("web")),
            apply(deployment_path("web"), false, |_| {}),
            apply_status(foo_status_path(), parent, |_| {}),
            event("Normal", "Synced", "synced"),
        ],
    );
    let ctx = harness.ctx.clone();
    for expected in [5, 10] {
        let error = reconcile_foo(foo.clone(), ctx.clone()).await.expect_err("503");
        assert_eq!(error.metric_label(), "api");
        let action = error_policy(foo.clone(), &error, ctx.clone());
        assert_eq!(action, Action::requeue(Duration::from_secs(expected)));
    }
    reconcile_foo(foo.clone(), ctx.clone()).await.expect("third attempt");
    assert_eq!(ctx.backoff.failures(&backoff_key(foo.as_ref())), 0, "success resets the backoff");
    drop(ctx);
    harness.finish().await;
}

#[tokio::test]
async fn conflicts_are_retried() {
    let mut foo = foo("web", 3);
    let desired = desired_deployment(&rules::defaulted(foo.clone()), DEFAULT_NGINX_IMAGE);
    let mut edited = served(desired.clone(), 3);
    edited.spec.as_mut().unwrap().template.spec.as_mut().unwrap().containers[0].image =
        Some("nginx:evil".into());
    let corrected = served(desired, 3);
    foo.status = Some(status::foo_status(
        &rules::defaulted(foo.clone()),
        "app=nginx,controller=example-foo".into(),
        Some(&corrected),
        None,
        &an_hour_ago(),
    ));
    let corrected = serde_json::to_value(&corrected).unwrap();
    let harness = Harness::new(
        stores(vec![edited]),
        vec![
            Call::new("PATCH", deployment_path("web"), |_| {
                status_body(
                    409,
                    "Conflict",
                    "Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified",
                )
            }),
            Call::new("PATCH", deployment_path("web"), move |body| {
                assert_eq!(body["spec"]["template"]["spec"]["containers"][0]["image"], DEFAULT_NGINX_IMAGE);
                (200, corrected)
            }),
            event("Normal", "Synced", "synced"),
        ],
    );
    let foo = Arc::new(foo);
    let ctx = harness.ctx.clone();
    let error = reconcile_foo(foo.clone(), ctx.clone()).await.expect_err("409");
    assert_eq!(error.metric_label(), "conflict");
    assert_eq!(error_policy(foo.clone(), &error, ctx.clone()), Action::requeue(Duration::from_secs(5)));
    reconcile_foo(foo, ctx.clone()).await.expect("retry succeeds");
    drop(ctx);
    harness.finish().await;
}

#[tokio::test]
async fn an_invalid_spec_is_degraded_without_children() {
    // Stored while the webhook was down: replicas out of range.
    let foo = foo("web", -1);
    let parent = serde_json::to_value(&foo).unwrap();
    let harness = Harness::new(
        stores(vec![]),
        vec![
            apply_status(foo_status_path(), parent, |body| {
                let degraded = condition(&body["status"], "Degraded");
                assert_eq!(degraded["status"], "True");
                assert_eq!(degraded["reason"], "InvalidSpec");
                let message = degraded["message"].as_str().unwrap();
                assert!(
                    message.starts_with("The Foo \"example-foo\" is invalid: spec.replicas"),
                    "{message}"
                );
            }),
            event("Warning", "InvalidSpec", "spec.replicas"),
        ],
    );
    let action = reconcile_foo(Arc::new(foo), harness.ctx.clone()).await.expect("not retried");
    assert_eq!(action, Action::await_change());
    harness.finish().await;
}

#[tokio::test]
async fn a_deleted_parent_is_success() {
    let foo = foo("web", 3);
    let harness = Harness::new(
        stores(vec![]),
        vec![
            get(deployment_path("web"), not_found("web")),
            apply(deployment_path("web"), false, |_| {}),
            // Deleted meanwhile: the status write finds nothing.
            Call::new("PATCH", foo_status_path(), |_| {
                status_body(404, "NotFound", "foos \"example-foo\" not found")
            }),
            event("Normal", "Synced", "synced"),
        ],
    );
    reconcile_foo(Arc::new(foo), harness.ctx.clone()).await.expect("a missing parent is success");
    harness.finish().await;
}

// ---------------------------------------------------------------------------------------
// Envoy

fn envoy(xds_port: i32) -> Envoy {
    let mut envoy = Envoy::new(
        "edge",
        EnvoySpec {
            name: Some("webserver-beta".into()),
            config_map_name: Some("envoy-cfg-1".into()),
            replicas: Some(2),
            xds: Some(XdsServer { name: None, host: "xds-service.default".into(), port: xds_port }),
            ..Default::default()
        },
    );
    envoy.metadata.namespace = Some(NS.to_owned());
    envoy.metadata.uid = Some(ENVOY_UID.to_owned());
    envoy.metadata.generation = Some(1);
    envoy
}

fn envoy_stores(envoy: &Envoy) -> Stores {
    let defaulted = rules::defaulted(envoy.clone());
    let children = desired_children(&defaulted, None);
    Stores::new(
        store(vec![served(children.deployment, 2)]),
        store(vec![marked(children.config_map)]),
        store(vec![marked(children.service)]),
    )
}

#[tokio::test]
async fn new_envoy_applies_config_map_deployment_and_service() {
    let envoy = envoy(19000);
    let parent = serde_json::to_value(&envoy).unwrap();
    let stores = Stores::new(store(vec![]), store(vec![]), store(vec![]));
    let cm = format!("/api/v1/namespaces/{NS}/configmaps/envoy-cfg-1");
    let svc = format!("/api/v1/namespaces/{NS}/services/webserver-beta");
    let harness = Harness::new(
        stores,
        vec![
            get(cm.clone(), not_found("envoy-cfg-1")),
            apply(cm, false, |body| {
                assert!(body["data"]["envoy.yaml"].as_str().unwrap().contains("xds-service.default"))
            }),
            get(deployment_path("webserver-beta"), not_found("webserver-beta")),
            apply(deployment_path("webserver-beta"), false, |body| {
                assert_eq!(body["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"], "envoy-cfg-1")
            }),
            get(svc.clone(), not_found("webserver-beta")),
            apply(svc, false, |body| {
                assert_eq!(body["spec"]["selector"]["app.kubernetes.io/instance"], "edge");
            }),
            apply_status(envoy_status_path(), parent, |body| {
                assert_eq!(body["status"]["configHash"].as_str().map(str::len), Some(16));
                assert_eq!(condition(&body["status"], "Ready")["status"], "False");
            }),
            event("Normal", "Synced", "Envoy synced successfully"),
        ],
    );
    reconcile_envoy(Arc::new(envoy), harness.ctx.clone()).await.expect("reconcile");
    harness.finish().await;
}

#[tokio::test]
async fn envoy_steady_state_makes_no_requests() {
    let mut envoy = envoy(19000);
    let stores = envoy_stores(&envoy);
    let deployment = stores.deployments.state().pop().unwrap();
    let defaulted = rules::defaulted(envoy.clone());
    let hash = desired_children(&defaulted, None).config_hash;
    envoy.status = Some(status::envoy_status(
        &rules::defaulted(envoy.clone()),
        "app.kubernetes.io/instance=edge,app.kubernetes.io/name=envoy".into(),
        Some(&deployment),
        Some(hash),
        None,
        &an_hour_ago(),
    ));
    let harness = Harness::new(stores, vec![]);
    reconcile_envoy(Arc::new(envoy), harness.ctx.clone()).await.expect("reconcile");
    harness.finish().await;
}

#[tokio::test]
async fn a_bootstrap_change_updates_the_config_map_and_rolls_the_pods() {
    let before = envoy(19000);
    let stores = envoy_stores(&before);
    let defaulted = rules::defaulted(before.clone());
    let old_hash = desired_children(&defaulted, None).config_hash;
    let mut envoy = envoy(19001);
    envoy.metadata.generation = Some(2);
    let parent = serde_json::to_value(&envoy).unwrap();
    let cm = format!("/api/v1/namespaces/{NS}/configmaps/envoy-cfg-1");
    let (hash_tx, hash_rx) = std::sync::mpsc::channel();
    let rolled_hash = old_hash.clone();
    let harness = Harness::new(
        stores,
        vec![
            apply(cm, true, |body| {
                assert!(body["data"]["envoy.yaml"].as_str().unwrap().contains("port_value: 19001"))
            }),
            apply(deployment_path("webserver-beta"), true, move |body| {
                let hash = body["spec"]["template"]["metadata"]["annotations"]
                    [labels::CONFIG_HASH_ANNOTATION]
                    .as_str()
                    .unwrap()
                    .to_owned();
                assert_ne!(hash, rolled_hash, "a new bootstrap rolls the pods");
                hash_tx.send(hash).unwrap();
            }),
            // The Service is unchanged: not sent.
            apply_status(envoy_status_path(), parent, move |body| {
                let applied = hash_rx.recv().unwrap();
                assert_eq!(body["status"]["configHash"], applied.as_str());
                assert_eq!(body["status"]["observedGeneration"], 2);
            }),
            event("Normal", "Synced", "Envoy synced successfully"),
        ],
    );
    reconcile_envoy(Arc::new(envoy), harness.ctx.clone()).await.expect("reconcile");
    harness.finish().await;
}

#[tokio::test]
async fn a_foreign_config_map_degrades_the_envoy() {
    let envoy = envoy(19000);
    let parent = serde_json::to_value(&envoy).unwrap();
    let cm = format!("/api/v1/namespaces/{NS}/configmaps/envoy-cfg-1");
    let foreign = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "envoy-cfg-1", "namespace": NS, "uid": "cm-uid"}, "data": {"app.conf": "x"}});
    let stores = Stores::new(store(vec![]), store(vec![]), store(vec![]));
    let harness = Harness::new(
        stores,
        vec![
            get(cm, (200, foreign)),
            event(
                "Warning",
                "ErrResourceExists",
                "ConfigMap Resource \"envoy-cfg-1\" already exists and is not managed by Envoy",
            ),
            apply_status(envoy_status_path(), parent, |body| {
                let degraded = condition(&body["status"], "Degraded");
                assert_eq!(degraded["status"], "True");
                assert_eq!(degraded["reason"], "ErrResourceExists");
            }),
        ],
    );
    let error = reconcile_envoy(Arc::new(envoy), harness.ctx.clone()).await.expect_err("clash");
    assert!(matches!(error, Error::NameClash { kind: "ConfigMap", .. }), "{error}");
    harness.finish().await;
}

// ---------------------------------------------------------------------------------------
// An Envoy of the operator's control plane, whose sidecars mount its CA file

fn trust(ca: &str) -> ControlPlaneTrust {
    ControlPlaneTrust {
        control_plane: ControlPlane { host: "envoy-operator-xds.ops.svc".into(), port: 18000 },
        ca_pem: Some(format!("-----BEGIN CERTIFICATE-----\n{ca}\n-----END CERTIFICATE-----\n")),
    }
}

/// An Envoy `edge` without spec.xds whose bootstrap ConfigMap is `config_map_name`.
fn served_envoy(config_map_name: &str) -> Envoy {
    let mut envoy = Envoy::new(
        "edge",
        EnvoySpec { config_map_name: Some(config_map_name.into()), replicas: Some(2), ..Default::default() },
    );
    envoy.metadata.namespace = Some(NS.to_owned());
    envoy.metadata.uid = Some(ENVOY_UID.to_owned());
    envoy.metadata.generation = Some(2);
    envoy
}

/// The children of `envoy` as the cluster holds them once applied with `trust`.
fn served_stores(envoy: &Envoy, trust: &ControlPlaneTrust) -> Stores {
    let children = desired_children(&rules::defaulted(envoy.clone()), Some(trust));
    let mut config_maps = vec![children.config_map];
    config_maps.extend(children.ca_config_map);
    for config_map in &mut config_maps {
        config_map.metadata.uid = Some(format!("{}-uid", config_map.name_any()));
    }
    let config_maps = config_maps.into_iter().map(marked).collect();
    Stores::new(
        store(vec![served(children.deployment, 2)]),
        store(config_maps),
        store(vec![marked(children.service)]),
    )
}

fn config_map_path(name: &str) -> String {
    format!("/api/v1/namespaces/{NS}/configmaps/{name}")
}

/// The pods of the fleet `edge` (its own and the sidecars naming it), each mounting `mounts`.
fn list_fleet_pods(mounts: &'static [&'static str]) -> Call {
    Call::new("GET", format!("/api/v1/namespaces/{NS}/pods"), move |_| {
        let items: Vec<Value> = mounts
            .iter()
            .enumerate()
            .map(|(i, mount)| {
                let (terminating, name) = match mount.strip_prefix("terminating:") {
                    Some(name) => (Some("2026-01-01T00:00:00Z"), name),
                    None => (None, *mount),
                };
                json!({"metadata": {"name": format!("app-{i}"), "namespace": NS, "deletionTimestamp": terminating},
                    "spec": {"containers": [], "volumes": [{"name": "envoy-xds-ca", "configMap": {"name": name}}]}})
            })
            .collect();
        (200, json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}))
    })
    .query(&["labelSelector=envoy-operator.example.com%2Ffleet%3Dedge", "limit=100"])
}

/// Changing spec.configMapName rolls the fleet onto the new bootstrap ConfigMap; the CA file
/// sidecars mount lives in `edge-xds-ca`, which the rename leaves in place. Sidecars injected
/// before it existed mount the old bootstrap ConfigMap: while a pod does, it is kept and given
/// the current CA (here just rotated), never deleted from under it.
#[tokio::test]
async fn a_config_map_rename_keeps_what_sidecars_mount() {
    let before = served_envoy("edge-cfg-1");
    let stores = served_stores(&before, &trust("OLD"));
    let envoy = served_envoy("edge-cfg-2");
    let parent = serde_json::to_value(&envoy).unwrap();
    let calls = vec![
        get(config_map_path("edge-cfg-2"), not_found("edge-cfg-2")),
        apply(config_map_path("edge-cfg-2"), false, |body| {
            assert!(body["data"]["xds-ca.yaml"].as_str().unwrap().contains("NEW"));
        }),
        // The sidecars' CA ConfigMap: the same name, the new CA.
        apply(config_map_path("edge-xds-ca"), true, |body| {
            let data = body["data"].as_object().unwrap();
            assert_eq!(data.keys().collect::<Vec<_>>(), ["xds-ca.yaml"]);
            assert!(data["xds-ca.yaml"].as_str().unwrap().contains("NEW"));
        }),
        apply(deployment_path("edge"), true, |body| {
            assert_eq!(body["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"], "edge-cfg-2");
        }),
        // An old sidecar mounts edge-cfg-1: kept, with the new CA file, and nothing else changed.
        list_fleet_pods(&["edge-cfg-1", "edge-xds-ca"]),
        Call::new("PATCH", config_map_path("edge-cfg-1"), |body| {
            let data = body["data"].as_object().unwrap();
            assert_eq!(data.keys().collect::<Vec<_>>(), ["xds-ca.yaml"], "only the CA file");
            assert!(data["xds-ca.yaml"].as_str().unwrap().contains("NEW"));
            (200, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "edge-cfg-1"}}))
        }),
        apply_status(envoy_status_path(), parent, |_| {}),
        event("Normal", "Synced", "Envoy synced successfully"),
    ];
    let harness = Harness::served(stores, calls, trust("NEW"));
    reconcile_envoy(Arc::new(envoy), harness.ctx.clone()).await.expect("reconcile");
    harness.finish().await;
}

/// Once no running pod mounts the old bootstrap ConfigMap (one terminating does not count), it
/// is deleted; the sidecars' CA ConfigMap never is.
#[tokio::test]
async fn an_old_bootstrap_config_map_no_pod_mounts_is_deleted() {
    let before = served_envoy("edge-cfg-1");
    let stores = served_stores(&before, &trust("CA"));
    let envoy = served_envoy("edge-cfg-2");
    let parent = serde_json::to_value(&envoy).unwrap();
    let calls = vec![
        get(config_map_path("edge-cfg-2"), not_found("edge-cfg-2")),
        apply(config_map_path("edge-cfg-2"), false, |_| {}),
        apply(deployment_path("edge"), true, |_| {}),
        list_fleet_pods(&["edge-xds-ca", "terminating:edge-cfg-1"]),
        Call::new("DELETE", config_map_path("edge-cfg-1"), |body| {
            assert_eq!(body["preconditions"]["uid"], "edge-cfg-1-uid");
            (200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}))
        }),
        event("Normal", "DeletedOldChild", "Deleted \"edge-cfg-1\""),
        apply_status(envoy_status_path(), parent, |_| {}),
        event("Normal", "Synced", "Envoy synced successfully"),
    ];
    let harness = Harness::served(stores, calls, trust("CA"));
    reconcile_envoy(Arc::new(envoy), harness.ctx.clone()).await.expect("reconcile");
    harness.finish().await;
}

// ---------------------------------------------------------------------------------------
// One writer per object: another install of the operator watching the same namespace

/// The other install of these tests (a namespaced install beside the cluster-wide one).
fn other_install() -> InstallId {
    InstallId::of_namespace("team-ops")
}

/// A server-side apply of the `ManagedElsewhere` condition, under the field manager installs
/// share for it; the answer is the parent with the condition added.
fn apply_standby(path: String, parent: Value, check: impl FnOnce(&Value) + Send + 'static) -> Call {
    Call::new("PATCH", path, move |body| {
        check(&body);
        let mut parent = parent;
        let mut conditions = parent["status"]["conditions"].as_array().cloned().unwrap_or_default();
        conditions.retain(|condition| condition["type"] != MANAGED_ELSEWHERE);
        conditions.extend(body["status"]["conditions"].as_array().cloned().unwrap_or_default());
        parent["status"]["conditions"] = json!(conditions);
        (200, parent)
    })
    .query(&["fieldManager=envoy-operator-standby", "force=true"])
}

/// The body of a standby apply says one thing: the condition, naming `manager`.
fn only_the_condition(body: &Value, status: &str, reason: &str, manager: &InstallId) -> Condition {
    let status_fields = body["status"].as_object().map(|fields| fields.keys().cloned().collect::<Vec<_>>());
    assert_eq!(status_fields, Some(vec!["conditions".to_owned()]), "nothing but the condition: {body}");
    let conditions = body["status"]["conditions"].as_array().expect("conditions");
    assert_eq!(conditions.len(), 1, "{body}");
    let condition: Condition = serde_json::from_value(conditions[0].clone()).expect("a condition");
    assert_eq!(condition.type_, MANAGED_ELSEWHERE);
    assert_eq!((condition.status.as_str(), condition.reason.as_str()), (status, reason));
    assert!(condition.message.contains(&format!("{:?}", manager.as_str())), "{}", condition.message);
    condition
}

/// A Deployment of the Foo applied by the other install (its own nginx image), and the Foo's
/// status as that install wrote it.
fn foo_of_the_other_install() -> (Foo, Deployment) {
    let mut foo = foo("web", 3);
    let theirs = desired_deployment(&rules::defaulted(foo.clone()), "nginx:theirs");
    let theirs = marked_by(served_unmarked(theirs, 3), &other_install());
    foo.status = Some(status::foo_status(
        &rules::defaulted(foo.clone()),
        "app=nginx,controller=example-foo".into(),
        Some(&theirs),
        None,
        &an_hour_ago(),
    ));
    (foo, theirs)
}

#[tokio::test]
async fn a_foo_another_install_manages_is_left_to_it_with_an_event_and_a_condition() {
    let (mut foo, theirs) = foo_of_the_other_install();
    let parent = serde_json::to_value(&foo).unwrap();
    let written = Arc::new(std::sync::Mutex::new(None));
    let seen = written.clone();
    let harness = Harness::new(
        stores(vec![theirs.clone()]),
        vec![
            // No write to the Deployment (its image is not ours), none of the install's status.
            apply_standby(foo_status_path(), parent, move |body| {
                let condition =
                    only_the_condition(body, "True", install::REASON_OTHER_INSTALL, &other_install());
                assert_eq!(condition.observed_generation, Some(1));
                *seen.lock().unwrap() = Some(condition);
            }),
            event(
                "Warning",
                "ManagedElsewhere",
                "install \"envoy-operator/envoy-operator-leader\" leaves this Foo to the install \"team-ops/envoy-operator-leader\"",
            ),
        ],
    );
    let ctx = harness.ctx.clone();
    let action = reconcile_foo(Arc::new(foo.clone()), ctx.clone()).await.expect("standing aside is no error");
    assert_eq!(action, Action::requeue(Settings::default().resync));

    // Read back with the condition: reconciling again, however often, writes nothing.
    let condition = written.lock().unwrap().take().expect("the condition was written");
    foo.status.as_mut().unwrap().conditions.push(condition);
    let foo = Arc::new(foo);
    for _ in 0..3 {
        reconcile_foo(foo.clone(), ctx.clone()).await.expect("reconcile");
    }
    drop(ctx);
    harness.finish().await;
}

#[tokio::test]
async fn the_managing_install_leaves_the_other_installs_condition_alone_at_rest() {
    let mut foo = foo("web", 3);
    let ours = served(desired_deployment(&rules::defaulted(foo.clone()), DEFAULT_NGINX_IMAGE), 3);
    let mut status = status::foo_status(
        &rules::defaulted(foo.clone()),
        "app=nginx,controller=example-foo".into(),
        Some(&ours),
        None,
        &an_hour_ago(),
    );
    // What the other install, standing aside, wrote: naming this one.
    let theirs = install::standby_condition(
        &[],
        Some(1),
        &other_install(),
        InstallId::default().as_str(),
        &an_hour_ago(),
    );
    status.conditions.extend(theirs);
    foo.status = Some(status);
    let harness = Harness::new(stores(vec![ours]), vec![]);
    let foo = Arc::new(foo);
    for _ in 0..3 {
        reconcile_foo(foo.clone(), harness.ctx.clone()).await.expect("reconcile");
    }
    harness.finish().await;
}

#[tokio::test]
async fn a_child_from_before_install_marks_is_adopted_with_one_apply() {
    let mut foo = foo("web", 3);
    let desired = desired_deployment(&rules::defaulted(foo.clone()), DEFAULT_NGINX_IMAGE);
    let unmarked = served_unmarked(desired.clone(), 3);
    assert_eq!(install::manager(&unmarked.metadata, &InstallId::default()), install::Manager::Unmarked);
    let adopted = served(desired, 3);
    foo.status = Some(status::foo_status(
        &rules::defaulted(foo.clone()),
        "app=nginx,controller=example-foo".into(),
        Some(&adopted),
        None,
        &an_hour_ago(),
    ));
    let adopted = serde_json::to_value(&adopted).unwrap();
    let harness = Harness::new(
        stores(vec![unmarked]),
        vec![
            Call::new("PATCH", deployment_path("web"), move |body| {
                assert_eq!(
                    body["metadata"]["annotations"][envoy_operator_core::names::INSTALL_ANNOTATION],
                    "envoy-operator/envoy-operator-leader"
                );
                (200, adopted)
            })
            .query(&["fieldManager=envoy-operator", "force=true"]),
            event("Normal", "Synced", "Foo synced successfully"),
        ],
    );
    reconcile_foo(Arc::new(foo), harness.ctx.clone()).await.expect("reconcile");
    harness.finish().await;
}

/// The other install is gone and its marks were removed (the documented hand-over): this one
/// adopts the child, and turns the condition that named the other install to name itself.
#[tokio::test]
async fn an_install_taking_over_corrects_the_condition_naming_the_other() {
    let (mut foo, theirs) = foo_of_the_other_install();
    let mut unmarked = theirs;
    unmarked.metadata.annotations = None;
    let stale = install::standby_condition(
        &[],
        Some(1),
        &InstallId::default(),
        other_install().as_str(),
        &an_hour_ago(),
    );
    foo.status.as_mut().unwrap().conditions.extend(stale);
    let parent = serde_json::to_value(&foo).unwrap();
    let ours = serde_json::to_value(served(
        desired_deployment(&rules::defaulted(foo.clone()), DEFAULT_NGINX_IMAGE),
        3,
    ))
    .unwrap();
    let harness = Harness::new(
        stores(vec![unmarked]),
        vec![
            Call::new("PATCH", deployment_path("web"), move |body| {
                assert_eq!(body["spec"]["template"]["spec"]["containers"][0]["image"], DEFAULT_NGINX_IMAGE);
                (200, ours)
            })
            .query(&["fieldManager=envoy-operator", "force=true"]),
            apply_standby(foo_status_path(), parent, |body| {
                only_the_condition(body, "False", install::REASON_THIS_INSTALL, &InstallId::default());
            }),
            event("Normal", "Synced", "Foo synced successfully"),
        ],
    );
    reconcile_foo(Arc::new(foo), harness.ctx.clone()).await.expect("reconcile");
    harness.finish().await;
}

#[tokio::test]
async fn an_envoy_whose_config_map_another_install_marked_is_left_to_it() {
    let envoy = served_envoy("edge-cfg-1");
    // Applied by the other install, with its control plane's CA.
    let children = desired_children(&rules::defaulted(envoy.clone()), Some(&trust("THEIRS")));
    let theirs = other_install();
    let mut config_maps = vec![marked_by(children.config_map, &theirs)];
    config_maps.extend(children.ca_config_map.map(|ca| marked_by(ca, &theirs)));
    let stores = Stores::new(
        store(vec![marked_by(served_unmarked(children.deployment, 2), &theirs)]),
        store(config_maps),
        store(vec![marked_by(children.service, &theirs)]),
    );
    let parent = serde_json::to_value(&envoy).unwrap();
    let calls = vec![
        apply_standby(envoy_status_path(), parent, |body| {
            only_the_condition(body, "True", install::REASON_OTHER_INSTALL, &other_install());
        }),
        event(
            "Warning",
            "ManagedElsewhere",
            "leaves this Envoy to the install \"team-ops/envoy-operator-leader\"",
        ),
    ];
    let harness = Harness::served(stores, calls, trust("OURS"));
    reconcile_envoy(Arc::new(envoy), harness.ctx.clone()).await.expect("standing aside is no error");
    harness.finish().await;
}

// ---------------------------------------------------------------------------------------
// EnvoyRoute

fn route_status_path() -> String {
    format!("/apis/example.com/v1/namespaces/{NS}/envoyroutes/shop/status")
}

/// The route `shop`, attached to the Envoy `edge` and sending everything to `web:80`.
fn route() -> EnvoyRoute {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "EnvoyRoute",
        "metadata": {"name": "shop", "namespace": NS, "uid": "route-uid", "generation": 4},
        "spec": {"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}
    }))
    .expect("a route")
}

fn web_service() -> Service {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": NS}, "spec": {"ports": [{"port": 80}]}}))
    .expect("a Service")
}

/// A route context over filled caches holding `envoys` and `services`, and the outcome of
/// [`route`] as the publisher's translation of the namespace makes it, sharing `harness`'s
/// client. Drop it before `harness.finish()`.
fn route_context(harness: &Harness, envoys: Vec<Envoy>, services: Vec<Service>) -> Arc<RouteContext> {
    let defaulted: Vec<_> = envoys.iter().cloned().map(rules::defaulted).collect();
    let shared: Vec<_> = services.iter().cloned().map(Arc::new).collect();
    let translated = translate_namespace(&NamespaceInputs {
        envoys: &defaulted,
        routes: &[Arc::new(route())],
        services: &shared,
        endpoint_slices: &[],
        rejected: envoy_operator_core::fleet::isolate::Rejections::none(),
    });
    let outcomes = RouteOutcomes::default();
    outcomes.replace_namespace(NS, translated.routes);
    let caches = RouteCaches { envoys: store(envoys), services: store(services), outcomes };
    Arc::new(RouteContext { shared: harness.ctx.clone(), caches })
}

#[tokio::test]
async fn a_route_status_is_written_once_and_not_again_while_nothing_changes() {
    let route = route();
    let written = Arc::new(std::sync::Mutex::new(Value::Null));
    let seen = written.clone();
    let harness = Harness::new(
        stores(vec![]),
        vec![apply_status(route_status_path(), serde_json::to_value(&route).unwrap(), move |body| {
            assert_eq!(body["kind"], "EnvoyRoute");
            *seen.lock().unwrap() = body["status"].clone();
        })],
    );
    let ctx = route_context(&harness, vec![envoy(19000)], vec![web_service()]);
    let action = reconcile_route(Arc::new(route.clone()), ctx.clone()).await.expect("reconcile");
    assert_eq!(action, Action::requeue(Settings::default().resync));

    let status = written.lock().unwrap().clone();
    let parent = &status["parents"][0];
    assert_eq!(parent["parentRef"], json!({"name": "edge"}));
    assert_eq!(parent["controllerName"], "example.com/envoy-operator");
    assert_eq!(condition(parent, "Accepted")["status"], "True");
    assert_eq!(condition(parent, "Accepted")["observedGeneration"], 4);
    assert_eq!(condition(parent, "ResolvedRefs")["status"], "True");

    // The route as the watch brings it back: reconciling it again (a resync, an unrelated
    // event), even seconds later, sends nothing.
    let mut current = route;
    current.status = Some(serde_json::from_value(status).expect("the written status"));
    let current = Arc::new(current);
    for _ in 0..3 {
        reconcile_route(current.clone(), ctx.clone()).await.expect("reconcile");
    }
    drop(ctx);
    harness.finish().await;
}

#[tokio::test]
async fn a_failed_route_status_write_backs_off_like_the_other_kinds() {
    let route = Arc::new(route());
    let unavailable = || status_body(503, "ServiceUnavailable", "etcdserver: leader changed");
    let harness = Harness::new(
        stores(vec![]),
        vec![
            Call::new("PATCH", route_status_path(), move |_| unavailable()),
            apply_status(route_status_path(), serde_json::to_value(route.as_ref()).unwrap(), |body| {
                // No Envoy and no Service in the caches.
                let parent = &body["status"]["parents"][0];
                assert_eq!(condition(parent, "Accepted")["reason"], "NoMatchingParent");
                assert_eq!(condition(parent, "ResolvedRefs")["reason"], "BackendNotFound");
            }),
            // Once written, the route's refusal is told (its first status, and a bad one).
            event("Warning", "NoMatchingParent", "Accepted"),
            event("Warning", "BackendNotFound", "ResolvedRefs"),
        ],
    );
    let ctx = route_context(&harness, vec![], vec![]);
    let error = reconcile_route(route.clone(), ctx.clone()).await.expect_err("503");
    assert_eq!(error.metric_label(), "api");
    assert_eq!(
        route_error_policy(route.clone(), &error, ctx.clone()),
        Action::requeue(Duration::from_secs(5))
    );
    reconcile_route(route.clone(), ctx.clone()).await.expect("second attempt");
    assert_eq!(ctx.shared.backoff.failures(&backoff_key(route.as_ref())), 0, "success resets the backoff");
    drop(ctx);
    harness.finish().await;
}

#[tokio::test]
async fn a_route_of_an_envoy_another_install_manages_is_left_to_it() {
    let edge = envoy(19000);
    let service = desired_children(&rules::defaulted(edge.clone()), None).service;
    let theirs = marked_by(service, &other_install());
    // Not a single request: the status is the other install's to write.
    let harness = Harness::new(stores(vec![]), vec![]);
    let ctx = route_context(&harness, vec![edge], vec![web_service(), theirs]);
    let action = reconcile_route(Arc::new(route()), ctx.clone()).await.expect("reconcile");
    assert_eq!(action, Action::requeue(Settings::default().resync));
    drop(ctx);
    harness.finish().await;
}

// ---------------------------------------------------------------------------------------
// Two installs over one namespace: whole controllers against the in-memory API server

/// Owner (field manager) of each condition entry, by (object path, condition type).
type ConditionOwners = Arc<std::sync::Mutex<std::collections::HashMap<(String, String), String>>>;

/// One install of the operator: its controllers, and every write it made.
struct Install {
    id: InstallId,
    nginx_image: &'static str,
    writes: Arc<std::sync::Mutex<Vec<Value>>>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: JoinHandle<Result<(), Error>>,
    _trust: tokio::sync::watch::Sender<ControlPlaneTrust>,
}

impl Install {
    /// The controllers of the install `namespace/envoy-operator-leader`, watching `watched` (all
    /// namespaces when `None`), with their own nginx image and control plane CA, as two installs
    /// differ.
    fn start(
        api: &FakeApi,
        owners: &ConditionOwners,
        namespace: &str,
        watched: Option<&str>,
        nginx_image: &'static str,
        ca: &str,
    ) -> Self {
        let id = InstallId::of_namespace(namespace);
        let writes = Arc::default();
        let client = install_client(api, owners.clone(), Arc::clone(&writes));
        let config = envoy_operator::controller::ControllerConfig {
            namespace: watched.map(str::to_owned),
            concurrency: 2,
            settings: Settings {
                nginx_image: nginx_image.to_owned(),
                install: id.clone(),
                ..Settings::default()
            },
            xds_reports_namespace: None,
        };
        let (trust_tx, trust_rx) = tokio::sync::watch::channel(trust(ca));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async {
            let _ = stopped.await;
        };
        let task = tokio::spawn(envoy_operator::controller::run(client, config, shutdown, move |ctx| {
            ctx.with_control_plane(trust_rx)
        }));
        Self { id, nginx_image, writes, stop, task, _trust: trust_tx }
    }

    fn write_count(&self) -> usize {
        self.writes.lock().unwrap().len()
    }

    /// The Warning events this install recorded about `kind`s as standing aside.
    fn standing_aside_events(&self, kind: &str) -> Vec<Value> {
        let writes = self.writes.lock().unwrap();
        writes
            .iter()
            .filter(|write| {
                write["method"] == "POST" && write["path"].as_str().is_some_and(|p| p.ends_with("/events"))
            })
            .map(|write| write["body"].clone())
            .filter(|event| event["reason"] == "ManagedElsewhere" && event["regarding"]["kind"] == kind)
            .collect()
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let stopped = tokio::time::timeout(PATIENCE, self.task).await;
        assert!(matches!(stopped, Ok(Ok(Ok(())))), "the controllers stop cleanly: {stopped:?}");
    }
}

/// A client of `api` that records every write it sends in `writes`, and applies status as the
/// real API server does where the in-memory one cannot (it merges JSON, replacing lists):
/// `conditions` is a map keyed by `type` whose entries belong to the field manager that applied
/// them, so an apply leaves the entries of other managers and drops only its own it omits.
fn install_client(
    api: &FakeApi,
    owners: ConditionOwners,
    writes: Arc<std::sync::Mutex<Vec<Value>>>,
) -> Client {
    let (api, inner) = (api.clone(), api.client());
    let service = tower::service_fn(move |request: Request<Body>| {
        let (api, inner, owners, writes) = (api.clone(), inner.clone(), owners.clone(), writes.clone());
        async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.expect("a readable request body");
            let (method, path) = (parts.method.as_str().to_owned(), parts.uri.path().to_owned());
            let query = parts.uri.query().unwrap_or_default().to_owned();
            let sent: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if method != "GET" {
                writes
                    .lock()
                    .unwrap()
                    .push(json!({"method": method, "path": path, "query": query, "body": sent}));
            }
            let content_type =
                parts.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
            if method == "PATCH"
                && path.ends_with("/status")
                && content_type.starts_with("application/apply-patch")
            {
                let manager =
                    query.split('&').find_map(|q| q.strip_prefix("fieldManager=")).unwrap_or_default();
                return Ok(apply_status_by_manager(&api, &owners, &path, manager, &sent));
            }
            inner.send(Request::from_parts(parts, Body::from(bytes.to_vec()))).await
        }
    });
    Client::new(service, NS)
}

fn apply_status_by_manager(
    api: &FakeApi,
    owners: &ConditionOwners,
    path: &str,
    manager: &str,
    sent: &Value,
) -> Response<Body> {
    let respond = |code: u16, body: &Value| {
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(body).expect("JSON")))
            .expect("a response")
    };
    let object_path = path.trim_end_matches("/status");
    let Some(mut object) = api.get(object_path) else {
        return respond(404, &status_body(404, "NotFound", "not found").1);
    };
    let mut status = object["status"].as_object().cloned().unwrap_or_default();
    let mut applied = sent["status"].as_object().cloned().unwrap_or_default();
    let sent_conditions =
        applied.remove("conditions").and_then(|c| c.as_array().cloned()).unwrap_or_default();
    let mut conditions = status.remove("conditions").and_then(|c| c.as_array().cloned()).unwrap_or_default();
    let mut owners = owners.lock().unwrap();
    let key = |condition: &Value| {
        (object_path.to_owned(), condition["type"].as_str().unwrap_or_default().to_owned())
    };
    conditions.retain(|condition| {
        sent_conditions.iter().any(|sent| sent["type"] == condition["type"])
            || owners.get(&key(condition)).is_none_or(|owner| owner != manager)
    });
    for condition in sent_conditions {
        owners.insert(key(&condition), manager.to_owned());
        match conditions.iter_mut().find(|kept| kept["type"] == condition["type"]) {
            Some(kept) => *kept = condition,
            None => conditions.push(condition),
        }
    }
    status.extend(applied);
    if !conditions.is_empty() {
        status.insert("conditions".into(), json!(conditions));
    }
    object["status"] = Value::Object(status);
    api.put(object_path, object);
    respond(200, &api.get(object_path).expect("just stored"))
}

/// Waits until neither install has written anything for a while; fails if they never stop.
async fn settled(installs: &[&Install]) {
    let total = || installs.iter().map(|install| install.write_count()).sum::<usize>();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut last = (total(), tokio::time::Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = (total(), tokio::time::Instant::now());
        if now.0 != last.0 {
            last = now;
        } else if now.1 - last.1 >= Duration::from_secs(1) {
            return;
        }
        assert!(now.1 < deadline, "the installs still write after 30 s: {} writes", now.0);
    }
}

/// A namespaced install beside a cluster-wide one, each with its own CA and nginx image (what
/// made them rewrite each other's children about 30 times a second): each parent ends up with
/// one install writing, the other standing aside with one Warning event and the
/// `ManagedElsewhere` condition naming the first, and at rest nobody writes anything. The Foo's
/// Deployment comes from an operator from before install marks: adopted by one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_installs_over_one_namespace_converge_to_one_writer() {
    let api = FakeApi::new();
    let foo_at = format!("/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{NS}/foos/example-foo");
    let envoy_at = format!("/apis/example.com/v1/namespaces/{NS}/envoys/edge");
    let mut parent = serde_json::to_value(foo("web", 3)).unwrap();
    parent["metadata"]["uid"].take();
    api.put(&foo_at, parent);
    let stored: Foo = serde_json::from_value(api.get(&foo_at).unwrap()).unwrap();
    let old = served_unmarked(desired_deployment(&rules::defaulted(stored), "nginx:old"), 3);
    api.put(&deployment_path("web"), serde_json::to_value(old).unwrap());
    let mut parent = serde_json::to_value(served_envoy("edge-cfg-1")).unwrap();
    parent["metadata"]["uid"].take();
    api.put(&envoy_at, parent);

    // A route to the Envoy: its status is written too, by one install at rest.
    let route_at = format!("/apis/example.com/v1/namespaces/{NS}/envoyroutes/shop");
    let mut shop = serde_json::to_value(route()).unwrap();
    shop["metadata"]["uid"].take();
    api.put(&route_at, shop);
    api.put(&format!("/api/v1/namespaces/{NS}/services/web"), serde_json::to_value(web_service()).unwrap());

    let owners = ConditionOwners::default();
    let namespaced = Install::start(&api, &owners, "team-ops", Some(NS), "nginx:team", "TEAM-CA");
    let cluster_wide = Install::start(&api, &owners, "envoy-operator", None, "nginx:cluster", "CLUSTER-CA");
    settled(&[&namespaced, &cluster_wide]).await;

    // At rest: not one write, by either, however long.
    let before = (namespaced.write_count(), cluster_wide.write_count());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = (namespaced.write_count(), cluster_wide.write_count());
    assert_eq!(after, before, "writes at rest (namespaced, cluster-wide)");

    let installs = [&namespaced, &cluster_wide];
    let by_id =
        |id: &str| installs.into_iter().find(|install| install.id.as_str() == id).expect("an install's mark");
    let mark = |path: &str| {
        let child = api.get(path).unwrap_or_else(|| panic!("{path} exists"));
        child["metadata"]["annotations"][envoy_operator_core::names::INSTALL_ANNOTATION]
            .as_str()
            .unwrap_or_else(|| panic!("{path} is marked: {child}"))
            .to_owned()
    };

    // The Foo: its Deployment is the writer's, image and all; the other stood aside.
    let writer = by_id(&mark(&deployment_path("web")));
    let aside = installs.into_iter().find(|install| install.id != writer.id).unwrap();
    let deployment = api.get(&deployment_path("web")).unwrap();
    assert_eq!(deployment["spec"]["template"]["spec"]["containers"][0]["image"], writer.nginx_image);
    let foo = api.get(&foo_at).unwrap();
    let standby = condition(&foo["status"], MANAGED_ELSEWHERE);
    assert_eq!((&standby["status"], &standby["reason"]), (&json!("True"), &json!("OtherInstall")), "{foo}");
    assert!(standby["message"].as_str().unwrap().contains(writer.id.as_str()), "{standby}");
    assert!(condition(&foo["status"], "Ready").is_object(), "the writer's status stays: {foo}");
    assert!(!aside.standing_aside_events("Foo").is_empty(), "the install standing aside says so");
    assert!(writer.standing_aside_events("Foo").is_empty());

    // The Envoy: every child carries one mark, and the bootstrap its CA.
    let config_map = config_map_path("edge-cfg-1");
    let writer = by_id(&mark(&config_map));
    for child in [
        config_map_path("edge-xds-ca"),
        deployment_path("edge"),
        format!("/api/v1/namespaces/{NS}/services/edge"),
    ] {
        assert_eq!(mark(&child), writer.id.as_str(), "{child}");
    }
    let ca = if writer.id == namespaced.id { "TEAM-CA" } else { "CLUSTER-CA" };
    let bootstrap = api.get(&config_map).unwrap();
    assert!(bootstrap["data"]["xds-ca.yaml"].as_str().unwrap().contains(ca), "{bootstrap}");
    let aside = installs.into_iter().find(|install| install.id != writer.id).unwrap();
    let envoy = api.get(&envoy_at).unwrap();
    let standby = condition(&envoy["status"], MANAGED_ELSEWHERE);
    assert_eq!(standby["status"], "True", "{envoy}");
    assert!(standby["message"].as_str().unwrap().contains(writer.id.as_str()), "{standby}");
    let events = aside.standing_aside_events("Envoy");
    assert!(!events.is_empty(), "the install standing aside says so");
    assert!(events[0]["note"].as_str().unwrap().contains(aside.id.as_str()), "{}", events[0]);
    assert!(writer.standing_aside_events("Envoy").is_empty());
    let shop = api.get(&route_at).unwrap();
    assert_eq!(condition(&shop["status"]["parents"][0], "Accepted")["status"], "True", "{shop}");

    namespaced.stop().await;
    cluster_wide.stop().await;
}

/// A fleet of the operator's control plane is issued its identity Secret (its xDS client
/// certificate) before the Deployment whose pods mount it, and the Deployment records what was
/// issued; with that record, a reconcile issues nothing more until the CA changes.
#[tokio::test]
async fn a_fleet_gets_its_identity_before_its_pods_and_again_only_when_the_ca_changes() {
    let envoy = served_envoy("edge-cfg");
    let trust = trust("CA");
    let stores = served_stores(&envoy, &trust);
    let ca = IdentityCa::generate(time::OffsetDateTime::now_utc()).unwrap();
    let fingerprint = ca.fingerprint().to_owned();
    let recorded = Arc::new(std::sync::Mutex::new(None::<Value>));
    let keep = recorded.clone();
    let calls = vec![
        apply(format!("/api/v1/namespaces/{NS}/secrets/edge-xds-identity"), true, |body| {
            assert_eq!(body["type"], "kubernetes.io/tls");
            assert_eq!(body["metadata"]["labels"][names::XDS_IDENTITY_SECRET_LABEL], "edge");
            assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], ENVOY_UID);
            assert!(body["data"][identity::SDS_KEY].is_string(), "the SDS file proxies read");
        }),
        apply(deployment_path("edge"), true, move |body| {
            let record = &body["metadata"]["annotations"][names::XDS_IDENTITY_ISSUED_ANNOTATION];
            assert!(record.as_str().is_some_and(|r| r.starts_with(&fingerprint)), "{record}");
            *keep.lock().unwrap() = Some(body.clone());
        }),
        apply_status(envoy_status_path(), serde_json::to_value(&envoy).unwrap(), |_| {}),
        event("Normal", "Synced", "Envoy synced successfully"),
    ];
    let harness = Harness::served(stores, calls, trust.clone());
    let (_, issuer) = tokio::sync::watch::channel(Arc::new(ca.clone()));
    let ctx = Arc::new(Arc::into_inner(harness.ctx).unwrap().with_identity_issuer(issuer.clone()));
    let harness = Harness { ctx, ..harness };
    reconcile_envoy(Arc::new(envoy.clone()), harness.ctx.clone()).await.expect("reconcile");
    harness.finish().await;

    // The Deployment as applied, with its record: nothing is due.
    let applied: Deployment = serde_json::from_value(recorded.lock().unwrap().clone().unwrap()).unwrap();
    let with_record = |stores: Stores| {
        Stores::new(store(vec![served(applied.clone(), 2)]), stores.config_maps, stores.services)
    };
    // (Its status is written again: this Envoy comes without one.)
    let parent = serde_json::to_value(&envoy).unwrap();
    let harness = Harness::served(
        with_record(served_stores(&envoy, &trust)),
        vec![apply_status(envoy_status_path(), parent.clone(), |_| {})],
        trust.clone(),
    );
    let ctx = Arc::new(Arc::into_inner(harness.ctx).unwrap().with_identity_issuer(issuer.clone()));
    let harness = Harness { ctx, ..harness };
    reconcile_envoy(Arc::new(envoy.clone()), harness.ctx.clone()).await.expect("reconcile");
    harness.finish().await;

    // A rotated CA: the fleet is issued a certificate of the new one.
    let rotated = ca.rotated(time::OffsetDateTime::now_utc()).unwrap();
    let (_, issuer) = tokio::sync::watch::channel(Arc::new(rotated));
    let harness = Harness::served(
        with_record(served_stores(&envoy, &trust)),
        vec![
            apply(format!("/api/v1/namespaces/{NS}/secrets/edge-xds-identity"), true, |_| {}),
            apply(deployment_path("edge"), true, |_| {}),
            apply_status(envoy_status_path(), parent.clone(), |_| {}),
            event("Normal", "Synced", ""),
        ],
        trust,
    );
    let ctx = Arc::new(Arc::into_inner(harness.ctx).unwrap().with_identity_issuer(issuer));
    let harness = Harness { ctx, ..harness };
    reconcile_envoy(Arc::new(envoy), harness.ctx.clone()).await.expect("reconcile");
    harness.finish().await;
}
