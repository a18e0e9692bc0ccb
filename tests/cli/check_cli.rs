//! The offline `check` command, run as a user runs it.

use std::path::Path;

use crate::envoy_operator;
use envoy_operator_core::manifest::parse_documents;
use serde_json::Value;

fn check_stdin(manifest: &str) -> (bool, Vec<Value>, String) {
    let output = envoy_operator(&["check", "-f", "-"], Some(manifest));
    let stdout = String::from_utf8(output.stdout).expect("utf-8 stdout");
    let documents =
        parse_documents(&stdout).into_iter().map(|d| d.content.expect("stdout is YAML")).collect();
    (output.status.success(), documents, String::from_utf8(output.stderr).expect("utf-8 stderr"))
}

#[test]
fn the_examples_pass_and_come_back_defaulted() {
    let output = envoy_operator(&["check", "-f", "examples/"], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "check -f examples/ failed: {stderr}");
    let documents: Vec<Value> = parse_documents(&String::from_utf8_lossy(&output.stdout))
        .into_iter()
        .map(|d| d.content.expect("stdout is YAML"))
        .collect();
    let find = |name: &str| documents.iter().find(|d| d["metadata"]["name"] == name).expect(name);

    let foo = find("example-foo");
    assert_eq!(foo["spec"], serde_json::json!({"deploymentName": "example-foo", "replicas": 1}));
    let envoy = find("edge-envoy");
    assert_eq!(envoy["spec"]["name"], "webserver-beta");
    assert_eq!(envoy["spec"]["configMapName"], "envoy-cfg-1");
    assert_eq!(envoy["spec"]["replicas"], 2);
    assert!(envoy["spec"].get("xds").is_none(), "served by the operator's control plane");
    assert_eq!(
        envoy["spec"]["ports"],
        serde_json::json!([{"name": "http", "port": 80, "targetPort": 10080}])
    );
    assert!(envoy["spec"]["image"].as_str().is_some_and(|i| i.starts_with("envoyproxy/envoy:v")));
    let minimal = find("minimal-foo");
    assert_eq!(minimal["spec"]["deploymentName"], "minimal-foo");
    let route = documents.iter().find(|d| d["kind"] == "EnvoyRoute").expect("the EnvoyRoute");
    assert_eq!(route["metadata"]["name"], "shop");
    assert_eq!(
        route["spec"]["rules"][1]["backendRefs"][0],
        serde_json::json!({"group": "", "kind": "Service", "name": "shop-api", "port": 80, "weight": 90})
    );
    assert_eq!(route["spec"]["rules"][0]["matches"][0]["headers"][0]["type"], "Exact");
}

#[test]
fn the_seed_manifests_are_the_seeds_unchanged_and_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let seeds = root.join("tests/fixtures/seeds");
    let foo = std::fs::read_to_string(seeds.join("foo.yaml")).expect("tests/fixtures/seeds/foo.yaml");
    let envoy = std::fs::read_to_string(seeds.join("envoy.yaml")).expect("tests/fixtures/seeds/envoy.yaml");
    let example_foo = std::fs::read_to_string(root.join("examples/foo.yaml")).expect("examples/foo.yaml");
    assert_eq!(example_foo, foo, "examples/foo.yaml is the seed's Foo");
    let output = envoy_operator(
        &["check", "-f", "tests/fixtures/seeds/foo.yaml,tests/fixtures/seeds/envoy.yaml"],
        None,
    );
    assert!(
        output.status.success(),
        "the seeds apply unchanged: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let parse = |text: &str| parse_documents(text).remove(0).content.expect("YAML");
    assert_eq!(
        parse(&foo),
        serde_json::json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
            "metadata": {"name": "example-foo"}, "spec": {"deploymentName": "example-foo", "replicas": 1}})
    );
    assert_eq!(
        parse(&envoy),
        serde_json::json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "edge-envoy"},
            "spec": {"name": "webserver-beta", "configMapName": "envoy-cfg-1", "replicas": 3,
                     "xds": {"name": "xds_cluster", "host": "xds-service.default", "port": 19000}}})
    );
}

#[test]
fn negative_replicas_are_rejected_with_a_field_path() {
    let (ok, documents, stderr) = check_stdin(
        "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: bad-foo\nspec:\n  replicas: -1\n",
    );
    assert!(!ok);
    assert!(documents.is_empty(), "a rejected object is not printed");
    assert!(
        stderr.contains(
            "error: - (document 1, line 1): The Foo \"bad-foo\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        ),
        "{stderr}"
    );
}

#[test]
fn an_out_of_range_xds_port_is_rejected_with_a_field_path() {
    let (ok, _, stderr) = check_stdin(
        "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: e}\nspec:\n  xds: {host: xds, port: 70000}\n",
    );
    assert!(!ok);
    assert!(
        stderr.contains(
            "The Envoy \"e\" is invalid: spec.xds.port: Invalid value: 70000: must be between 1 and 65535, inclusive"
        ),
        "{stderr}"
    );
}

#[test]
fn one_bad_document_does_not_hide_the_others() {
    let manifest = "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: good}\nspec: {}\n---\n\
                    apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: bad}\nspec: {replicas: [1]}\n---\n\
                    apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {a: b}\n";
    let (ok, documents, stderr) = check_stdin(manifest);
    assert!(!ok);
    assert_eq!(documents.len(), 2, "the good Foo and the ConfigMap are printed");
    assert_eq!(documents[0]["spec"]["replicas"], 1);
    assert_eq!(documents[1]["data"]["a"], "b", "other kinds pass through unchanged");
    assert!(
        stderr.contains(
            "(document 2, line 6): The Foo \"bad\" is invalid: spec.replicas: Invalid value: \"array\": spec.replicas in body must be of type integer: \"array\""
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("(document 3, line 11): v1 ConfigMap is not a kind envoy-operator admits"),
        "{stderr}"
    );
    assert!(stderr.contains("1 of 3 documents rejected"), "{stderr}");
}

#[test]
fn warnings_go_to_stderr_and_do_not_fail() {
    let (ok, documents, stderr) = check_stdin(
        "{\"apiVersion\": \"samplecontroller.k8s.io/v1alpha1\", \"kind\": \"Foo\", \"metadata\": {\"name\": \"idle\"}, \"spec\": {\"replicas\": 0}}",
    );
    assert!(ok, "{stderr}");
    assert_eq!(documents.len(), 1);
    assert!(
        stderr
            .contains("Warning: - (document 1, line 1): spec.replicas: 0: the Deployment is scaled to zero"),
        "{stderr}"
    );
}

#[test]
fn broken_input_is_named_and_never_panics() {
    let cases = [
        ("key: [unclosed\n", "(document 1, line 1): not valid YAML or JSON"),
        ("- just\n- a list\n", "expected a Kubernetes object (a mapping), found a sequence"),
        ("metadata: {name: x}\n", "`apiVersion` and `kind` must both be set"),
        (
            "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: e}\nspec: {replicas: many}\n",
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
        ),
        ("{\"apiVersion\": \"example.com/v1\", \"kind\": \"Envoy\"", "not valid YAML or JSON"),
        ("apiVersion: samplecontroller.k8s.io/v1beta1\nkind: Foo\nmetadata: {name: x}\n", ""),
    ];
    for (manifest, expected) in cases {
        let (_, _, stderr) = check_stdin(manifest);
        assert!(!stderr.contains("panicked"), "{manifest:?} made check panic: {stderr}");
        assert!(stderr.contains(expected), "{manifest:?}: expected {expected:?} in {stderr}");
    }
    let (ok, _, stderr) =
        check_stdin("apiVersion: samplecontroller.k8s.io/v1beta1\nkind: Foo\nmetadata: {name: x}\n");
    assert!(!ok, "kubectl apply would refuse a version the API server does not serve: {stderr}");
    assert!(
        stderr.contains(
            "error: - (document 1, line 1): Foo is served as samplecontroller.k8s.io/v1alpha1, not samplecontroller.k8s.io/v1beta1"
        ),
        "{stderr}"
    );
    let (ok, _, stderr) =
        check_stdin("apiVersion: samplecontroller.k8s.io/v1\nkind: foo\nmetadata: {name: x}\n");
    assert!(!ok);
    assert!(stderr.contains("did you mean Foo (samplecontroller.k8s.io/v1alpha1)"), "{stderr}");
}

#[test]
fn a_foo_without_spec_is_defaulted_like_an_empty_one() {
    let (ok, documents, stderr) =
        check_stdin("apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: x}\n");
    assert!(ok, "{stderr}");
    assert_eq!(documents[0]["spec"], serde_json::json!({"deploymentName": "x", "replicas": 1}));
}

#[test]
fn every_error_of_an_object_is_reported_in_the_api_servers_words() {
    let (ok, _, stderr) = check_stdin(
        "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: e}\nspec: {replicas: three, serviceType: Ingress, image: 'Bad Image'}\n",
    );
    assert!(!ok);
    for expected in [
        "* spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
        "* spec.serviceType: Unsupported value: \"Ingress\": supported values: \"ClusterIP\", \"NodePort\", \"LoadBalancer\"",
        "* spec.image: Invalid value: \"Bad Image\"",
    ] {
        assert!(stderr.contains(expected), "expected {expected:?} in {stderr}");
    }
    assert!(!stderr.contains("invalid type"), "no Rust wording: {stderr}");
}

#[test]
fn lists_are_checked_item_by_item() {
    let list = "apiVersion: v1\nkind: List\nitems:\n\
                - {apiVersion: samplecontroller.k8s.io/v1alpha1, kind: Foo, metadata: {name: big}, spec: {replicas: 5000}}\n\
                - {apiVersion: samplecontroller.k8s.io/v1alpha1, kind: Foo, metadata: {name: ok}, spec: {}}\n";
    let (ok, documents, stderr) = check_stdin(list);
    assert!(!ok, "a List holding an invalid Foo fails: {stderr}");
    assert!(
        stderr.contains(
            "(document 1, line 1) items[0]: The Foo \"big\" is invalid: spec.replicas: Invalid value: 5000"
        ),
        "{stderr}"
    );
    assert_eq!(documents.len(), 1, "the valid item is printed, defaulted");
    assert_eq!(documents[0]["spec"]["replicas"], 1);
}

#[test]
fn names_too_long_for_a_label_value_are_refused() {
    let name = "n".repeat(64);
    let (ok, _, stderr) = check_stdin(&format!(
        "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {{name: {name}}}\nspec: {{}}\n"
    ));
    assert!(!ok);
    assert!(stderr.contains("metadata.name: Invalid value:"), "{stderr}");
    assert!(stderr.contains("must be no more than 63 characters"), "{stderr}");
}

#[test]
fn yaml_errors_point_at_the_files_own_lines() {
    let (ok, _, stderr) = check_stdin(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: b}\nspec:\n  replicas: 1\n  replicas: 2\n",
    );
    assert!(!ok);
    assert!(stderr.contains("mapping key \"replicas\" already defined"), "{stderr}");
    assert!(stderr.contains("10 |   replicas: 2"), "the snippet shows the file's line 10: {stderr}");
}

#[test]
fn empty_input_is_an_error() {
    for manifest in ["", "---\n---\n", "# only a comment\n"] {
        let (ok, _, stderr) = check_stdin(manifest);
        assert!(!ok, "{manifest:?} should fail");
        assert!(stderr.contains("error: no documents in -"), "{manifest:?}: {stderr}");
    }
}

#[test]
fn huge_and_missing_files_are_refused_clearly() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let huge = dir.path().join("huge.yaml");
    let line = format!("# {}\n", "x".repeat(1022));
    std::fs::write(&huge, line.repeat(17 * 1024)).expect("write the huge file");
    let output = envoy_operator(&["check", "-f", huge.to_str().expect("utf-8 path")], None);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let size = std::fs::metadata(&huge).expect("the huge file").len();
    assert!(
        stderr.contains(&format!("is {size} bytes, over the 16777216-byte limit for one input")),
        "{stderr}"
    );

    let output = envoy_operator(&["check", "-f", "does/not/exist.yaml"], None);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("error: reading does/not/exist.yaml"));
}

/// As `kubectl apply` (strict field validation, its default) refuses them: for our kinds and
/// the Gateway API's alike, every unknown field named, the object not printed.
#[test]
fn misspelt_fields_are_refused_as_the_api_server_refuses_them() {
    let (ok, documents, stderr) = check_stdin(
        "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: typo}\nspec: {replica: 3}\n",
    );
    assert!(!ok, "{stderr}");
    assert!(documents.is_empty());
    assert!(
        stderr.contains(
            "error: - (document 1, line 1): Foo in version \"v1alpha1\" cannot be handled as a Foo: \
             strict decoding error: unknown field \"spec.replica\""
        ),
        "{stderr}"
    );

    let route = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web}\n\
        spec:\n  parentRefs: [{name: gw}]\n  rules:\n  - backendRef: [{name: web, port: 80}]\n    timeout: {request: 1s}\n";
    let grant = "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: g}\n\
        spec:\n  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: a}]\n  to: [{group: '', kind: Service}]\n";
    let (ok, documents, stderr) = check_stdin(&format!("{route}---\n{grant}"));
    assert!(!ok, "{stderr}");
    assert_eq!(documents.len(), 1, "the grant is printed: {stderr}");
    assert!(
        stderr.contains(
            "error: - (document 1, line 1): HTTPRoute in version \"v1\" cannot be handled as a HTTPRoute: \
             strict decoding error: unknown field \"spec.rules[0].backendRef\", unknown field \"spec.rules[0].timeout\""
        ),
        "{stderr}"
    );
    assert!(stderr.contains("1 of 2 documents rejected"), "{stderr}");
}
