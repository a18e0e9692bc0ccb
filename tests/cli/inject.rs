//! The sidecar injector against AdmissionReviews shaped like the API server's (see
//! `tests/fixtures/inject/README.md`): every patch is applied with `json_patch::patch` and the
//! resulting pod checked; a second pass must leave it alone. Then the offline command, the
//! committed webhook configuration, and property tests over arbitrary pods.

use std::path::Path;
use std::process::Output;

use crate::envoy_operator as cli;
use envoy_operator_core::bootstrap::{ControlPlane, FLEET_METADATA_KEY, MESH_METADATA_KEY, XdsTarget};
use envoy_operator_core::inject::annotations::{STATUS, parse_xds};
use envoy_operator_core::inject::pod::read_for_injection;
use envoy_operator_core::inject::uninject::{Uninjected, uninject};
use envoy_operator_core::inject::workload::{self, Options};
use envoy_operator_core::inject::{
    EnvoyCatalog, EnvoyLookup, InjectConfig, InjectError, Injection, InjectionStatus, Injector, NoEnvoys,
    SkipReason, Summary, XdsSource, inject,
};
use envoy_operator_core::manifest::Outcome;
use envoy_operator_core::manifest::parse_documents;
use envoy_operator_core::names::{DEFAULT_MESH_INIT_IMAGE, FLEET_LABEL, MESH_SIDECAR_LABEL};
use json_patch::Patch;
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/inject");

fn review(name: &str) -> Value {
    let path = Path::new(FIXTURES).join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The pod and namespace of a review, as the webhook handler will pass them.
fn request(review: &Value) -> (&Value, Option<&str>) {
    (&review["request"]["object"], review["request"]["namespace"].as_str())
}

fn run(name: &str, config: &InjectConfig, envoys: &dyn EnvoyLookup) -> Result<Injection, InjectError> {
    let review = review(name);
    let (pod, namespace) = request(&review);
    inject(pod, namespace, config, envoys)
}

/// Injects the fixture's pod with the default configuration, applies the patch, checks that a
/// second pass is a no-op, and returns the original pod, the patched pod, the patch and the summary.
fn injected_with(
    name: &str,
    config: &InjectConfig,
    envoys: &dyn EnvoyLookup,
) -> (Value, Value, Patch, Summary) {
    let review = review(name);
    let (pod, namespace) = request(&review);
    let Ok(Injection::Patched { patch, summary }) = inject(pod, namespace, config, envoys) else {
        panic!("{name}: expected a patch, got {:?}", inject(pod, namespace, config, envoys));
    };
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &patch).unwrap_or_else(|e| panic!("{name}: patch does not apply: {e}"));
    match inject(&patched, namespace, config, envoys) {
        Ok(Injection::Skipped(skip)) => assert_eq!(skip.reason, SkipReason::AlreadyInjected, "{name}"),
        other => panic!("{name}: second pass should skip, got {other:?}"),
    }
    (pod.clone(), patched, patch, *summary)
}

fn injected(name: &str) -> (Value, Value, Patch, Summary) {
    injected_with(name, &InjectConfig::default(), &NoEnvoys)
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array().into_iter().flatten().filter_map(|item| item["name"].as_str()).collect()
}

fn paths(patch: &Patch) -> Vec<String> {
    patch.0.iter().map(|op| op.path().to_string()).collect()
}

fn status_of(pod: &Value) -> InjectionStatus {
    InjectionStatus::parse(pod["metadata"]["annotations"][STATUS].as_str().expect("status annotation"))
        .expect("status annotation parses")
}

/// Uninjecting the patched pod gives back exactly the original: the patch only added.
fn assert_only_added(original: &Value, patched: &Value) {
    let mut restored = patched.clone();
    assert!(matches!(uninject(&mut restored), Ok(Uninjected::Removed(_))));
    assert_eq!(&restored, original, "uninject must restore the pod exactly");
}

#[test]
fn replicaset_pod_with_only_generate_name() {
    let (pod, patched, patch, summary) = injected("pod-create-from-replicaset-mutate.json");
    assert_eq!(paths(&patch), ["/spec/volumes/-", "/spec/containers/-", "/metadata/annotations"]);

    assert!(patched["metadata"].get("name").is_none(), "the API server names the pod after admission");
    assert_eq!(patched["metadata"]["generateName"], "shop-76968d89b-");
    assert_eq!(patched["metadata"]["ownerReferences"], pod["metadata"]["ownerReferences"]);
    assert_eq!(patched["metadata"]["managedFields"], pod["metadata"]["managedFields"]);
    assert_eq!(names(&patched["spec"]["containers"]), ["shop", "envoy"]);
    assert_eq!(names(&patched["spec"]["volumes"]), ["kube-api-access-xmxxw", "envoy-tmp"]);

    let envoy = &patched["spec"]["containers"][1];
    assert_eq!(envoy["image"], envoy_operator_core::names::DEFAULT_ENVOY_IMAGE);
    assert_eq!(envoy["args"][0], "--config-yaml");
    assert_eq!(
        envoy["args"].as_array().unwrap()[2..6],
        [
            json!("--service-node"),
            json!("$(POD_NAME)"),
            json!("--service-cluster"),
            json!("$(POD_NAMESPACE)")
        ]
    );
    let bootstrap: Value = serde_json::from_str(envoy["args"][1].as_str().unwrap()).unwrap();
    assert_eq!(bootstrap["admin"]["address"]["socket_address"]["address"], "127.0.0.1");
    assert!(bootstrap.get("dynamic_resources").is_none(), "no xDS server anywhere: admin-only bootstrap");
    assert_eq!(envoy["readinessProbe"]["httpGet"], json!({"path": "/ready", "port": 9902}));
    assert_eq!(envoy["securityContext"]["runAsNonRoot"], true);
    assert_eq!(envoy["volumeMounts"], json!([{"name": "envoy-tmp", "mountPath": "/tmp"}]));

    let status = status_of(&patched);
    assert_eq!(status, summary.status);
    assert_eq!(status.containers, ["envoy"]);
    assert_eq!(status.volumes, ["envoy-tmp"]);
    assert_eq!(summary.xds_source, XdsSource::None);
    assert_only_added(&pod, &patched);
}

#[test]
fn named_pod() {
    let (pod, patched, _, _) = injected("pod-create-direct-mutate.json");
    assert_eq!(patched["metadata"]["name"], "solo");
    assert_eq!(names(&patched["spec"]["containers"]), ["solo", "envoy"]);
    assert_only_added(&pod, &patched);
}

#[test]
fn the_same_pod_gets_the_same_patch() {
    let first = run("pod-create-from-replicaset-mutate.json", &InjectConfig::default(), &NoEnvoys).unwrap();
    let second = run("pod-create-from-replicaset-mutate.json", &InjectConfig::default(), &NoEnvoys).unwrap();
    assert_eq!(first, second);
    let Injection::Patched { patch, .. } = first else { panic!("expected a patch") };
    assert_eq!(serde_json::to_string(&patch).unwrap(), {
        let Injection::Patched { patch, .. } = second else { unreachable!() };
        serde_json::to_string(&patch).unwrap()
    });
}

#[test]
fn unknown_fields_and_annotation_keys_with_slashes_survive() {
    let (pod, patched, patch, summary) = injected("pod-annotated-with-unknown-fields.json");
    let serialized = serde_json::to_string(&patch).unwrap();
    assert!(serialized.contains("\"/metadata/annotations/sidecar.example.com~1status\""), "{serialized}");
    assert_eq!(patched["spec"]["futureField"], json!({"enabled": true, "mode": "strict"}));
    assert_eq!(patched["spec"]["containers"][0]["futureContainerField"], json!([1, 2, 3]));
    let annotations = &patched["metadata"]["annotations"];
    assert_eq!(annotations["kubectl.kubernetes.io/restartedAt"], "2026-11-21T12:13:30Z");
    assert_eq!(annotations["example.com/odd~key"], "tilde");

    assert_eq!(summary.xds_source, XdsSource::Annotation);
    let envoy = &patched["spec"]["containers"][1];
    let bootstrap: Value = serde_json::from_str(envoy["args"][1].as_str().unwrap()).unwrap();
    let endpoint = &bootstrap["static_resources"]["clusters"][1]["load_assignment"]["endpoints"][0]["lb_endpoints"]
        [0]["endpoint"]["address"]["socket_address"];
    assert_eq!(endpoint, &json!({"address": "xds-service.default", "port_value": 19000}));
    assert_eq!(envoy["resources"]["requests"]["cpu"], "200m", "annotation overrides the default");
    assert_eq!(envoy["resources"]["requests"]["memory"], "64Mi", "default kept");
    assert_only_added(&pod, &patched);
}

#[test]
fn unknown_annotations_are_warned_about() {
    let review = review("pod-create-from-replicaset-mutate.json");
    let mut pod = review["request"]["object"].clone();
    pod["metadata"]["annotations"] = json!({"sidecar.example.com/proxy-mem": "1Gi"});
    let Ok(Injection::Patched { summary, .. }) =
        inject(&pod, Some("shop"), &InjectConfig::default(), &NoEnvoys)
    else {
        panic!("an unknown annotation does not stop injection");
    };
    // The first note: the pod names no Envoy, so its sidecar serves nothing.
    assert_eq!(summary.notes.len(), 2);
    assert_eq!(summary.notes[0], envoy_operator_core::inject::NO_CONFIGURATION);
    assert!(
        summary.notes[1].starts_with("unknown annotation sidecar.example.com/proxy-mem ignored"),
        "{:?}",
        summary.notes
    );
}

#[test]
fn init_containers_are_left_alone() {
    let (pod, patched, _, _) = injected("pod-with-init-containers.json");
    assert_eq!(patched["spec"]["initContainers"], pod["spec"]["initContainers"]);
    assert_eq!(names(&patched["spec"]["containers"]), ["shop", "envoy"]);
}

#[test]
fn native_sidecar_goes_first_among_init_containers() {
    let (pod, patched, patch, summary) = injected("pod-native-sidecar.json");
    assert!(summary.native);
    assert_eq!(paths(&patch)[1], "/spec/initContainers/0");
    assert_eq!(names(&patched["spec"]["initContainers"]), ["envoy", "migrate"]);
    assert_eq!(patched["spec"]["initContainers"][0]["restartPolicy"], "Always");
    assert_eq!(names(&patched["spec"]["containers"]), ["shop"]);
    assert_eq!(status_of(&patched).init_containers, ["envoy"]);
    assert_only_added(&pod, &patched);

    // The operator's flag does the same for pods that do not say; the annotation wins.
    let config = InjectConfig { native_sidecar: true, ..Default::default() };
    let (_, patched, patch, _) = injected_with("pod-create-from-replicaset-mutate.json", &config, &NoEnvoys);
    assert_eq!(paths(&patch)[1], "/spec/initContainers", "created when absent");
    assert_eq!(names(&patched["spec"]["initContainers"]), ["envoy"]);
}

#[test]
fn a_taken_volume_name_is_replaced_by_a_free_one() {
    let (pod, patched, _, summary) = injected("pod-with-envoy-tmp-volume.json");
    assert_eq!(names(&patched["spec"]["volumes"]), ["kube-api-access-xmxxw", "envoy-tmp", "envoy-tmp-2"]);
    assert_eq!(patched["spec"]["containers"][1]["volumeMounts"][0]["name"], "envoy-tmp-2");
    assert_eq!(status_of(&patched).volumes, ["envoy-tmp-2"]);
    assert!(summary.notes.iter().any(|n| n.contains("envoy-tmp-2")), "{:?}", summary.notes);
    assert_only_added(&pod, &patched);
}

#[test]
fn a_pod_without_volumes_gets_the_list_created() {
    let (pod, patched, patch, _) = injected("pod-without-volumes.json");
    assert_eq!(paths(&patch)[0], "/spec/volumes");
    assert_eq!(names(&patched["spec"]["volumes"]), ["envoy-tmp"]);
    assert_only_added(&pod, &patched);
}

#[test]
fn skips_have_reasons() {
    for (fixture, reason) in [
        ("pod-opted-out.json", SkipReason::OptedOut),
        ("pod-in-kube-system.json", SkipReason::ExcludedNamespace),
        ("pod-in-operator-namespace.json", SkipReason::ExcludedNamespace),
        ("pod-host-network.json", SkipReason::HostNetwork),
        ("pod-port-conflict.json", SkipReason::PortConflict),
        ("pod-already-injected.json", SkipReason::AlreadyInjected),
    ] {
        match run(fixture, &InjectConfig::default(), &NoEnvoys) {
            Ok(Injection::Skipped(skip)) => {
                assert_eq!(skip.reason, reason, "{fixture}");
                assert!(!skip.detail.is_empty(), "{fixture}");
            }
            other => panic!("{fixture}: expected a skip, got {other:?}"),
        }
    }
}

#[test]
fn the_request_namespace_is_authoritative() {
    // The ReplicaSet pod has no metadata.namespace: only the request says kube-system.
    let review = review("pod-in-kube-system.json");
    assert!(review["request"]["object"]["metadata"].get("namespace").is_none());
    let (pod, _) = request(&review);
    let skipped = inject(pod, Some("kube-system"), &InjectConfig::default(), &NoEnvoys).unwrap();
    assert!(matches!(skipped, Injection::Skipped(s) if s.reason == SkipReason::ExcludedNamespace));
    let mut claims_other = pod.clone();
    claims_other["metadata"]["namespace"] = json!("shop");
    let skipped = inject(&claims_other, Some("kube-system"), &InjectConfig::default(), &NoEnvoys).unwrap();
    assert!(matches!(skipped, Injection::Skipped(s) if s.reason == SkipReason::ExcludedNamespace));
}

#[test]
fn denials_say_what_to_do() {
    let error =
        run("pod-with-foreign-envoy-container.json", &InjectConfig::default(), &NoEnvoys).unwrap_err();
    assert_eq!(error.metric_label(), "container_name_taken");
    assert!(error.to_string().contains("sidecar.example.com/inject=false"), "{error}");

    let error = run("pod-invalid-xds-annotation.json", &InjectConfig::default(), &NoEnvoys).unwrap_err();
    assert_eq!(error.metric_label(), "invalid_annotation");
    let message = error.to_string();
    assert!(message.contains("sidecar.example.com/xds") && message.contains("host:port"), "{message}");

    for not_a_pod in [
        json!(null),
        json!({"spec": {}}),
        json!({"spec": {"containers": {"app": {}}}}),
        json!({"metadata": [], "spec": {"containers": []}}),
    ] {
        let error = inject(&not_a_pod, Some("shop"), &InjectConfig::default(), &NoEnvoys).unwrap_err();
        assert_eq!(error.metric_label(), "malformed", "{not_a_pod}");
    }

    let error = run("pod-naming-an-envoy.json", &InjectConfig::default(), &NoEnvoys).unwrap_err();
    assert_eq!(
        error.to_string(),
        "annotation sidecar.example.com/envoy: no Envoy \"edge-envoy\" in namespace shop (create it first, or remove the annotation)"
    );
}

/// The seed's Envoy edge-envoy, with an xDS server of its own.
fn example_envoys(namespace: &str) -> EnvoyCatalog {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/seeds/envoy.yaml"))
            .unwrap();
    let mut catalog = EnvoyCatalog::default();
    assert!(catalog.add_manifest("tests/fixtures/seeds/envoy.yaml", &text, namespace).is_empty());
    catalog
}

#[test]
fn xds_sources_in_order() {
    let catalog = example_envoys("shop");
    let (_, _, _, summary) = injected_with("pod-naming-an-envoy.json", &InjectConfig::default(), &catalog);
    assert_eq!(summary.xds_source, XdsSource::Envoy("edge-envoy".to_owned()));
    let xds = summary.xds.unwrap();
    assert_eq!(
        (xds.cluster_name.as_str(), xds.host.as_str(), xds.port),
        ("xds_cluster", "xds-service.default", 19000)
    );

    // The Envoy is looked up in the pod's namespace only.
    let elsewhere = example_envoys("other");
    assert!(matches!(
        run("pod-naming-an-envoy.json", &InjectConfig::default(), &elsewhere),
        Err(InjectError::UnknownEnvoy { .. })
    ));

    let default_xds =
        XdsTarget { cluster_name: "xds_cluster".to_owned(), host: "xds.mesh".to_owned(), port: 18000 };
    let config = InjectConfig { default_xds: Some(default_xds.clone()), ..Default::default() };
    let (_, _, _, summary) = injected_with("pod-create-from-replicaset-mutate.json", &config, &NoEnvoys);
    assert_eq!((summary.xds_source, summary.xds), (XdsSource::Default, Some(default_xds.clone())));
    // The annotation beats both the Envoy and the default.
    let (_, _, _, summary) = injected_with("pod-annotated-with-unknown-fields.json", &config, &catalog);
    assert_eq!(summary.xds.unwrap().host, "xds-service.default");
}

/// An Envoy without `spec.xds` in `shop`, and the injector of an operator serving its control
/// plane at `envoy-operator-xds.envoy-operator.svc:18000`.
fn operator_fleet() -> (EnvoyCatalog, InjectConfig) {
    let text =
        "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge-envoy, namespace: shop}\nspec: {}\n";
    let mut catalog = EnvoyCatalog::default();
    assert!(catalog.add_manifest("edge.yaml", text, "shop").is_empty());
    let control_plane =
        ControlPlane { host: "envoy-operator-xds.envoy-operator.svc".to_owned(), port: 18000 };
    (catalog, InjectConfig { control_plane: Some(control_plane), ..Default::default() })
}

#[test]
fn a_pod_naming_an_envoy_of_the_operator_gets_its_configuration() {
    let (catalog, config) = operator_fleet();
    let (pod, patched, patch, summary) = injected_with("pod-naming-an-envoy.json", &config, &catalog);
    assert_eq!(
        paths(&patch),
        [
            "/spec/volumes/-",
            "/spec/volumes/-",
            "/spec/volumes/-",
            "/spec/containers/-",
            "/metadata/annotations/sidecar.example.com~1status",
            "/metadata/annotations/prometheus.io~1path",
            "/metadata/annotations/prometheus.io~1port",
            "/metadata/annotations/prometheus.io~1scrape",
            "/metadata/labels/envoy-operator.example.com~1fleet"
        ]
    );
    assert_eq!(summary.xds_source, XdsSource::Envoy("edge-envoy".to_owned()));
    assert_eq!(summary.fleet.as_deref(), Some("shop/edge-envoy"));
    assert_eq!(
        summary.xds.as_ref().map(|xds| (xds.host.as_str(), xds.port)),
        Some(("envoy-operator-xds.envoy-operator.svc", 18000))
    );

    // The label the control plane serves the pod by, next to the pod's own.
    assert_eq!(patched["metadata"]["labels"][FLEET_LABEL], "edge-envoy");
    assert_eq!(patched["metadata"]["labels"]["app"], "shop");
    // The CA file of the Envoy's CA ConfigMap (named after the Envoy, whatever its
    // spec.configMapName), and only it, where the bootstrap reads it.
    assert_eq!(
        names(&patched["spec"]["volumes"]),
        ["kube-api-access-xmxxw", "envoy-tmp", "envoy-xds-ca", "envoy-xds-identity"]
    );
    assert_eq!(
        patched["spec"]["volumes"][2]["configMap"],
        json!({"name": "edge-envoy-xds-ca", "items": [{"key": "xds-ca.yaml", "path": "xds-ca.yaml"}]})
    );
    // The fleet's identity: its client certificate, from the Secret the reconciler issues.
    assert_eq!(
        patched["spec"]["volumes"][3]["secret"],
        json!({"secretName": "edge-envoy-xds-identity", "items": [{"key": "xds-identity.yaml", "path": "xds-identity.yaml"}],
               "defaultMode": 0o444, "optional": false})
    );
    let envoy = &patched["spec"]["containers"][1];
    assert_eq!(
        envoy["volumeMounts"],
        json!([{"name": "envoy-tmp", "mountPath": "/tmp"}, {"name": "envoy-xds-ca", "mountPath": "/etc/envoy", "readOnly": true},
               {"name": "envoy-xds-identity", "mountPath": "/etc/envoy-xds-identity", "readOnly": true}])
    );
    assert_eq!(envoy["args"].as_array().unwrap()[2..4], [json!("--service-node"), json!("$(POD_NAME)")]);
    let bootstrap: Value = serde_json::from_str(envoy["args"][1].as_str().unwrap()).unwrap();
    assert_eq!(bootstrap["node"]["metadata"][FLEET_METADATA_KEY], "shop/edge-envoy");
    assert_eq!(bootstrap["dynamic_resources"]["ads_config"]["api_type"], "DELTA_GRPC");
    let cluster = &bootstrap["static_resources"]["clusters"][1];
    assert_eq!(cluster["name"], "envoy_operator_xds");
    let tls = &cluster["transport_socket"]["typed_config"];
    assert_eq!(tls["sni"], "envoy-operator-xds.envoy-operator.svc");
    assert_eq!(
        tls["common_tls_context"]["validation_context_sds_secret_config"]["sds_config"]["path_config_source"]
            ["path"],
        "/etc/envoy/xds-ca.yaml"
    );
    assert!(bootstrap["layered_runtime"].is_object(), "large regexes allowed, as the fleet's own proxies");

    let status = status_of(&patched);
    assert_eq!(status.volumes, ["envoy-tmp", "envoy-xds-ca", "envoy-xds-identity"]);
    assert_eq!(status.labels, [FLEET_LABEL]);
    assert_only_added(&pod, &patched);

    // The webhook's path writes the same patch.
    let review = review("pod-naming-an-envoy.json");
    let (raw, namespace) = request(&review);
    let read = read_for_injection(raw.to_string().as_bytes()).unwrap();
    let Ok(Injection::Patched { patch: json, .. }) =
        Injector::new(config).inject_json(&read, namespace, &catalog)
    else {
        panic!("the webhook path injects too");
    };
    assert_eq!(serde_json::from_slice::<Value>(&json).unwrap(), serde_json::to_value(&patch).unwrap());
}

/// The operator's control plane, and no default xDS server: pods naming nothing get mesh sidecars.
fn mesh_config() -> InjectConfig {
    operator_fleet().1
}

/// Sets `annotations` on the fixture's pod and injects it as the mesh would.
fn mesh_injected(name: &str, annotations: Value) -> Result<Injection, InjectError> {
    let mut review = review(name);
    let pod = &mut review["request"]["object"];
    for (key, value) in annotations.as_object().unwrap() {
        pod["metadata"]["annotations"][key] = value.clone();
    }
    let (pod, namespace) = request(&review);
    inject(pod, namespace, &mesh_config(), &NoEnvoys)
}

#[test]
fn a_pod_naming_nothing_gets_a_mesh_sidecar_with_capture_where_the_operator_serves_one() {
    let config = mesh_config();
    let (pod, patched, patch, summary) =
        injected_with("pod-create-from-replicaset-mutate.json", &config, &NoEnvoys);
    assert_eq!(
        paths(&patch),
        [
            "/spec/volumes/-",
            "/spec/volumes/-",
            "/spec/volumes/-",
            "/spec/initContainers",
            "/metadata/annotations",
            "/metadata/labels/envoy-operator.example.com~1mesh-sidecar"
        ]
    );
    assert_eq!(summary.xds_source, XdsSource::Mesh { service_account: "default".to_owned() });
    assert_eq!(summary.fleet.as_deref(), Some("shop/:mesh"));
    assert!(summary.capture && summary.native, "a mesh sidecar is native where the cluster has them");
    assert!(summary.notes.is_empty(), "{:?}", summary.notes);

    // The capture first, then the proxy (native), then the application.
    assert_eq!(names(&patched["spec"]["initContainers"]), ["envoy-mesh-init", "envoy"]);
    assert_eq!(names(&patched["spec"]["containers"]), ["shop"]);
    let init = &patched["spec"]["initContainers"][0];
    assert_eq!(init["image"], DEFAULT_MESH_INIT_IMAGE);
    assert_eq!(init["command"], json!(["envoy-operator"]));
    assert_eq!(init["args"], json!(["mesh-init", "--proxy-uid", "101", "--outbound-port", "15001"]));
    assert_eq!(
        init["securityContext"],
        json!({"allowPrivilegeEscalation": false, "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
               "privileged": false, "readOnlyRootFilesystem": true, "runAsGroup": 0, "runAsNonRoot": false,
               "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert!(init.get("restartPolicy").is_none(), "runs to completion before anything else starts");
    let envoy = &patched["spec"]["initContainers"][1];
    assert_eq!(envoy["restartPolicy"], "Always");
    assert_eq!(envoy["securityContext"]["runAsUser"], 101, "the uid the capture leaves alone");
    assert_eq!(
        envoy["startupProbe"]["httpGet"]["path"], "/ready",
        "the application waits for a configured proxy"
    );

    // Its namespace's CA and its ServiceAccount's identity, both required: the pod waits for them.
    assert_eq!(
        names(&patched["spec"]["volumes"]),
        ["kube-api-access-xmxxw", "envoy-tmp", "envoy-xds-ca", "envoy-xds-identity"]
    );
    assert_eq!(
        patched["spec"]["volumes"][2]["configMap"],
        json!({"name": "envoy-mesh-xds-ca", "items": [{"key": "xds-ca.yaml", "path": "xds-ca.yaml"}]})
    );
    assert_eq!(
        patched["spec"]["volumes"][3]["secret"],
        json!({"secretName": "default-mesh-identity", "items": [{"key": "xds-identity.yaml", "path": "xds-identity.yaml"}],
               "defaultMode": 0o444, "optional": false})
    );
    let bootstrap: Value = serde_json::from_str(envoy["args"][1].as_str().unwrap()).unwrap();
    assert_eq!(bootstrap["node"]["metadata"], json!({MESH_METADATA_KEY: "shop"}), "no fleet claimed");
    assert_eq!(bootstrap["dynamic_resources"]["ads_config"]["api_type"], "DELTA_GRPC");
    assert_eq!(
        bootstrap["static_resources"]["clusters"][1]["transport_socket"]["typed_config"]["common_tls_context"]
            ["tls_certificate_sds_secret_configs"][0]["sds_config"]["path_config_source"]["path"],
        "/etc/envoy-xds-identity/xds-identity.yaml"
    );

    assert_eq!(patched["metadata"]["labels"][MESH_SIDECAR_LABEL], "true");
    assert!(patched["metadata"]["labels"].get(FLEET_LABEL).is_none());
    let status = status_of(&patched);
    assert_eq!(status.init_containers, ["envoy-mesh-init", "envoy"]);
    assert_eq!(status.volumes, ["envoy-tmp", "envoy-xds-ca", "envoy-xds-identity"]);
    assert_eq!(status.labels, [MESH_SIDECAR_LABEL]);
    assert_only_added(&pod, &patched);

    // The webhook's path writes the same patch.
    let review = review("pod-create-from-replicaset-mutate.json");
    let (raw, namespace) = request(&review);
    let read = read_for_injection(raw.to_string().as_bytes()).unwrap();
    let Ok(Injection::Patched { patch: json, .. }) =
        Injector::new(config).inject_json(&read, namespace, &NoEnvoys)
    else {
        panic!("the webhook path injects too");
    };
    assert_eq!(serde_json::from_slice::<Value>(&json).unwrap(), serde_json::to_value(&patch).unwrap());
}

#[test]
fn the_capture_runs_before_the_pods_own_init_containers_and_follows_its_service_account() {
    let mut review = review("pod-with-init-containers.json");
    review["request"]["object"]["spec"]["serviceAccountName"] = json!("checkout");
    let (pod, namespace) = request(&review);
    let Ok(Injection::Patched { patch, summary }) = inject(pod, namespace, &mesh_config(), &NoEnvoys) else {
        panic!("injected");
    };
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &patch).unwrap();
    assert_eq!(names(&patched["spec"]["initContainers"]), ["envoy-mesh-init", "envoy", "migrate"]);
    assert_eq!(patched["spec"]["volumes"][3]["secret"]["secretName"], "checkout-mesh-identity");
    assert_eq!(summary.xds_source, XdsSource::Mesh { service_account: "checkout".to_owned() });

    // A regular sidecar starts after the init containers, whose outbound TCP the capture then
    // refuses: said.
    let regular = mesh_injected(
        "pod-with-init-containers.json",
        json!({"sidecar.example.com/native-sidecar": "false"}),
    );
    let Ok(Injection::Patched { patch, summary }) = regular else { panic!("injected") };
    assert!(!summary.native);
    assert!(
        summary.notes.iter().any(|note| note.contains("init containers run before")),
        "{:?}",
        summary.notes
    );
    let mut patched = self::review("pod-with-init-containers.json")["request"]["object"].clone();
    patched["metadata"]["annotations"] = json!({"sidecar.example.com/native-sidecar": "false"});
    json_patch::patch(&mut patched, &patch).unwrap();
    assert_eq!(names(&patched["spec"]["initContainers"]), ["envoy-mesh-init", "migrate"]);
}

#[test]
fn a_pod_opts_out_of_capture_or_of_ports_and_cidrs() {
    let Ok(Injection::Patched { patch, summary }) =
        mesh_injected("pod-create-direct-mutate.json", json!({"sidecar.example.com/mesh-capture": "false"}))
    else {
        panic!("injected");
    };
    assert!(!summary.capture);
    assert_eq!(summary.fleet.as_deref(), Some("shop/:mesh"), "still a mesh sidecar");
    let patched = {
        let mut pod = review("pod-create-direct-mutate.json")["request"]["object"].clone();
        pod["metadata"]["annotations"]["sidecar.example.com/mesh-capture"] = json!("false");
        json_patch::patch(&mut pod, &patch).unwrap();
        pod
    };
    assert_eq!(names(&patched["spec"]["initContainers"]), ["envoy"], "no init container, no NET_ADMIN");

    let Ok(Injection::Patched { patch, .. }) = mesh_injected(
        "pod-create-direct-mutate.json",
        json!({"sidecar.example.com/mesh-exclude-outbound-ports": "6379, 5432",
               "sidecar.example.com/mesh-exclude-outbound-cidrs": "10.96.0.1/12,fd00::/8"}),
    ) else {
        panic!("injected");
    };
    let init = patch
        .0
        .iter()
        .find_map(|op| match op {
            json_patch::PatchOperation::Add(add) if add.path.as_str() == "/spec/initContainers" => {
                Some(add.value[0].clone())
            }
            _ => None,
        })
        .expect("the init containers");
    assert_eq!(
        init["args"],
        json!([
            "mesh-init",
            "--proxy-uid",
            "101",
            "--outbound-port",
            "15001",
            "--exclude-outbound-ports",
            "5432,6379",
            "--exclude-outbound-cidrs",
            "10.96.0.0/12,fd00::/8"
        ])
    );

    for (key, value, expected) in [
        ("sidecar.example.com/mesh-capture", "no", "must be \"true\" or \"false\""),
        ("sidecar.example.com/mesh-exclude-outbound-ports", "80,http", "is not a port"),
        ("sidecar.example.com/mesh-exclude-outbound-cidrs", "10.0.0.0/40", "prefix length"),
    ] {
        let error = mesh_injected("pod-create-direct-mutate.json", json!({key: value})).unwrap_err();
        assert_eq!(error.metric_label(), "invalid_annotation");
        assert!(error.to_string().contains(key) && error.to_string().contains(expected), "{error}");
    }

    // Not a mesh sidecar: the settings are noted as ignored.
    let not_mesh = {
        let mut review = review("pod-create-direct-mutate.json");
        review["request"]["object"]["metadata"]["annotations"]["sidecar.example.com/mesh-capture"] =
            json!("false");
        let (pod, namespace) = request(&review);
        inject(pod, namespace, &InjectConfig::default(), &NoEnvoys)
    };
    let Ok(Injection::Patched { summary, .. }) = not_mesh else {
        panic!("injected");
    };
    assert!(summary.notes.iter().any(|note| note.contains("no mesh sidecar")), "{:?}", summary.notes);
}

#[test]
fn a_mesh_sidecar_is_skipped_where_a_container_declares_its_outbound_port_or_names_its_init_container() {
    let mut review = review("pod-create-direct-mutate.json");
    review["request"]["object"]["spec"]["containers"][0]["ports"] = json!([{"containerPort": 15001}]);
    let (pod, namespace) = request(&review);
    let Ok(Injection::Skipped(skip)) = inject(pod, namespace, &mesh_config(), &NoEnvoys) else {
        panic!("skipped");
    };
    assert_eq!(skip.reason, SkipReason::PortConflict);
    assert!(skip.warn && skip.detail.contains("15001"), "{}", skip.detail);

    let mut review = self::review("pod-create-direct-mutate.json");
    review["request"]["object"]["spec"]["initContainers"] =
        json!([{"name": "envoy-mesh-init", "image": "x"}]);
    let (pod, namespace) = request(&review);
    let error = inject(pod, namespace, &mesh_config(), &NoEnvoys).unwrap_err();
    assert_eq!(error.metric_label(), "container_name_taken");
}

/// Sidecars that name an Envoy, or an xDS server, are what they were: the mesh is only for
/// pods naming nothing, and a default xDS server wins over it.
#[test]
fn naming_an_envoy_or_an_xds_server_is_no_mesh_sidecar() {
    let (catalog, config) = operator_fleet();
    let (_, _, _, summary) = injected_with("pod-naming-an-envoy.json", &config, &catalog);
    assert_eq!((summary.xds_source, summary.capture), (XdsSource::Envoy("edge-envoy".to_owned()), false));
    let with_default = InjectConfig { default_xds: Some(parse_xds("xds.mesh:18000").unwrap()), ..config };
    let (_, patched, _, summary) = injected_with("pod-create-direct-mutate.json", &with_default, &NoEnvoys);
    assert_eq!(summary.xds_source, XdsSource::Default);
    assert!(patched["spec"].get("initContainers").is_none());
}

#[test]
fn the_fleet_label_is_kept_when_present_and_never_contradicted() {
    let (catalog, config) = operator_fleet();
    let mut review = review("pod-naming-an-envoy.json");
    let labels = &mut review["request"]["object"]["metadata"]["labels"];
    labels[FLEET_LABEL] = json!("edge-envoy");
    let (pod, namespace) = request(&review);
    let Ok(Injection::Patched { patch, summary }) = inject(pod, namespace, &config, &catalog) else {
        panic!("a pod labelled as the fleet's is injected");
    };
    assert!(summary.status.labels.is_empty());
    assert!(!paths(&patch).iter().any(|path| path.starts_with("/metadata/labels")));
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &patch).unwrap();
    assert_only_added(pod, &patched);

    review["request"]["object"]["metadata"]["labels"][FLEET_LABEL] = json!("other");
    let (pod, namespace) = request(&review);
    let error = inject(pod, namespace, &config, &catalog).unwrap_err();
    assert_eq!(error.metric_label(), "invalid_annotation");
    assert!(error.to_string().contains(&format!("{FLEET_LABEL}=other")), "{error}");
}

/// The pod of the fixture naming `edge-envoy`, with `ports` on its container `shop`.
fn naming_an_envoy_with_ports(ports: Value) -> Value {
    let mut review = review("pod-naming-an-envoy.json");
    review["request"]["object"]["spec"]["containers"][0]["ports"] = ports;
    review
}

/// A sidecar naming an Envoy of the operator binds the fleet's listener ports in the pod: where
/// a container declares one, the two cannot both bind it (Envoy would reject its listener and
/// serve nothing while the pod looks Ready), so the pod is denied, saying which port and whose.
#[test]
fn a_pod_is_denied_a_sidecar_whose_listener_port_a_container_declares() {
    let (catalog, config) = operator_fleet();
    let review = naming_an_envoy_with_ports(json!([{"containerPort": 8080}]));
    let (pod, namespace) = request(&review);
    let error = inject(pod, namespace, &config, &catalog).unwrap_err();
    assert_eq!(error.metric_label(), "listener_port_taken");
    assert_eq!(
        error.to_string(),
        "annotation sidecar.example.com/envoy: the sidecar would bind port 8080 for the listener \"http\" of Envoy \"edge-envoy\", and container \"shop\" of the pod declares containerPort 8080: give the Envoy's port a targetPort the pod does not use, or remove the annotation"
    );
    // The webhook's reader keeps what the check reads: it decides the same.
    let read = read_for_injection(pod.to_string().as_bytes()).unwrap();
    assert_eq!(Injector::new(config.clone()).inject_json(&read, namespace, &catalog).unwrap_err(), error);

    // Other ports, and UDP (Envoy's listeners bind TCP), are no clash.
    for ports in [
        json!([{"containerPort": 80}, {"containerPort": 8443}]),
        json!([{"containerPort": 8080, "protocol": "UDP"}]),
    ] {
        let review = naming_an_envoy_with_ports(ports.clone());
        let (pod, namespace) = request(&review);
        assert!(
            matches!(inject(pod, namespace, &config, &catalog), Ok(Injection::Patched { .. })),
            "{ports}"
        );
    }
    // An Envoy with an xDS server of its own configures its sidecars' listeners itself: the
    // operator does not know them, and does not check.
    let text = "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge-envoy, namespace: shop}\n\
spec: {xds: {host: xds.mesh, port: 18000}}\n";
    let mut external = EnvoyCatalog::default();
    assert!(external.add_manifest("edge.yaml", text, "shop").is_empty());
    let review = naming_an_envoy_with_ports(json!([{"containerPort": 8080}]));
    let (pod, namespace) = request(&review);
    assert!(matches!(inject(pod, namespace, &config, &external), Ok(Injection::Patched { .. })));
}

/// The README's walkthrough: `port: 80, targetPort: 8080` binds 8080 in the pod, so an
/// application on 8080 is refused and one on 80 is not. Init containers count where they run
/// alongside the sidecar: restartable ones always, the others beside a native sidecar (which
/// starts first).
#[test]
fn the_listener_port_is_the_target_port_and_every_container_alongside_counts() {
    let text = "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge-envoy, namespace: shop}\n\
spec: {ports: [{name: web, port: 80, targetPort: 8080}]}\n";
    let mut catalog = EnvoyCatalog::default();
    assert!(catalog.add_manifest("edge.yaml", text, "shop").is_empty());
    let (_, config) = operator_fleet();
    let outcome = |review: &Value| {
        let (pod, namespace) = request(review);
        inject(pod, namespace, &config, &catalog).map_err(|error| error.metric_label())
    };
    assert!(outcome(&naming_an_envoy_with_ports(json!([{"containerPort": 80}]))).is_ok());
    let denied = outcome(&naming_an_envoy_with_ports(json!([{"containerPort": 8080, "name": "http"}])));
    assert_eq!(denied.unwrap_err(), "listener_port_taken");

    let mut with_init = review("pod-naming-an-envoy.json");
    with_init["request"]["object"]["spec"]["initContainers"] =
        json!([{"name": "migrate", "image": "m", "ports": [{"containerPort": 8080}]}]);
    assert!(outcome(&with_init).is_ok(), "a regular sidecar starts after the init containers are done");
    with_init["request"]["object"]["metadata"]["annotations"]["sidecar.example.com/native-sidecar"] =
        json!("true");
    assert_eq!(outcome(&with_init).unwrap_err(), "listener_port_taken");
    with_init["request"]["object"]["metadata"]["annotations"]["sidecar.example.com/native-sidecar"] =
        json!("false");
    with_init["request"]["object"]["spec"]["initContainers"][0]["restartPolicy"] = json!("Always");
    assert_eq!(outcome(&with_init).unwrap_err(), "listener_port_taken");
}

/// The sidecar serves its statistics on the readiness port: a pod with no scrape annotations
/// of its own gets Prometheus' conventional ones, recorded so `--uninject` removes exactly them;
/// a pod with any keeps its own, untouched.
#[test]
fn sidecar_pods_get_scrape_annotations_unless_they_have_their_own() {
    let (pod, patched, _, summary) = injected("pod-create-from-replicaset-mutate.json");
    let annotations = &patched["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/port"], "9902");
    assert_eq!(annotations["prometheus.io/path"], "/stats/prometheus");
    assert_eq!(
        summary.status.annotations,
        ["prometheus.io/path", "prometheus.io/port", "prometheus.io/scrape"]
    );
    assert_eq!(status_of(&patched), summary.status);
    assert_only_added(&pod, &patched);

    // Into annotations the pod has, next to them.
    let (pod, patched, _, _) = injected("pod-annotated-with-unknown-fields.json");
    assert_eq!(patched["metadata"]["annotations"]["prometheus.io/port"], "9902");
    assert_only_added(&pod, &patched);

    let mut own = review("pod-create-from-replicaset-mutate.json");
    own["request"]["object"]["metadata"]["annotations"] = json!({"prometheus.io/port": "8081"});
    let (original, namespace) = request(&own);
    let Ok(Injection::Patched { patch, summary }) =
        inject(original, namespace, &InjectConfig::default(), &NoEnvoys)
    else {
        panic!("injected");
    };
    assert!(summary.status.annotations.is_empty());
    assert!(!paths(&patch).iter().any(|path| path.contains("prometheus.io")), "{:?}", paths(&patch));
    let mut patched = original.clone();
    json_patch::patch(&mut patched, &patch).unwrap();
    let annotations = patched["metadata"]["annotations"].as_object().unwrap();
    assert_eq!(annotations.get("prometheus.io/port"), Some(&json!("8081")));
    assert!(annotations.get("prometheus.io/scrape").is_none());
    assert_only_added(original, &patched);
}

#[test]
fn without_the_control_plane_a_pod_naming_such_an_envoy_stays_admin_only() {
    let (catalog, _) = operator_fleet();
    let (_, patched, patch, summary) =
        injected_with("pod-naming-an-envoy.json", &InjectConfig::default(), &catalog);
    assert_eq!(
        paths(&patch)[..3],
        ["/spec/volumes/-", "/spec/containers/-", "/metadata/annotations/sidecar.example.com~1status"]
    );
    assert!(!paths(&patch).iter().any(|path| path.starts_with("/metadata/labels")));
    assert_eq!((summary.xds, summary.fleet), (None, None));
    assert!(summary.notes.iter().any(|note| note.contains("has no spec.xds")), "{:?}", summary.notes);
    assert!(patched["metadata"]["labels"].get(FLEET_LABEL).is_none());
}

#[test]
fn the_template_hash_changes_with_the_sidecar() {
    let hash = |config: &InjectConfig| {
        injected_with("pod-create-from-replicaset-mutate.json", config, &NoEnvoys).3.status.hash
    };
    let base = hash(&InjectConfig::default());
    assert_eq!(base, hash(&InjectConfig::default()));
    assert_ne!(
        base,
        hash(&InjectConfig { image: "envoyproxy/envoy:v1.35.0".to_owned(), ..Default::default() })
    );
    let xds = parse_xds("xds.mesh:18000").ok();
    assert_ne!(base, hash(&InjectConfig { default_xds: xds, ..Default::default() }));
}

#[test]
fn offline_and_webhook_produce_the_same_pod() {
    let (_, patched, _, _) = injected("pod-create-from-replicaset-mutate.json");
    let review = review("pod-create-from-replicaset-mutate.json");
    let (pod, _) = request(&review);
    let config = InjectConfig::default();
    let options = Options { config: &config, envoys: &NoEnvoys, default_namespace: "shop", uninject: false };
    let Outcome::Changed { object, .. } = workload::process_object(pod.clone(), &options) else {
        panic!("the offline path should inject the pod");
    };
    assert_eq!(object, patched);
}

/// The webhook reads a pod keeping only the fields injection looks at; a Job's pod is told
/// apart by `spec.restartPolicy` and its ownerReference, so both must be kept (the reader
/// once dropped them, and a Job's pod got a regular sidecar that would keep it running).
#[test]
fn the_webhook_reads_what_tells_a_job_pod_apart() {
    let job_owner = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "backup", "uid": "u"}]);
    let pods = [
        json!({"metadata": {"generateName": "backup-"},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "work", "image": "busybox"}]}}),
        json!({"metadata": {"generateName": "backup-", "ownerReferences": job_owner},
            "spec": {"containers": [{"name": "work", "image": "busybox"}]}}),
    ];
    for supported in [true, false] {
        let config = InjectConfig { native_sidecars_supported: supported, ..Default::default() };
        let injector = Injector::new(config.clone());
        for pod in &pods {
            let read = read_for_injection(pod.to_string().as_bytes()).expect("the pod reads");
            let fast = injector.inject_json(&read, Some("shop"), &NoEnvoys);
            match (inject(pod, Some("shop"), &config, &NoEnvoys), fast) {
                (Ok(Injection::Patched { summary, .. }), Ok(Injection::Patched { summary: same, .. })) => {
                    assert!(supported && summary.native, "{pod}: a native sidecar");
                    assert_eq!(summary, same, "{pod}");
                }
                (Ok(Injection::Skipped(skip)), Ok(Injection::Skipped(same))) => {
                    assert_eq!((skip.reason, supported), (SkipReason::RunToCompletion, false), "{pod}");
                    assert_eq!(skip, same, "{pod}");
                }
                (whole, fast) => panic!("{pod}: inject gave {whole:?}, the webhook path {fast:?}"),
            }
        }
    }
}

#[test]
fn workload_templates_are_found() {
    let config = InjectConfig::default();
    let options =
        Options { config: &config, envoys: &NoEnvoys, default_namespace: "default", uninject: false };
    let template = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "app", "image": "x:1"}]}});
    for (api_version, kind, pointer) in [
        ("apps/v1", "Deployment", "/spec/template"),
        ("apps/v1", "StatefulSet", "/spec/template"),
        ("apps/v1", "DaemonSet", "/spec/template"),
        ("apps/v1", "ReplicaSet", "/spec/template"),
        ("v1", "ReplicationController", "/spec/template"),
        ("batch/v1", "Job", "/spec/template"),
        ("batch/v1", "CronJob", "/spec/jobTemplate/spec/template"),
    ] {
        let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
        let mut slot = &mut object;
        for key in pointer.trim_start_matches('/').split('/') {
            slot = &mut slot[key];
        }
        *slot = template.clone();
        let Outcome::Changed { object: changed, .. } = workload::process_object(object.clone(), &options)
        else {
            panic!("{kind}: expected a sidecar");
        };
        let pod = changed.pointer(pointer).unwrap();
        assert_eq!(names(&pod["spec"]["containers"]), ["app", "envoy"], "{kind}");
        assert!(changed["metadata"].get("annotations").is_none(), "{kind}: only the template is annotated");
    }
    let config_map =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}});
    assert!(
        matches!(workload::process_object(config_map.clone(), &options), Outcome::Unchanged { object, .. } if object == config_map)
    );
    let broken =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {}});
    assert!(matches!(workload::process_object(broken, &options), Outcome::Unreadable { .. }));
}

// --- The command line -------------------------------------------------------------------------

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn documents(text: &str) -> Vec<Value> {
    parse_documents(text).into_iter().map(|d| d.content.unwrap()).collect()
}

#[test]
fn cli_injects_the_example_deployment_once() {
    let first = cli(&["inject", "-f", "examples/deployment.yaml", "--envoys", "examples/envoy.yaml"], None);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let injected = stdout(&first);
    let deployment = &documents(&injected)[0];
    let template = &deployment["spec"]["template"];
    assert_eq!(names(&template["spec"]["containers"]), ["shop", "envoy"]);
    assert_eq!(template["spec"]["containers"][1]["resources"]["limits"]["memory"], "128Mi");
    assert!(String::from_utf8_lossy(&first.stderr).contains("injected sidecar"));

    let second = cli(&["inject", "-f", "-"], Some(&injected));
    assert!(second.status.success());
    assert_eq!(stdout(&second), injected, "a second run changes nothing");
    assert!(String::from_utf8_lossy(&second.stderr).contains("already_injected"));

    let removed = cli(&["inject", "--uninject", "-f", "-"], Some(&injected));
    assert!(removed.status.success());
    let original =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/deployment.yaml"))
            .unwrap();
    assert_eq!(documents(&stdout(&removed)), documents(&original), "--uninject restores the original");
}

#[test]
fn cli_passes_other_documents_through_and_fails_on_denials() {
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: fast}\n---\n\
apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: report}\nspec:\n  schedule: '@daily'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers: [{name: report, image: 'report:1'}]\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: bad, annotations: {sidecar.example.com/proxy-cpu: lots}}\nspec:\n  containers: [{name: app, image: 'app:1'}]\n";
    let output = cli(&["inject", "-f", "-"], Some(manifest));
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Pod bad in namespace default: annotation sidecar.example.com/proxy-cpu"),
        "{stderr}"
    );
    // All documents or none (issue #11): `inject | kubectl apply -f -` never applies part of a set.
    assert!(stdout(&output).is_empty(), "nothing is printed when a document fails");
    assert!(stderr.contains("nothing printed: every document or none, and 1 of 3 failed"), "{stderr}");

    let without_the_bad_pod = manifest.rsplit_once("---\n").map(|(head, _)| head).unwrap();
    let output = cli(&["inject", "-f", "-"], Some(without_the_bad_pod));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed = documents(&stdout(&output));
    assert_eq!(printed.len(), 2);
    assert_eq!(printed[0], documents(manifest)[0], "the ConfigMap is unchanged");
    // A Job's pod gets a native sidecar, so the Job can complete (issue #11).
    let job_pod = &printed[1]["spec"]["jobTemplate"]["spec"]["template"];
    assert_eq!(names(&job_pod["spec"]["containers"]), ["report"]);
    assert_eq!(names(&job_pod["spec"]["initContainers"]), ["envoy"]);
    assert_eq!(job_pod["spec"]["initContainers"][0]["restartPolicy"], "Always");
}

#[test]
fn cli_leaves_job_pods_alone_on_clusters_without_native_sidecars() {
    let manifest = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: once}\nspec:\n  template:\n    spec:\n      restartPolicy: OnFailure\n      containers: [{name: work, image: 'work:1'}]\n";
    let output = cli(&["inject", "-f", "-", "--kube-version", "1.28"], Some(manifest));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed = documents(&stdout(&output));
    assert_eq!(
        printed[0],
        documents(manifest)[0],
        "left alone: a regular sidecar would never let the Job finish"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("sidecar not injected (run_to_completion)"), "{stderr}");
}

#[test]
fn cli_reads_envoys_and_flags() {
    let output = cli(
        &[
            "inject",
            "-f",
            "examples/pod.yaml",
            "--envoys",
            "tests/fixtures/seeds/envoy.yaml",
            "--native-sidecar",
            "--image",
            "envoyproxy/envoy:v1.35.0",
        ],
        None,
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let pod = &documents(&stdout(&output))[0];
    let envoy = &pod["spec"]["initContainers"][0];
    assert_eq!(envoy["image"], "envoyproxy/envoy:v1.35.0");
    assert!(envoy["args"][1].as_str().unwrap().contains("xds-service.default"));
    assert!(String::from_utf8_lossy(&output.stderr).contains("from Envoy edge-envoy"));

    let bad_flag = cli(&["inject", "-f", "examples/pod.yaml", "--xds", "nowhere"], None);
    assert_eq!(bad_flag.status.code(), Some(2));
    let missing = cli(&["inject", "-f", "examples/does-not-exist.yaml"], None);
    assert_eq!(missing.status.code(), Some(1));
}

#[test]
fn cli_serves_sidecars_of_the_operators_envoys_with_xds_advertise() {
    // The example pod's application is on 8080: the Envoy's listener binds another port.
    let envoy = "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge-envoy}\n\
spec: {ports: [{name: http, port: 80, targetPort: 8000}]}\n";
    let args = ["inject", "-f", "examples/pod.yaml", "--envoys", "-"];
    let plain = cli(&args, Some(envoy));
    assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stderr));
    assert!(documents(&stdout(&plain))[0]["metadata"]["labels"].get(FLEET_LABEL).is_none());
    assert!(String::from_utf8_lossy(&plain.stderr).contains("has no spec.xds"));

    let served = cli(&[&args[..], &["--xds-advertise", "xds.example.internal:18000"]].concat(), Some(envoy));
    let stderr = String::from_utf8_lossy(&served.stderr);
    assert!(served.status.success(), "{stderr}");
    let pod = &documents(&stdout(&served))[0];
    assert_eq!(pod["metadata"]["labels"][FLEET_LABEL], "edge-envoy");
    assert_eq!(names(&pod["spec"]["volumes"]), ["envoy-tmp", "envoy-xds-ca", "envoy-xds-identity"]);
    assert!(pod["spec"]["containers"][1]["args"][1].as_str().unwrap().contains("xds.example.internal"));
    assert!(
        stderr.contains("the configuration of Envoy edge-envoy from the operator's control plane"),
        "{stderr}"
    );

    // On the default port, 8080, the sidecar's listener and the application would clash.
    let clashing = "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge-envoy}\nspec: {}\n";
    let denied =
        cli(&[&args[..], &["--xds-advertise", "xds.example.internal:18000"]].concat(), Some(clashing));
    assert_eq!(denied.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(stderr.contains("would bind port 8080") && stderr.contains("container \"solo\""), "{stderr}");

    let bad = cli(&[&args[..], &["--xds-advertise", "nowhere"]].concat(), Some(envoy));
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--xds-advertise \"nowhere\""));
}

// --- Properties -------------------------------------------------------------------------------

mod properties {
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    use super::*;

    fn arbitrary_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z/~.]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-zA-Z/~.]{0,10}", inner), 0..6)
                    .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
            ]
        })
    }

    fn maybe(value: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
        prop_oneof![1 => Just(None), 1 => Just(Some(Value::Null)), 4 => value.prop_map(Some)]
    }

    fn object(fields: Vec<(&'static str, Option<Value>)>) -> Value {
        Value::Object(fields.into_iter().filter_map(|(k, v)| v.map(|v| (k.to_owned(), v))).collect())
    }

    fn container() -> impl Strategy<Value = Value> {
        // Mostly pods that can be injected, some with a clashing name or port.
        let name = prop_oneof![12 => prop::sample::select(vec!["app", "worker", "envoy-tmp", "sidecar", ""]), 1 => prop::sample::select(vec!["envoy", "envoy-mesh-init"])];
        let port = prop_oneof![12 => prop::sample::select(vec![80i64, 8080, 15000]), 1 => prop::sample::select(vec![9901i64, 9902, 15001])];
        (
            name,
            maybe(
                prop::collection::vec(port.prop_map(|p| json!({"containerPort": p})), 0..3)
                    .prop_map(Value::Array),
            ),
            maybe(Just(json!("Always"))),
            arbitrary_json(),
        )
            .prop_map(|(name, ports, restart, extra)| {
                object(vec![
                    ("name", Some(json!(name))),
                    ("image", Some(json!("app:1"))),
                    ("ports", ports),
                    ("restartPolicy", restart),
                    ("futureField", Some(extra)),
                ])
            })
    }

    fn pod() -> impl Strategy<Value = Value> {
        let key = prop::sample::select(vec![
            "a",
            "example.com/x",
            "a~b/c",
            "sidecar.example.com/status",
            "sidecar.example.com/xds",
            "sidecar.example.com/native-sidecar",
            "sidecar.example.com/proxy-memory",
            "sidecar.example.com/envoy",
            "sidecar.example.com/mesh-capture",
            "sidecar.example.com/mesh-exclude-outbound-ports",
            "sidecar.example.com/mesh-exclude-outbound-cidrs",
        ]);
        let annotation_value = prop_oneof![
            "[a-z0-9.:/~-]{0,12}".prop_map(Value::String),
            Just(json!("xds.mesh:18000")),
            Just(json!("true")),
            Just(json!("64Mi")),
            Just(json!("edge-envoy")),
            Just(json!("false")),
            Just(json!("5432,6379")),
            Just(json!("10.0.0.0/8,fd00::/8")),
        ];
        let annotations = prop::collection::btree_map(key, annotation_value, 0..4)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()));
        let labels = prop::sample::select(vec![
            json!({}),
            json!({"app": "x"}),
            json!({"sidecar.example.com/inject": "false"}),
            json!({FLEET_LABEL: "edge-envoy"}),
            json!({FLEET_LABEL: "other", "app": "x"}),
            json!({MESH_SIDECAR_LABEL: "true"}),
            json!({MESH_SIDECAR_LABEL: "no"}),
        ]);
        let owners = prop::sample::select(vec![
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u"}]),
            json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "backup", "uid": "u"}]),
        ]);
        let metadata = (maybe(annotations), maybe(labels), prop::option::of("[a-z]{1,5}-"), maybe(owners))
            .prop_map(|(annotations, labels, generate, owners)| {
                object(vec![
                    ("annotations", annotations),
                    ("labels", labels),
                    ("generateName", generate.map(Value::String)),
                    ("ownerReferences", owners),
                ])
            });
        let volume =
            prop::sample::select(vec!["data", "envoy-tmp", "envoy-tmp-2", "envoy-tmp-3", "envoy-xds-ca"])
                .prop_map(|name| json!({"name": name, "emptyDir": {}}));
        let spec = (
            prop::collection::vec(container(), 0..4),
            maybe(prop::collection::vec(container(), 0..3).prop_map(Value::Array)),
            maybe(prop::collection::vec(volume, 0..4).prop_map(Value::Array)),
            maybe(prop_oneof![5 => Just(false), 1 => Just(true)].prop_map(Value::Bool)),
            maybe(prop::sample::select(vec!["Always", "OnFailure", "Never"]).prop_map(|p| json!(p))),
            maybe(prop::sample::select(vec!["default", "checkout", ""]).prop_map(|p| json!(p))),
        )
            .prop_map(
                |(containers, init, volumes, host_network, restart_policy, service_account)| {
                    object(vec![
                        ("containers", Some(Value::Array(containers))),
                        ("initContainers", init),
                        ("volumes", volumes),
                        ("hostNetwork", host_network),
                        ("restartPolicy", restart_policy),
                        ("serviceAccountName", service_account),
                    ])
                },
            );
        (maybe(metadata), spec)
            .prop_map(|(metadata, spec)| object(vec![("metadata", metadata), ("spec", Some(spec))]))
    }

    /// The Envoys and injector configuration of a case: `edge-envoy` in `shop`, without
    /// `spec.xds`, served by the operator's control plane when `control_plane`.
    fn configuration(native: bool, control_plane: bool) -> (EnvoyCatalog, InjectConfig) {
        let (envoys, config) = operator_fleet();
        let control_plane = config.control_plane.filter(|_| control_plane);
        (envoys, InjectConfig { native_sidecar: native, control_plane, ..config })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn arbitrary_json_never_panics(value in arbitrary_json(), namespace in prop::option::of("[a-z-]{0,12}")) {
            let _ = inject(&value, namespace.as_deref(), &InjectConfig::default(), &NoEnvoys);
            let mut value = value;
            let _ = uninject(&mut value);
        }

        #[test]
        fn the_webhook_path_decides_and_patches_as_inject_does(
            pod in pod(),
            native in any::<bool>(),
            control_plane in any::<bool>(),
            supported in prop_oneof![3 => Just(true), 1 => Just(false)],
            namespace in prop_oneof![9 => Just("shop"), 1 => Just("kube-system")],
        ) {
            // The webhook reads only what injection looks at, and writes the patch from the
            // prepared sidecar's JSON: the outcome must be exactly `inject`'s on the whole pod.
            let (envoys, config) = configuration(native, control_plane);
            let config = InjectConfig { native_sidecars_supported: supported, ..config };
            let injector = Injector::new(config.clone());
            let read = read_for_injection(pod.to_string().as_bytes()).expect("a pod's JSON reads");
            let whole = inject(&pod, Some(namespace), &config, &envoys);
            match (whole, injector.inject_json(&read, Some(namespace), &envoys)) {
                (Ok(Injection::Patched { patch, summary }), Ok(Injection::Patched { patch: json, summary: fast })) => {
                    let json: Value = serde_json::from_slice(&json).expect("the patch is JSON");
                    prop_assert_eq!(json, serde_json::to_value(&patch).unwrap());
                    prop_assert_eq!(summary, fast);
                }
                (Ok(Injection::Skipped(skip)), Ok(Injection::Skipped(same))) => prop_assert_eq!(skip, same),
                (Err(error), Err(same)) => prop_assert_eq!(error, same),
                (whole, fast) => prop_assert!(false, "inject gave {:?}, the webhook path {:?}", whole, fast),
            }
        }

        #[test]
        fn every_patch_applies_once(
            pod in pod(),
            native in any::<bool>(),
            control_plane in any::<bool>(),
            namespace in prop_oneof![9 => Just("shop"), 1 => Just("kube-system")],
        ) {
            let (envoys, config) = configuration(native, control_plane);
            let result = inject(&pod, Some(namespace), &config, &envoys);
            if let Ok(Injection::Patched { patch, summary }) = result {
                let mut patched = pod.clone();
                json_patch::patch(&mut patched, &patch).expect("the patch applies");
                let second = inject(&patched, Some(namespace), &config, &envoys);
                prop_assert!(matches!(second, Ok(Injection::Skipped(ref s)) if s.reason == SkipReason::AlreadyInjected));
                let spec = &patched["spec"];
                let mut containers = names(&spec["containers"]);
                containers.extend(names(&spec["initContainers"]));
                prop_assert_eq!(containers.iter().filter(|c| **c == "envoy").count(), 1, "one envoy");
                let volumes: Vec<&str> = names(&spec["volumes"]);
                for added in &summary.status.volumes {
                    prop_assert_eq!(volumes.iter().filter(|v| **v == added.as_str()).count(), 1);
                }
                // A sidecar of the operator's fleet: the pod is labelled as the fleet's; a mesh
                // sidecar's, as one (whatever value it had).
                match &summary.xds_source {
                    XdsSource::Mesh { .. } => {
                        prop_assert!(patched["metadata"]["labels"][MESH_SIDECAR_LABEL].is_string());
                        prop_assert!(patched["metadata"]["labels"].get(FLEET_LABEL) == pod["metadata"]["labels"].get(FLEET_LABEL));
                    }
                    _ if summary.fleet.is_some() => {
                        prop_assert_eq!(&patched["metadata"]["labels"][FLEET_LABEL], "edge-envoy");
                    }
                    _ => {}
                }
                let mut restored = patched.clone();
                prop_assert!(matches!(uninject(&mut restored), Ok(Uninjected::Removed(_))));
                let status_pointer = format!("/metadata/annotations/{}", STATUS.replace('/', "~1"));
                prop_assert!(restored.pointer(&status_pointer).is_none());
                prop_assert_eq!(&restored["spec"]["containers"], &pod["spec"]["containers"]);
                // Labels as they were (absent, `null` and empty alike, as for annotations).
                let labels = |pod: &Value| pod["metadata"]["labels"].as_object().filter(|l| !l.is_empty()).cloned();
                prop_assert_eq!(labels(&restored), labels(&pod));
            }
        }
    }
}

// --- Bounds -----------------------------------------------------------------------------------

/// A pod whose volumes are `names`.
fn pod_with_volumes(names: impl Iterator<Item = String>) -> Value {
    let volumes: Vec<Value> = names.map(|name| json!({"name": name})).collect();
    json!({"metadata": {"generateName": "web-"}, "spec": {"containers": [{"name": "app"}], "volumes": volumes}})
}

#[test]
fn with_every_tmp_volume_name_taken_the_next_free_one_is_found() {
    let limit = envoy_operator_core::inject::limits::MAX_VOLUMES;
    let taken =
        std::iter::once("envoy-tmp".to_owned()).chain((2..limit + 1).map(|n| format!("envoy-tmp-{n}")));
    let pod = pod_with_volumes(taken);
    let Ok(Injection::Patched { summary, .. }) =
        inject(&pod, Some("shop"), &InjectConfig::default(), &NoEnvoys)
    else {
        panic!("expected a patch");
    };
    assert_eq!(summary.status.volumes, [format!("envoy-tmp-{}", limit + 1)]);
}

#[test]
fn a_pod_over_a_cap_is_denied_with_how_to_opt_out() {
    let pod = pod_with_volumes((0..65_536).map(|n| format!("v{n}")));
    let error = inject(&pod, Some("shop"), &InjectConfig::default(), &NoEnvoys).unwrap_err();
    assert_eq!(error.metric_label(), "too_large");
    assert_eq!(
        error.to_string(),
        "the pod has 65536 volumes, more than the 1024 the injector handles: opt it out with the label sidecar.example.com/inject=false"
    );
    // An opted-out or already injected pod is still just left alone.
    let mut opted_out = pod.clone();
    opted_out["metadata"]["labels"] = json!({"sidecar.example.com/inject": "false"});
    let skipped = inject(&opted_out, Some("shop"), &InjectConfig::default(), &NoEnvoys).unwrap();
    assert!(matches!(skipped, Injection::Skipped(s) if s.reason == SkipReason::OptedOut));
}
