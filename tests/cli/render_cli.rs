//! `envoy-operator render` as a user runs it, and `render --xds`, whose resources a real Envoy
//! must accept.

use std::path::PathBuf;
use std::process::Output;

use crate::envoy_operator;
use envoy_operator_core::manifest::parse_documents;
use serde_json::{Value, json};

fn render(args: &[&str], stdin: &str) -> Output {
    envoy_operator(&[&["render"], args].concat(), Some(stdin))
}

#[test]
fn renders_the_children_of_the_seed_examples() {
    let output =
        render(&["-f", "tests/fixtures/seeds/envoy.yaml", "-f", "tests/fixtures/seeds/foo.yaml"], "");
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    let kinds: Vec<String> = parse_documents(&stdout)
        .into_iter()
        .map(|d| d.content.expect("YAML")["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(kinds, ["ConfigMap", "Deployment", "Service", "Deployment"]);
    assert!(stdout.contains("# Foo example-foo: the status the reconciler aims for"));
    assert!(stdout.contains("image: nginx:1.27.3"));
}

#[test]
fn renders_every_example_and_skips_other_kinds() {
    let output = render(&["-f", "examples/"], "");
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    let documents = parse_documents(&String::from_utf8_lossy(&output.stdout));
    assert!(documents.len() >= 4);
    assert!(documents.iter().all(|d| d.content.is_ok()));
}

#[test]
fn the_nginx_image_flag_reaches_the_deployment() {
    let output = render(&["-f", "examples/foo.yaml", "--nginx-image", "nginx:1.27.4"], "");
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("image: nginx:1.27.4"));
}

#[test]
fn an_invalid_foo_on_stdin_is_reported_and_fails() {
    let manifest = "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: bad\nspec:\n  replicas: 5000\n";
    let output = render(&["-f", "-"], manifest);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("The Foo \"bad\" is invalid: spec.replicas"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn lists_and_unserved_versions_fail_like_kubectl_would() {
    let list = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: samplecontroller.k8s.io/v1alpha1, kind: Foo, metadata: {name: big}, spec: {replicas: 5000}}\n";
    let output = render(&["-f", "-"], list);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("items[0]: The Foo \"big\" is invalid: spec.replicas"), "{stderr}");

    let unserved = "apiVersion: samplecontroller.k8s.io/v1\nkind: Foo\nmetadata: {name: x}\nspec: {}\n";
    let output = render(&["-f", "-"], unserved);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("Foo is served as samplecontroller.k8s.io/v1alpha1")
    );
}

#[test]
fn fleets_without_an_xds_server_get_the_bootstrap_of_the_operators_control_plane() {
    let envoy =
        "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge, namespace: shop}\nspec: {}\n";
    let default = render(&["-f", "-"], envoy);
    assert!(default.status.success(), "stderr: {}", String::from_utf8_lossy(&default.stderr));
    let default = String::from_utf8(default.stdout).expect("UTF-8");
    assert!(
        default.contains("envoy_operator_xds") && default.contains("envoy-operator-xds.envoy-operator.svc"),
        "the operator's xDS Service, as `run` applies:\n{default}"
    );
    assert!(!default.contains("xds-ca.yaml:"), "no CA file without --xds-ca-file:\n{default}");

    let advertised = render(&["-f", "-", "--xds-advertise", "xds.example.internal:18000"], envoy);
    assert!(advertised.status.success(), "stderr: {}", String::from_utf8_lossy(&advertised.stderr));
    let advertised = String::from_utf8(advertised.stdout).expect("UTF-8");
    assert!(advertised.contains("xds.example.internal"), "{advertised}");
}

// --- render --xds ------------------------------------------------------------------------------

/// The example's Envoy (examples/envoy.yaml) on the operator's control plane: without spec.xds.
const OPERATOR_EDGE: &str =
    "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge-envoy}\nspec: {}\n";
const EXAMPLE_CLUSTER: &str = "crates/core/tests/testdata/xds/example/cluster.yaml";

fn type_urls(document: &Value) -> Vec<&str> {
    document["xds"].as_array().unwrap().iter().map(|r| r["type_url"].as_str().unwrap()).collect()
}

#[test]
fn xds_prints_each_fleets_resources_in_push_order_with_the_route_statuses() {
    let output =
        render(&["--xds", "-f", "examples/envoyroute.yaml", "-f", EXAMPLE_CLUSTER, "-f", "-"], OPERATOR_EDGE);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(stdout.starts_with("# Envoy default/edge-envoy: the xDS resources"), "{stdout}");
    assert!(
        stdout.contains("#   EnvoyRoute shop (parentRef edge-envoy): Accepted, ResolvedRefs\n"),
        "the route statuses, as comments: {stdout}"
    );
    let documents: Vec<Value> = parse_documents(&stdout).into_iter().map(|d| d.content.unwrap()).collect();
    assert_eq!(documents.len(), 1);
    let fleet = &documents[0];
    assert_eq!(fleet["fleet"], "default/edge-envoy");
    assert_eq!(
        type_urls(fleet),
        [
            "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            "type.googleapis.com/envoy.config.listener.v3.Listener",
            "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
        ]
    );
    let clusters: Vec<&str> = fleet["xds"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(clusters, ["default/shop-api-canary/80", "default/shop-api/80"]);
    let status = &fleet["route_statuses"][0];
    assert_eq!(
        (status["route"].as_str(), status["accepted"]["reason"].as_str()),
        (Some("shop"), Some("Accepted"))
    );

    // The same as JSON, for jq.
    let json = render(
        &["--xds", "-o", "json", "-f", "examples/envoyroute.yaml", "-f", EXAMPLE_CLUSTER, "-f", "-"],
        OPERATOR_EDGE,
    );
    assert!(json.status.success());
    let json: Value = serde_json::from_slice(&json.stdout).expect("a JSON array");
    assert_eq!(json, json!([fleet]));
}

#[test]
fn xds_says_what_it_does_not_render() {
    // The seed's Envoy has its own xDS server; the route's parent is then not rendered.
    let output =
        render(&["--xds", "-f", "tests/fixtures/seeds/envoy.yaml", "-f", "examples/envoyroute.yaml"], "");
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Envoy default/edge-envoy: its proxies take their configuration from its spec.xds"),
        "{stderr}"
    );
    assert!(
        stderr.contains("EnvoyRoute default/shop: its parent Envoy edge-envoy is not rendered here"),
        "{stderr}"
    );
    assert!(stderr.contains("error: no Envoy without spec.xds"), "{stderr}");

    let flags = render(&["--xds", "-f", "-", "--xds-advertise", "xds.example.internal:18000"], OPERATOR_EDGE);
    assert_eq!(flags.status.code(), Some(2), "the control plane's address plays no part in the resources");
}

/// The every-feature case of the core's translation tests, its Envoy on the operator's control plane.
fn gateway_on_the_operator() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/core/tests/testdata/xds/every-feature/input.yaml");
    let input = std::fs::read_to_string(path).expect("the every-feature case");
    let without_xds = input.replace("  xds: {host: xds.envoy-operator, port: 18000}\n", "");
    assert_ne!(input, without_xds, "the gateway's spec.xds is removed");
    without_xds
}

#[test]
fn xds_prints_what_it_can_and_reports_routes_apply_would_refuse() {
    let output = render(&["--xds", "-o", "json", "-f", "-"], &gateway_on_the_operator());
    // The route stored while the webhook was down: `kubectl apply` would refuse it.
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("The EnvoyRoute \"broken\" is invalid"), "{stderr}");
    assert!(stderr.contains("1 of 17 documents not rendered"), "{stderr}");
    let fleets: Vec<Value> = serde_json::from_slice(&output.stdout).expect("the others are printed");
    assert_eq!(fleets.len(), 1);
    assert_eq!(fleets[0]["fleet"], "shop/gateway");
    let statuses: Vec<String> = fleets[0]["route_statuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!("{} {}", s["route"].as_str().unwrap(), s["resolvedRefs"]["reason"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        statuses,
        ["api InvalidKind", "api InvalidKind", "redirects ResolvedRefs", "storefront BackendNotFound"]
    );
}

/// A route with a misspelt field, which `kubectl apply` refuses (strict field validation):
/// reported in the API server's words and left out, the others still served; exit 1.
#[test]
fn xds_leaves_out_a_route_with_an_unknown_field() {
    let typo = "apiVersion: example.com/v1\nkind: EnvoyRoute\nmetadata: {name: typo}\n\
        spec:\n  parentRefs: [{name: edge-envoy}]\n  rules:\n  - backendRef: [{name: shop-api, port: 80}]\n";
    let output = render(
        &["--xds", "-o", "json", "-f", "examples/envoyroute.yaml", "-f", EXAMPLE_CLUSTER, "-f", "-"],
        &format!("{OPERATOR_EDGE}---\n{typo}"),
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "error: - (document 2, line 6): EnvoyRoute in version \"v1\" cannot be handled as a EnvoyRoute: \
             strict decoding error: unknown field \"spec.rules[0].backendRef\""
        ),
        "{stderr}"
    );
    assert!(stderr.contains("1 of "), "{stderr}");
    let fleets: Vec<Value> = serde_json::from_slice(&output.stdout).expect("the fleet is printed");
    let routes: Vec<&str> = fleets[0]["route_statuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["route"].as_str().unwrap())
        .collect();
    assert_eq!(routes, ["shop"], "the misspelt route is not served as if it had no backends");
}
