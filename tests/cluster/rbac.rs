//! Least privilege you can check: the whole operator (`run`: certificates, leader election,
//! the controllers, the injector's Envoy cache, the xDS reports written and read) runs against an in-memory API server through
//! everything that needs a permission — creating, renaming and pruning children, a route's status, a name clash
//! with events, a certificate rotation, a deleted certificate Secret, a graceful handover, the
//! Gateway API's statuses and a Gateway's fleet applied and deleted — and
//! every request it made is replayed against the RBAC of the install: a request no rule allows
//! fails the test, and so does a rule no request used. Once for the cluster-wide install
//! (`deploy/`), once for the namespaced one (`deploy-namespaced/`, `--watch-namespace`).
//!
//! The requests of the mock-API tests (`tests/cluster/reconcile.rs`, the certificate tests) are checked
//! against the cluster-wide install as they are made.

use std::net::SocketAddr;
use std::time::Duration;

use envoy_operator::certs::identity_ca::IdentityCa;
use envoy_operator::controller::{ControllerConfig, Settings};
use envoy_operator::operator::{self, CertMode, RunConfig};
use envoy_operator::webhook::serve::WebhookConfig;
use envoy_operator::xds::control_plane::XdsConfig;
use envoy_operator_core::bootstrap::ControlPlane;
use envoy_operator_core::inject::InjectConfig;
use envoy_operator_core::names::{CONTROLLER_NAME, XDS_IDENTITY_CA_SECRET as IDENTITY_CA_SECRET};
use envoy_operator_testkit::fake_api::FakeApi;
use envoy_operator_testkit::rbac::{self, Access, Install};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// Guards against hangs; never part of an assertion about speed.
const HANG_GUARD: Duration = Duration::from_secs(60);
const OPERATOR_NS: &str = "envoy-operator";
const SECRET: &str = "/api/v1/namespaces/envoy-operator/secrets/envoy-operator-webhook-tls";
const GATEWAY_CLASS: &str = "/apis/gateway.networking.k8s.io/v1/gatewayclasses/envoy-operator";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/envoy-operator";
const VALIDATING: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/envoy-operator";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_wide_run_needs_exactly_the_cluster_wide_rbac() {
    let accesses = run_everything("apps", None).await;
    assert_exactly_allowed(&rbac::cluster_wide(), &accesses, "deploy/rbac.yaml");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_run_needs_exactly_the_namespaced_rbac() {
    let (install, watched) = rbac::namespaced();
    let accesses = run_everything(&watched, Some(&watched)).await;
    assert_exactly_allowed(&install, &accesses, "deploy-namespaced/");
}

fn assert_exactly_allowed(install: &Install, accesses: &[Access], what: &str) {
    let (denied, unused) = install.replay(accesses);
    let list = |items: Vec<String>| items.iter().map(|i| format!("\n  {i}")).collect::<String>();
    assert!(
        denied.is_empty(),
        "{what} does not allow requests the operator makes:{}",
        list(denied.iter().map(ToString::to_string).collect())
    );
    assert!(
        unused.is_empty(),
        "{what} grants what no request of the operator used:{}",
        list(unused.iter().map(ToString::to_string).collect())
    );
}

fn path(group_version: &str, namespace: &str, resource: &str, name: &str) -> String {
    let prefix = if group_version == "v1" { "/api/v1".to_owned() } else { format!("/apis/{group_version}") };
    format!("{prefix}/namespaces/{namespace}/{resource}/{name}")
}

/// Runs the operator through every path that needs a permission; returns the accesses of every
/// request it made.
async fn run_everything(namespace: &str, watch_namespace: Option<&str>) -> Vec<Access> {
    let api = FakeApi::new();
    let ns = namespace;
    let foo = |name: &str, deployment: &str| {
        json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
               "metadata": {"name": name, "namespace": ns}, "spec": {"deploymentName": deployment, "replicas": 1}})
    };
    let envoy = |config_map: &str| {
        json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "edge", "namespace": ns},
               "spec": {"configMapName": config_map, "xds": {"host": "xds.mesh", "port": 18000}}})
    };
    let foo_path = |name: &str| path("samplecontroller.k8s.io/v1alpha1", ns, "foos", name);
    let envoy_path = path("example.com/v1", ns, "envoys", "edge");
    api.put(&foo_path("web"), foo("web", "web"));
    // A Deployment nobody owns under the name a Foo asks for: a clash, reported by events.
    api.put(&foo_path("clash"), foo("clash", "taken"));
    api.put(
        &path("apps/v1", ns, "deployments", "taken"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "taken"}}),
    );
    api.put(&envoy_path, envoy("edge-cfg"));
    // A route on the Envoy, whose status the route controller writes (from the Envoys and the
    // Services it watches).
    let route_path = path("example.com/v1", ns, "envoyroutes", "shop");
    api.put(
        &route_path,
        json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute", "metadata": {"name": "shop", "namespace": ns},
               "spec": {"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "edge", "port": 80}]}]}}),
    );
    for (kind, at) in
        [("MutatingWebhookConfiguration", MUTATING), ("ValidatingWebhookConfiguration", VALIDATING)]
    {
        api.put(at, json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "envoy-operator"},
            "webhooks": [{"name": "w.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "clientConfig": {"service": {"name": "envoy-operator-webhook", "namespace": OPERATOR_NS}}}]}));
    }
    // An Envoy of the operator's control plane, whose fleet is issued an identity Secret; and
    // the identity CA, due for rotation.
    api.put(
        &path("example.com/v1", ns, "envoys", "mesh"),
        json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "mesh", "namespace": ns}, "spec": {}}),
    );
    // A pod with a mesh sidecar, whose ServiceAccount is issued an identity Secret, beside its
    // namespace's mesh CA ConfigMap.
    api.put(
        &path("v1", ns, "pods", "web-1"),
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web-1", "namespace": ns, "labels": {"envoy-operator.example.com/mesh-sidecar": "true"}},
               "spec": {"serviceAccountName": "web", "containers": [{"name": "web", "image": "web:1"}]}}),
    );
    let aging_ca = IdentityCa::generate(time::OffsetDateTime::now_utc() - time::Duration::days(300)).unwrap();
    let identity_ca_path = path("v1", OPERATOR_NS, "secrets", IDENTITY_CA_SECRET);
    api.put(&identity_ca_path, serde_json::to_value(aging_ca.to_secret(OPERATOR_NS)).unwrap());
    // A certificate Secret due for rotation.
    let (cert, key) = expiring_certificate();
    let data = |text: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, text);
    api.put(SECRET, json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": {"name": "envoy-operator-webhook-tls"},
        "data": {"ca.crt": data(&cert), "tls.crt": data(&cert), "tls.key": data(&key)}}));

    // The Gateway API, installed: a GatewayClass of the operator's, a Gateway of it (whose fleet
    // the operator applies, then deletes once the Gateway moves to another class) and routes
    // on it (an HTTPRoute, a GRPCRoute, a TLSRoute of the experimental channel), whose statuses
    // it writes.
    api.install_gateway_api_experimental();
    api.put(
        GATEWAY_CLASS,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "metadata": {"name": "envoy-operator"}, "spec": {"controllerName": CONTROLLER_NAME}}),
    );
    let gateway = |class: &str| {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "public", "namespace": ns},
               "spec": {"gatewayClassName": class, "listeners": [
                   {"name": "http", "port": 80, "protocol": "HTTP"},
                   {"name": "tls", "port": 443, "protocol": "TLS", "tls": {"mode": "Passthrough"}}]}})
    };
    let gateway_path = path("gateway.networking.k8s.io/v1", ns, "gateways", "public");
    api.put(&gateway_path, gateway("envoy-operator"));
    let http_route_path = path("gateway.networking.k8s.io/v1", ns, "httproutes", "store");
    api.put(
        &http_route_path,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
               "metadata": {"name": "store", "namespace": ns},
               "spec": {"parentRefs": [{"name": "public"}], "rules": [{"backendRefs": [{"name": "edge", "port": 80}]}]}}),
    );
    let grpc_route_path = path("gateway.networking.k8s.io/v1", ns, "grpcroutes", "api");
    api.put(
        &grpc_route_path,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
               "metadata": {"name": "api", "namespace": ns},
               "spec": {"parentRefs": [{"name": "public"}], "hostnames": ["api.example.com"],
                        "rules": [{"backendRefs": [{"name": "edge", "port": 80}]}]}}),
    );
    let tls_route_path = path("gateway.networking.k8s.io/v1alpha2", ns, "tlsroutes", "passthrough");
    api.put(
        &tls_route_path,
        json!({"apiVersion": "gateway.networking.k8s.io/v1alpha2", "kind": "TLSRoute",
               "metadata": {"name": "passthrough", "namespace": ns},
               "spec": {"parentRefs": [{"name": "public"}], "hostnames": ["db.example.com"],
                        "rules": [{"backendRefs": [{"name": "edge", "port": 80}]}]}}),
    );

    let dir = tempfile::tempdir().unwrap();
    let config = RunConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        metrics_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        cert_mode: CertMode::SelfManaged,
        cert_dir: dir.path().to_owned(),
        service_name: "envoy-operator-webhook".to_owned(),
        identity: "replica-a".to_owned(),
        api_server: "the in-memory API server".to_owned(),
        cert_check_interval: Duration::from_millis(200),
        controllers: ControllerConfig {
            namespace: watch_namespace.map(str::to_owned),
            concurrency: 4,
            settings: Settings::default(),
            xds_reports_namespace: None,
        },
        inject: InjectConfig { operator_namespace: OPERATOR_NS.to_owned(), ..InjectConfig::default() },
        serve: WebhookConfig { drain: Duration::ZERO, ..WebhookConfig::default() },
        xds: Some(XdsConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            advertise: ControlPlane { host: "envoy-operator-xds.envoy-operator.svc".to_owned(), port: 18000 },
            insecure_node_identity: false,
        }),
        pod_uid: Some("uid-replica-a".to_owned()),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let client = api.client();
    let operator = tokio::spawn(async move {
        operator::run(config, Some(client), async {
            let _ = stopped.await;
        })
        .await
    });
    let report_path = path("v1", OPERATOR_NS, "configmaps", "envoy-operator-xds-replica-a");

    let requests = |method: &str, fragment: &str| {
        let api = api.clone();
        let (method, fragment) = (method.to_owned(), fragment.to_owned());
        move |_: &FakeApi| api.requests().iter().any(|r| r.method == method && r.path.contains(&fragment))
    };
    let exists = |at: String| move |api: &FakeApi| api.get(&at).is_some();
    let gone = |at: String| move |api: &FakeApi| api.get(&at).is_none();
    api.wait_for("this replica's xDS report", HANG_GUARD, exists(report_path.clone())).await;
    api.wait_for("the Foo's Deployment", HANG_GUARD, exists(path("apps/v1", ns, "deployments", "web"))).await;
    api.wait_for("the Envoy's Service", HANG_GUARD, exists(path("v1", ns, "services", "edge"))).await;
    api.wait_for("the route's status", HANG_GUARD, |api| {
        api.get(&route_path).is_some_and(|route| route["status"]["parents"].is_array())
    })
    .await;
    api.wait_for("the caBundle patched", HANG_GUARD, |api| {
        api.get(MUTATING).is_some_and(|c| c["webhooks"][0]["clientConfig"].get("caBundle").is_some())
    })
    .await;
    api.wait_for(
        "the certificate rotated",
        HANG_GUARD,
        requests("PUT", "secrets/envoy-operator-webhook-tls"),
    )
    .await;

    api.wait_for(
        "the fleet's identity Secret",
        HANG_GUARD,
        exists(path("v1", ns, "secrets", "mesh-xds-identity")),
    )
    .await;
    api.wait_for(
        "the mesh sidecars' identity Secret",
        HANG_GUARD,
        exists(path("v1", ns, "secrets", "web-mesh-identity")),
    )
    .await;
    api.wait_for("the mesh CA ConfigMap", HANG_GUARD, |api| {
        api.get(&path("v1", ns, "configmaps", "envoy-mesh-xds-ca"))
            .is_some_and(|config_map| config_map["data"]["xds-ca.yaml"].is_string())
    })
    .await;
    api.wait_for(
        "the identity CA rotated",
        HANG_GUARD,
        requests("PUT", &format!("secrets/{IDENTITY_CA_SECRET}")),
    )
    .await;

    let has_status = |at: String, field: &'static str| {
        move |api: &FakeApi| api.get(&at).is_some_and(|object| object["status"][field].is_array())
    };
    api.wait_for("the GatewayClass's status", HANG_GUARD, has_status(GATEWAY_CLASS.to_owned(), "conditions"))
        .await;
    api.wait_for("the Gateway's status", HANG_GUARD, has_status(gateway_path.clone(), "conditions")).await;
    api.wait_for("the HTTPRoute's status", HANG_GUARD, has_status(http_route_path.clone(), "parents")).await;
    api.wait_for("the GRPCRoute's status", HANG_GUARD, has_status(grpc_route_path.clone(), "parents")).await;
    api.wait_for("the TLSRoute's status", HANG_GUARD, has_status(tls_route_path.clone(), "parents")).await;
    let fleet_path = path("example.com/v1", ns, "envoys", "public-envoy-operator");
    api.wait_for("the Gateway's fleet", HANG_GUARD, exists(fleet_path.clone())).await;
    api.put(&gateway_path, gateway("someone-else"));
    api.wait_for("the fleet of a Gateway of another class deleted", HANG_GUARD, gone(fleet_path)).await;

    // Renames leave children behind, which are pruned; so is a stale child of the Envoy.
    api.put(&foo_path("web"), foo("web", "web2"));
    api.put(&envoy_path, envoy("edge-cfg2"));
    let mut stale = api.get(&path("v1", ns, "services", "edge")).expect("the Envoy's Service");
    stale["metadata"]["name"] = json!("edge-stale");
    api.put(&path("v1", ns, "services", "edge-stale"), stale);
    api.wait_for("the old Deployment pruned", HANG_GUARD, gone(path("apps/v1", ns, "deployments", "web")))
        .await;
    api.wait_for("the old ConfigMap pruned", HANG_GUARD, gone(path("v1", ns, "configmaps", "edge-cfg")))
        .await;
    api.wait_for("the stale Service pruned", HANG_GUARD, gone(path("v1", ns, "services", "edge-stale")))
        .await;

    // A deleted Secret is recreated by the leader.
    let creations =
        || api.requests().iter().filter(|r| r.method == "POST" && r.path.ends_with("/secrets")).count();
    let before = creations();
    api.delete(SECRET);
    api.wait_for("the Secret recreated", HANG_GUARD, |api| api.get(SECRET).is_some()).await;
    assert!(creations() > before, "recreated by a create");

    // The clash repeats after its backoff: the recorder adds to the event's series.
    api.wait_for("an event series", HANG_GUARD, requests("PATCH", "/events/")).await;

    let _ = stop.send(());
    tokio::time::timeout(HANG_GUARD, operator)
        .await
        .expect("the operator stops")
        .expect("the operator task did not panic")
        .expect("the operator ran without error");
    let lease = format!("/apis/coordination.k8s.io/v1/namespaces/{OPERATOR_NS}/leases/envoy-operator-leader");
    assert_eq!(api.get(&lease).expect("a Lease")["spec"].get("holderIdentity"), None, "released");
    assert!(api.get(&report_path).is_none(), "the xDS report is deleted on shutdown");

    let recorded = api.requests();
    recorded
        .iter()
        .flat_map(|r| rbac::accesses(&r.method, &r.path, &r.query, &r.content_type, r.existed))
        .collect()
}

/// A certificate with ten days behind it and one left: due for rotation.
fn expiring_certificate() -> (String, String) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params =
        rcgen::CertificateParams::new(vec!["envoy-operator-webhook.envoy-operator.svc".to_owned()]).unwrap();
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(10);
    params.not_after = now + time::Duration::days(1);
    (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
}

#[test]
fn requests_map_to_the_verbs_the_authorizer_checks() {
    let access = |method, path, query, content_type, existed| {
        rbac::accesses(method, path, query, content_type, existed)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        access(
            "GET",
            "/api/v1/namespaces/ops/secrets",
            "fieldSelector=metadata.name%3Dtls&watch=true",
            "",
            false
        ),
        ["watch core/secrets \"tls\" in ops"]
    );
    assert_eq!(
        access(
            "PATCH",
            "/apis/apps/v1/namespaces/a/deployments/web",
            "fieldManager=x",
            "application/apply-patch+yaml",
            false
        ),
        ["patch apps/deployments \"web\" in a", "create apps/deployments in a"]
    );
    assert_eq!(
        access(
            "PATCH",
            "/apis/apps/v1/namespaces/a/deployments/web",
            "",
            "application/apply-patch+yaml",
            true
        ),
        ["patch apps/deployments \"web\" in a"]
    );
    assert_eq!(
        access(
            "PATCH",
            "/apis/example.com/v1/namespaces/a/envoys/e/status",
            "",
            "application/apply-patch+yaml",
            true
        ),
        ["patch example.com/envoys/status \"e\" in a"]
    );
    assert_eq!(
        access("GET", "/apis/example.com/v1/envoys", "", "", false),
        ["list example.com/envoys (cluster-wide)"]
    );
    assert_eq!(
        access("DELETE", "/api/v1/namespaces/a/services/s", "", "", true),
        ["delete core/services \"s\" in a"]
    );
}

#[test]
fn a_role_allows_only_in_its_namespace_and_names_only_what_it_names() {
    let documents: Vec<Value> = serde_json::from_value(json!([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r", "namespace": "ops"},
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["tls"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "r", "namespace": "ops"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
         "subjects": [{"kind": "ServiceAccount", "name": rbac::SERVICE_ACCOUNT.1, "namespace": rbac::SERVICE_ACCOUNT.0}]}
    ]))
    .unwrap();
    let install = Install::from_documents(&documents);
    let get = |path| rbac::accesses("GET", path, "", "", true);
    assert_eq!(install.allowing(&get("/api/v1/namespaces/ops/secrets/tls")[0]).len(), 1);
    assert!(install.allowing(&get("/api/v1/namespaces/other/secrets/tls")[0]).is_empty());
    assert!(install.allowing(&get("/api/v1/namespaces/ops/secrets/other")[0]).is_empty());
    let (denied, unused) = install.replay(&get("/api/v1/namespaces/ops/secrets/other"));
    assert_eq!((denied.len(), unused.len()), (1, 1), "a denied request and an unused grant are both found");
}

/// The RBAC `kubectl kustomize` builds for an install directory, when kubectl is installed.
fn kustomized_rbac(dir: &str) -> Option<Install> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = std::process::Command::new("kubectl").arg("kustomize").arg(root.join(dir)).output().ok()?;
    assert!(output.status.success(), "kubectl kustomize {dir}: {}", String::from_utf8_lossy(&output.stderr));
    let documents: Vec<Value> =
        envoy_operator_core::manifest::parse_documents(&String::from_utf8_lossy(&output.stdout))
            .into_iter()
            .map(|d| d.content.expect("valid YAML"))
            .collect();
    Some(Install::from_documents(&documents))
}

#[test]
fn the_installs_read_here_are_what_kustomize_builds() {
    let (Some(cluster), Some(namespaced)) = (kustomized_rbac("deploy"), kustomized_rbac("deploy-namespaced"))
    else {
        eprintln!(
            "kubectl is not installed: the installs are read by this test's own reading of the overlay only"
        );
        return;
    };
    assert_eq!(cluster.grants, rbac::cluster_wide().grants);
    assert_eq!(namespaced.grants, rbac::namespaced().0.grants);
}
