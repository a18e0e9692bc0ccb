//! The Gateway API through the command line: `render --xds` prints a Gateway's fleet's
//! resources and statuses (never a private key), `check` reports what the operator could not
//! serve of a Gateway or an HTTPRoute; the README's example manifests render.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use envoy_operator_core::manifest::parse_documents;
use serde_json::{Value, json};

use crate::envoy_operator;

const EXAMPLE: &str = "examples/gateway-api/";

const CLASS: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: envoy-operator}
spec: {controllerName: example.com/envoy-operator}
";

/// `render --xds -o json` of `stdin`: exit code, the documents, stderr.
fn render_json(stdin: &str) -> (Option<i32>, Vec<Value>, String) {
    let output = envoy_operator(&["render", "--xds", "-o", "json", "-f", "-"], Some(stdin));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let documents: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("a JSON array ({e}); stderr: {stderr}"));
    (output.status.code(), documents.as_array().cloned().unwrap_or_default(), stderr)
}

/// The resources of a rendered document whose type URL ends with `.{type_name}`.
fn resources<'a>(document: &'a Value, type_name: &str) -> Vec<&'a Value> {
    let suffix = format!(".{type_name}");
    document["xds"]
        .as_array()
        .expect("xds responses")
        .iter()
        .filter(|response| response["type_url"].as_str().is_some_and(|url| url.ends_with(&suffix)))
        .flat_map(|response| response["resources"].as_array().into_iter().flatten())
        .collect()
}

fn condition<'a>(conditions: &'a Value, type_: &str) -> &'a Value {
    conditions
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} in {conditions}"))
}

/// The README's walkthrough: the example as committed (the HTTPS listener waits for its
/// Secret), then with the Secret the README makes.
#[test]
fn the_readme_example_renders_a_listener_per_port_and_the_route() {
    let output = envoy_operator(&["render", "--xds", "-f", EXAMPLE], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "render --xds -f {EXAMPLE} failed: {stderr}");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(stdout.starts_with("# Gateway default/shop: "), "{stdout}");
    assert!(
        stdout.contains("#   HTTPRoute default/shop (parentRef shop): Accepted, ResolvedRefs\n"),
        "{stdout}"
    );
    let documents: Vec<Value> = parse_documents(&stdout).into_iter().map(|d| d.content.unwrap()).collect();
    assert_eq!(documents.len(), 1, "one Gateway");
    let gateway = &documents[0];
    assert_eq!(gateway["gateway"], "default/shop");
    assert_eq!(gateway["fleet"], "default/shop-envoy-operator", "<gateway>-<class>");
    let listeners = gateway["status"]["listeners"].as_array().expect("listener statuses");
    let names: Vec<&str> = listeners.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["http", "https"]);
    assert_eq!(condition(&gateway["status"]["conditions"], "Accepted")["status"], "True");
    // Without its Secret, the HTTPS listener is said invalid and not served.
    let https = &listeners[1]["conditions"];
    assert_eq!(condition(https, "ResolvedRefs")["reason"], "InvalidCertificateRef", "{https}");
    assert_eq!(listener_ports(gateway), [10080]);
    let clusters: Vec<&str> =
        resources(gateway, "Cluster").iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(clusters, ["default/web/80"]);
    let route = &gateway["route_statuses"][0];
    assert_eq!(route["route"], "default/shop");
    assert_eq!(
        (&route["accepted"]["status"], &route["resolvedRefs"]["status"]),
        (&json!(true), &json!(true))
    );

    // With the Secret, both listeners, on the unprivileged ports their Gateway ports map to.
    let (certificate, key) = self_signed("shop.example.test");
    let secret = tls_secret("shop-tls", None, &certificate, &key);
    let output = envoy_operator(&["render", "--xds", "-o", "json", "-f", EXAMPLE, "-f", "-"], Some(&secret));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let documents: Value = serde_json::from_slice(&output.stdout).expect("a JSON array");
    let gateway = &documents[0];
    assert_eq!(condition(&gateway["status"]["listeners"][1]["conditions"], "ResolvedRefs")["status"], "True");
    assert_eq!(listener_ports(gateway), [10080, 10443]);
}

/// The ports of a rendered document's listeners, sorted.
fn listener_ports(document: &Value) -> Vec<i64> {
    let mut ports: Vec<i64> = resources(document, "Listener")
        .iter()
        .map(|l| l["address"]["socket_address"]["port_value"].as_i64().expect("a port"))
        .collect();
    ports.sort_unstable();
    ports
}

/// A `kubernetes.io/tls` Secret, as `kubectl create secret tls` makes it.
fn tls_secret(name: &str, namespace: Option<&str>, certificate: &str, key: &str) -> String {
    let namespace = namespace.map(|ns| format!(", namespace: {ns}")).unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}{namespace}}}\ntype: kubernetes.io/tls\ndata: {{tls.crt: {}, tls.key: {}}}\n",
        STANDARD.encode(certificate),
        STANDARD.encode(key)
    )
}

/// A self-signed certificate for `name` and its key, as PEM.
fn self_signed(name: &str) -> (String, String) {
    let certified = rcgen::generate_simple_self_signed(vec![name.to_owned()]).expect("a certificate");
    (certified.cert.pem(), certified.signing_key.serialize_pem())
}

fn https_gateway(certificate: &str, key: &str) -> String {
    format!(
        "{CLASS}---
{secret}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: infra}}
spec:
  gatewayClassName: envoy-operator
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    hostname: '*.gateway.example.test'
    tls: {{mode: Terminate, certificateRefs: [{{name: wildcard}}]}}
    allowedRoutes: {{namespaces: {{from: All}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: shop}}
spec:
  parentRefs: [{{name: edge, namespace: infra}}]
  hostnames: [www.gateway.example.test]
  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: shop}}
spec: {{ports: [{{name: http, port: 80, targetPort: 8080}}]}}
",
        secret = tls_secret("wildcard", Some("infra"), certificate, key),
    )
}

#[test]
fn a_private_key_never_appears_in_the_output() {
    let (certificate, key) = self_signed("*.gateway.example.test");
    let manifests = https_gateway(&certificate, &key);
    // The key's body, in every form it could leak in: PEM lines, and the Secret's base64.
    let key_lines: Vec<&str> = key.lines().filter(|line| !line.starts_with("-----")).collect();
    let secret_data = STANDARD.encode(&key);
    for args in [&["render", "--xds", "-f", "-"][..], &["render", "--xds", "-o", "json", "-f", "-"]] {
        let output = envoy_operator(args, Some(&manifests));
        let (stdout, stderr) =
            (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{args:?}: {stderr}");
        for text in [&stdout, &stderr] {
            assert!(!text.contains("PRIVATE KEY"), "{args:?} prints a private key:\n{text}");
            assert!(!text.contains(&secret_data), "{args:?} prints the Secret's tls.key");
            for line in &key_lines {
                assert!(!text.contains(line), "{args:?} prints a line of the private key:\n{text}");
            }
        }
        // The certificate is there, its key redacted.
        assert!(stdout.contains("<redacted: "), "{args:?}: no redacted key in\n{stdout}");
        let first_line = certificate.lines().nth(1).expect("a PEM body");
        assert!(stdout.contains(first_line), "{args:?}: the certificate chain is rendered:\n{stdout}");
    }

    let (code, documents, stderr) = render_json(&manifests);
    assert_eq!(code, Some(0), "{stderr}");
    let gateway = &documents[0];
    assert_eq!(gateway["gateway"], "infra/edge");
    let secrets = resources(gateway, "Secret");
    assert_eq!(secrets.len(), 1, "{gateway}");
    let key_size = key.len();
    assert_eq!(
        secrets[0]["tls_certificate"]["private_key"]["inline_string"],
        format!("<redacted: {key_size} bytes>")
    );
    // Cross-namespace, allowed by the listener: attached and resolved.
    let route = &gateway["route_statuses"][0];
    assert_eq!(
        (route["route"].as_str(), &route["accepted"]["status"]),
        (Some("shop/web"), &Value::Bool(true))
    );
    assert_eq!(route["resolvedRefs"]["status"], true, "{route}");
}

#[test]
fn a_backend_across_namespaces_needs_a_reference_grant() {
    let manifests = format!(
        "{CLASS}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge}}
spec: {{gatewayClassName: envoy-operator, listeners: [{{name: http, port: 80, protocol: HTTP}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web}}
spec:
  parentRefs: [{{name: edge}}]
  rules: [{{backendRefs: [{{name: web, namespace: backends, port: 80}}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: backends}}
spec: {{ports: [{{name: http, port: 80}}]}}
"
    );
    let (code, documents, stderr) = render_json(&manifests);
    assert_eq!(code, Some(0), "{stderr}");
    let refused = &documents[0]["route_statuses"][0]["resolvedRefs"];
    assert_eq!(
        (&refused["status"], refused["reason"].as_str()),
        (&Value::Bool(false), Some("RefNotPermitted"))
    );

    let grant = "---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: routes-from-default, namespace: backends}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default}]
  to: [{group: '', kind: Service}]
";
    let (code, documents, stderr) = render_json(&format!("{manifests}{grant}"));
    assert_eq!(code, Some(0), "{stderr}");
    let resolved = &documents[0]["route_statuses"][0]["resolvedRefs"];
    assert_eq!(resolved["status"], true, "{resolved}");
}

/// Objects `kubectl apply` refuses for a field their CRD does not declare (strict field
/// validation) are reported in the API server's words and left out: a route misspelling
/// `backendRefs` is not served as one without backends, a grant with a field of another
/// version grants nothing. The Gateway is still printed; exit 1.
#[test]
fn gateway_api_objects_with_unknown_fields_are_refused_and_left_out() {
    let manifests = format!(
        "{CLASS}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge}}
spec: {{gatewayClassName: envoy-operator, listeners: [{{name: http, port: 80, protocol: HTTP}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: typo}}
spec:
  parentRefs: [{{name: edge}}]
  rules: [{{backendRef: [{{name: web, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web}}
spec:
  parentRefs: [{{name: edge}}]
  rules: [{{backendRefs: [{{name: web, namespace: backends, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {{name: routes-from-default, namespace: backends}}
spec:
  from: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default}}]
  to: [{{group: '', kind: Service, namespace: backends}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: backends}}
spec: {{ports: [{{name: http, port: 80}}]}}
"
    );
    let (code, documents, stderr) = render_json(&manifests);
    assert_eq!(code, Some(1), "{stderr}");
    for refusal in [
        "error: - (document 3, line 11): HTTPRoute in version \"v1\" cannot be handled as a HTTPRoute: \
         strict decoding error: unknown field \"spec.rules[0].backendRef\"",
        "error: - (document 5, line 25): ReferenceGrant in version \"v1beta1\" cannot be handled as a \
         ReferenceGrant: strict decoding error: unknown field \"spec.to[0].namespace\"",
        "2 of 6 documents not rendered",
    ] {
        assert!(stderr.contains(refusal), "{refusal}\n{stderr}");
    }
    let statuses = documents[0]["route_statuses"].as_array().unwrap();
    let routes: Vec<&str> = statuses.iter().map(|s| s["route"].as_str().unwrap()).collect();
    assert_eq!(routes, ["default/web"], "the misspelt route is left out");
    assert_eq!(statuses[0]["resolvedRefs"]["reason"], "RefNotPermitted", "the refused grant grants nothing");
}

#[test]
fn gateways_of_other_controllers_and_their_routes_are_said_not_rendered() {
    let manifests = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.net/another-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge}
spec: {gatewayClassName: other, listeners: [{name: http, port: 80, protocol: HTTP}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec: {parentRefs: [{name: edge}]}
";
    let output = envoy_operator(&["render", "--xds", "-f", "-"], Some(manifests));
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("note: Gateway default/edge: its GatewayClass other is not in the manifests, or names another controller"), "{stderr}");
    assert!(
        stderr.contains("note: HTTPRoute default/web: its parent Gateway default/edge is not rendered here"),
        "{stderr}"
    );
    assert!(stderr.contains("error: no Envoy without spec.xds and no Gateway"), "{stderr}");
}

#[test]
fn envoys_and_gateways_render_side_by_side() {
    let manifests = format!(
        "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {{name: mesh}}\nspec: {{}}\n---\n{CLASS}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge}}
spec: {{gatewayClassName: envoy-operator, listeners: [{{name: http, port: 80, protocol: HTTP}}]}}
"
    );
    let (code, documents, stderr) = render_json(&manifests);
    assert_eq!(code, Some(0), "{stderr}");
    let keys: Vec<(&Value, &Value)> = documents.iter().map(|d| (&d["fleet"], &d["gateway"])).collect();
    assert_eq!(
        keys,
        [
            (&Value::from("default/mesh"), &Value::Null),
            (&Value::from("default/edge-envoy-operator"), &Value::from("default/edge"))
        ]
    );
}

// --- check -------------------------------------------------------------------------------------

fn check(stdin: &str) -> (Option<i32>, String, String) {
    let output = envoy_operator(&["check", "-f", "-"], Some(stdin));
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn check_reports_an_httproute_with_a_backend_of_another_kind() {
    let route = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: edge}]
  rules: [{backendRefs: [{group: apps, kind: Deployment, name: web, port: 80}]}]
";
    let (code, stdout, stderr) = check(route);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains(
            "error: - (document 1, line 1): HTTPRoute web: the operator would not serve it as written: spec.rules[0].backendRefs[0]: Deployment.apps web is not a Service"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("1 of 1 documents rejected"), "{stderr}");
}

#[test]
fn check_reports_listener_problems_of_a_gateway() {
    let gateway = "\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge}
spec:
  gatewayClassName: envoy-operator
  listeners:
  - {name: https, port: 443, protocol: HTTPS}
  - {name: udp, port: 53, protocol: UDP}
";
    let (code, _, stderr) = check(gateway);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "spec.listeners[0] (https): an HTTPS listener terminating TLS needs tls.certificateRefs"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("listener udp: "), "the translation's verdict on the UDP listener: {stderr}");
}

#[test]
fn check_passes_the_readme_example_through() {
    let output = envoy_operator(&["check", "-f", EXAMPLE], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("HTTPRoute shop: the operator serves it as written"), "{stderr}");
    assert!(stderr.contains("Gateway shop: the operator serves it as written"), "{stderr}");
    assert!(stderr.contains("GatewayClass envoy-operator: the operator accepts it as written"), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let kinds: Vec<String> = parse_documents(&stdout)
        .into_iter()
        .map(|d| d.content.expect("YAML")["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(kinds, ["GatewayClass", "Gateway", "HTTPRoute", "Deployment", "Service"]);
}
