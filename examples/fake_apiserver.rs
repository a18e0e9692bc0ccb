//! A fake Kubernetes API server for measuring the controller's memory and write traffic
//! at scale without a cluster (`docs/reconcile.md`, "Memory"). It serves `N` Foos and,
//! unless `--fresh`, their Deployments as a real API server would hold them (with
//! `managedFields`, rolled-out status, and a status on each Foo that matches), answers
//! watches with streams that stay open, echoes server-side applies, and counts writes.
//!
//! ```text
//! cargo run --release --example fake_apiserver -- --foos 1000 --port 18080 --kubeconfig /tmp/fake.kubeconfig
//! KUBECONFIG=/tmp/fake.kubeconfig target/release/envoy-operator controller
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::Response;
use envoy_operator_core::api::{Foo, FooSpec};
use envoy_operator_core::children::foo::{desired_deployment, selector};
use envoy_operator_core::children::install::{self, InstallId};
use envoy_operator_core::children::status;
use envoy_operator_core::names::DEFAULT_NGINX_IMAGE;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

const NAMESPACE: &str = "bench";

struct State {
    foos: Value,
    deployments: Value,
    empty: Value,
    writes: AtomicUsize,
    reads: AtomicUsize,
    /// Objects applied since start, by path, so a later GET finds them.
    applied: Mutex<HashMap<String, Value>>,
}

/// What a real API server adds to a Deployment: defaults, managedFields, a rolled-out status.
fn served(mut deployment: Deployment, i: usize) -> Value {
    deployment.metadata.uid = Some(format!("deployment-uid-{i}"));
    deployment.metadata.resource_version = Some(format!("{}", 1000 + i));
    deployment.metadata.generation = Some(1);
    deployment.metadata.creation_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    let replicas = deployment.spec.as_ref().and_then(|s| s.replicas);
    deployment.status = Some(DeploymentStatus {
        observed_generation: Some(1),
        replicas,
        updated_replicas: replicas,
        ready_replicas: replicas,
        available_replicas: replicas,
        ..Default::default()
    });
    let mut value = serde_json::to_value(&deployment).unwrap_or_default();
    // Roughly what two managers (the operator and kube-controller-manager) leave behind.
    let fields = json!({"f:metadata": {"f:labels": {"f:app": {}, "f:controller": {}, "f:app.kubernetes.io/managed-by": {}},
        "f:ownerReferences": {"k:{\"uid\":\"foo-uid\"}": {}}},
        "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {"f:metadata": {"f:labels": {"f:app": {}, "f:controller": {}}},
        "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}});
    let status_fields = json!({"f:metadata": {"f:annotations": {"f:deployment.kubernetes.io/revision": {}}},
        "f:status": {"f:availableReplicas": {}, "f:conditions": {"k:{\"type\":\"Available\"}": {".": {}, "f:lastTransitionTime": {},
        "f:lastUpdateTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}}, "f:observedGeneration": {},
        "f:readyReplicas": {}, "f:replicas": {}, "f:updatedReplicas": {}}});
    value["metadata"]["managedFields"] = json!([
        {"manager": "envoy-operator", "operation": "Apply", "apiVersion": "apps/v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields},
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": status_fields, "subresource": "status"}
    ]);
    value
}

fn state(count: usize, fresh: bool) -> State {
    let mut foos = Vec::with_capacity(count);
    let mut deployments = Vec::with_capacity(count);
    let since = Time(Timestamp::UNIX_EPOCH);
    for i in 0..count {
        let name = format!("foo-{i:04}");
        let mut foo = Foo::new(&name, FooSpec { deployment_name: Some(name.clone()), replicas: Some(1) });
        foo.metadata.namespace = Some(NAMESPACE.to_owned());
        foo.metadata.uid = Some(format!("foo-uid-{i}"));
        foo.metadata.generation = Some(1);
        foo.metadata.resource_version = Some(format!("{}", 5000 + i));
        let defaulted = envoy_operator_core::rules::defaulted(foo.clone());
        let mut deployment = desired_deployment(&defaulted, DEFAULT_NGINX_IMAGE);
        // Applied by the install `controller` is here (its namespace's, by default).
        install::mark(&mut deployment.metadata, &InstallId::of_namespace(NAMESPACE));
        let served = served(deployment, i);
        if !fresh {
            let typed: Deployment = serde_json::from_value(served.clone()).unwrap_or_default();
            foo.status = Some(status::foo_status(&defaulted, selector(&foo), Some(&typed), None, &since));
            deployments.push(served);
        }
        foos.push(serde_json::to_value(&foo).unwrap_or_default());
    }
    let list = |kind: &str, api_version: &str, items: Vec<Value>| json!({"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": "9000"}, "items": items});
    State {
        foos: list("FooList", "samplecontroller.k8s.io/v1alpha1", foos),
        deployments: list("DeploymentList", "apps/v1", deployments),
        empty: list("List", "v1", vec![]),
        writes: AtomicUsize::new(0),
        reads: AtomicUsize::new(0),
        applied: Mutex::default(),
    }
}

/// One page of a list, as the API server answers `limit` and `continue` (here an offset).
fn page(list: &Value, query: &str) -> Value {
    let param =
        |key: &str| query.split('&').find_map(|q| q.strip_prefix(key)).and_then(|v| v.parse::<usize>().ok());
    let items = list["items"].as_array().map(Vec::as_slice).unwrap_or_default();
    let start = param("continue=").unwrap_or(0).min(items.len());
    let end = param("limit=").map_or(items.len(), |limit| (start + limit).min(items.len()));
    let mut page = list.clone();
    page["items"] = Value::Array(items[start..end].to_vec());
    if end < items.len() {
        page["metadata"]["continue"] = json!(end.to_string());
    }
    page
}

fn json_response(code: StatusCode, value: &Value) -> Response {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(value).unwrap_or_default()))
        .unwrap_or_default()
}

async fn handle(state: Arc<State>, method: Method, uri: Uri, body: Bytes) -> Response {
    let path = uri.path();
    let query = uri.query().unwrap_or_default();
    if method == Method::GET && query.split('&').any(|q| q == "watch=true" || q == "watch=1") {
        // A watch that never reports anything: the objects do not change.
        return Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>()))
            .unwrap_or_default();
    }
    match method {
        Method::GET => {
            let is_list = !path.split('/').next_back().is_some_and(|last| last.starts_with("foo-"));
            if is_list {
                state.reads.fetch_add(1, Ordering::Relaxed);
                if path.ends_with("/foos") {
                    return json_response(StatusCode::OK, &page(&state.foos, query));
                }
                // The operator's watch of the children it manages (every one here is a Foo's).
                if path.ends_with("/deployments") && query.contains("managed-by") {
                    return json_response(StatusCode::OK, &page(&state.deployments, query));
                }
                return json_response(StatusCode::OK, &state.empty);
            }
            state.reads.fetch_add(1, Ordering::Relaxed);
            json_response(
                StatusCode::NOT_FOUND,
                &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}),
            )
        }
        _ => {
            let writes = state.writes.fetch_add(1, Ordering::Relaxed) + 1;
            if writes.is_power_of_two() {
                eprintln!("{writes} writes so far (latest: {method} {path})");
            }
            let mut echoed: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
            // A status apply carries no metadata; the API server answers with the whole object.
            let mut segments = path.trim_end_matches("/status").rsplit('/');
            let name = segments.next().unwrap_or_default().to_owned();
            if echoed.get("metadata").is_none() {
                echoed["metadata"] = json!({"name": name, "namespace": NAMESPACE});
                echoed["spec"] = json!({});
            }
            if echoed["metadata"].get("uid").is_none() {
                echoed["metadata"]["uid"] = json!(format!("uid-of-{name}"));
            }
            if method == Method::PATCH
                && !path.ends_with("/status")
                && let Ok(mut objects) = state.applied.lock()
            {
                objects.insert(path.to_owned(), echoed.clone());
            }
            json_response(if method == Method::POST { StatusCode::CREATED } else { StatusCode::OK }, &echoed)
        }
    }
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let count: usize = arg("--foos").and_then(|n| n.parse().ok()).unwrap_or(1000);
    let port: u16 = arg("--port").and_then(|n| n.parse().ok()).unwrap_or(18080);
    let fresh = std::env::args().any(|a| a == "--fresh");
    let state = Arc::new(state(count, fresh));
    if let Some(path) = arg("--kubeconfig") {
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://127.0.0.1:{port}\nusers:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: {NAMESPACE}\ncurrent-context: fake\n"
        );
        std::fs::write(&path, kubeconfig)?;
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!(
        "serving {count} Foos{} on 127.0.0.1:{port}",
        if fresh { " without Deployments" } else { " and their Deployments" }
    );
    let shared = state.clone();
    let app = Router::new()
        .fallback(move |method: Method, uri: Uri, body: Bytes| handle(shared.clone(), method, uri, body));
    let server = axum::serve(listener, app);
    tokio::select! {
        result = server => result?,
        _ = tokio::signal::ctrl_c() => {}
    }
    eprintln!(
        "served {} reads and {} writes",
        state.reads.load(Ordering::Relaxed),
        state.writes.load(Ordering::Relaxed)
    );
    Ok(())
}
