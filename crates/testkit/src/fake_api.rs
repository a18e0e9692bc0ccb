//! An in-memory Kubernetes API server for tests that run whole parts of the operator (leader
//! election, the certificate lifecycle, the controllers) without a cluster, and that need to
//! know every request those parts make.
//!
//! It keeps objects by group, resource, namespace and name (any version); answers GET, LIST
//! (equality, set and existence label selectors; equality field selectors on any field, e.g.
//! `metadata.name=x` or `type=kubernetes.io/tls`), WATCH
//! (history after the given resourceVersion, then live changes), POST, PUT (with the
//! resourceVersion precondition), PATCH (server-side apply, JSON merge and strategic merge as a
//! JSON merge, JSON Patch with `test`) and DELETE; the `status` subresource; and records every
//! request, with whether its object existed, so tests can check requests against RBAC. It does
//! no defaulting or garbage collection, and validates only what is written to a `status`
//! subresource, against the schema of a stored CustomResourceDefinition that has one, and a
//! Service's cluster IP as the API server allocates it ([`service_ips`]). Of
//! admission, it does only what the `NamespaceLifecycle` plugin does to a namespace being
//! deleted ([`FakeApi::terminate_namespace`]): a create in it is refused (403
//! `NamespaceTerminating`).
//!
//! Discovery of a group version (`GET /apis/<group>/<version>`) lists the resources of the
//! CustomResourceDefinitions stored (e.g. by [`FakeApi::install_gateway_api`]) and is 404 for
//! any other; like `GET /version`, it is not recorded: every authenticated client may read it.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use kube::client::Body;
use serde_json::{Value, json};
use tokio::sync::broadcast;

pub use crate::api_path::Target;
use crate::{gateway_api_schema, schema, service_ips};

type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;

/// One request as the API server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    /// The resource the request is about.
    pub target: Target,
    /// Whether the named object existed when the request came (a server-side apply that
    /// creates needs `create` as well as `patch`).
    pub existed: bool,
}

/// Objects are kept by (group, resource, namespace, name).
type Key = (String, String, String, String);

trait Keyed {
    fn key(&self) -> Key;
}

impl Keyed for Target {
    fn key(&self) -> Key {
        (
            self.group.clone(),
            self.resource.clone(),
            self.namespace.clone().unwrap_or_default(),
            self.name.clone().unwrap_or_default(),
        )
    }
}

#[derive(Clone, Debug)]
struct Change {
    version: u64,
    kind: &'static str,
    key: Key,
    object: Value,
}

#[derive(Default)]
struct State {
    objects: BTreeMap<Key, Value>,
    version: u64,
    history: Vec<Change>,
    requests: Vec<Recorded>,
    /// What `GET /version` answers, when a test set it (else Kubernetes 1.31).
    server_version: Option<Value>,
    /// How long every request but a watch takes to be answered.
    latency: Duration,
    /// Where the pod proxy (`pods/<name>:<port>/proxy/...`) reaches each (namespace, pod, port).
    pod_ports: BTreeMap<(String, String, u16), std::net::SocketAddr>,
}

/// The fake API server; clones share it.
#[derive(Clone)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
    changes: broadcast::Sender<Change>,
}

impl Default for FakeApi {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeApi {
    pub fn new() -> Self {
        Self { state: Arc::default(), changes: broadcast::channel(4096).0 }
    }

    /// A client of this server (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        let api = self.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let api = api.clone();
            async move { Ok::<_, Infallible>(api.handle(request).await) }
        });
        kube::Client::new(service, "default")
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the pod proxy (`GET /api/v1/namespaces/<namespace>/pods/<pod>:<port>/proxy/<path>`)
    /// reach `to`, as the API server reaches the pod's IP; an unregistered pod port answers 503
    /// as the API server does when the pod refuses the connection.
    pub fn proxy_pod_port(&self, namespace: &str, pod: &str, port: u16, to: std::net::SocketAddr) {
        self.state().pod_ports.insert((namespace.to_owned(), pod.to_owned(), port), to);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state().requests.clone()
    }

    /// The object at `path` (e.g. `/api/v1/namespaces/ns/secrets/x`), if any.
    pub fn get(&self, path: &str) -> Option<Value> {
        let target = Target::parse(path)?;
        self.state().objects.get(&target.key()).cloned()
    }

    /// The objects of the collection at `path` (e.g. `/apis/events.k8s.io/v1/namespaces/ns/events`,
    /// or without the namespace for every one), in the order of their keys.
    pub fn list(&self, path: &str) -> Vec<Value> {
        let target = Target::parse(path).expect("a collection path");
        let filter = Filter::new(&target, None, None);
        self.state()
            .objects
            .iter()
            .filter(|(key, object)| filter.matches(key, object))
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// Stores `object` at `path` as a client's create or update would.
    pub fn put(&self, path: &str, object: Value) {
        let target = Target::parse(path).expect("an object path");
        let mut state = self.state();
        let existed = state.objects.contains_key(&target.key());
        self.store(&mut state, &target, object, if existed { "MODIFIED" } else { "ADDED" });
    }

    /// Deletes the object at `path`, as a client's delete would.
    pub fn delete(&self, path: &str) {
        let target = Target::parse(path).expect("an object path");
        let mut state = self.state();
        if let Some(object) = state.objects.remove(&target.key()) {
            self.record_change(&mut state, "DELETED", target.key(), object);
        }
    }

    /// Marks the Namespace `name` as being deleted (stored with a `deletionTimestamp` and the
    /// phase `Terminating`), as the API server does until its objects are gone: from now on a
    /// create in it (POST, or a server-side apply of an object that does not exist) is refused
    /// as the API server's `NamespaceLifecycle` admission refuses it. Its objects stay: delete
    /// them as the namespace controller would.
    pub fn terminate_namespace(&self, name: &str) {
        let path = format!("/api/v1/namespaces/{name}");
        let mut namespace = self.get(&path).unwrap_or_else(
            || json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": {}}),
        );
        namespace["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        namespace["status"] = json!({"phase": "Terminating"});
        self.put(&path, namespace);
    }

    /// Makes `GET /version` report this Kubernetes version (`major`, `minor`, `gitVersion`).
    pub fn set_server_version(&self, major: &str, minor: &str, git_version: &str) {
        self.state().server_version = Some(json!({"major": major, "minor": minor, "gitVersion": git_version,
            "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "", "compiler": "gc",
            "platform": "linux/amd64"}));
    }

    /// Answers every request but a watch only after `latency`, as a real API server does after
    /// its round trip to etcd (for benchmarks of request-bound work).
    pub fn set_latency(&self, latency: Duration) {
        self.state().latency = latency;
    }

    /// Stores the CustomResourceDefinitions of the Gateway API's standard channel (v1.3) the
    /// operator reads, reduced to what discovery answers from: GatewayClass, Gateway and
    /// HTTPRoute (`v1`, and `v1beta1` still served), GRPCRoute (`v1`) and ReferenceGrant
    /// (`v1beta1`); with the rules their schemas set on `status` ([`gateway_api_schema`]), so
    /// that a status a real API server would refuse is refused here too.
    pub fn install_gateway_api(&self) {
        self.install_gateway_api_crds([
            (
                "GatewayClass",
                "gatewayclasses",
                "Cluster",
                &["v1", "v1beta1"][..],
                gateway_api_schema::gateway_class(),
            ),
            ("Gateway", "gateways", "Namespaced", &["v1", "v1beta1"][..], gateway_api_schema::gateway()),
            (
                "HTTPRoute",
                "httproutes",
                "Namespaced",
                &["v1", "v1beta1"][..],
                gateway_api_schema::http_route(),
            ),
            // Standard channel since v1.1; its status is HTTPRoute's (`RouteStatus`).
            ("GRPCRoute", "grpcroutes", "Namespaced", &["v1"][..], gateway_api_schema::http_route()),
            ("ReferenceGrant", "referencegrants", "Namespaced", &["v1beta1"][..], json!({"type": "object"})),
        ]);
    }

    /// [`Self::install_gateway_api`], and the experimental channel's TLSRoute (`v1alpha2`):
    /// only where a test asks, as a cluster has it only where its admin installed that channel.
    pub fn install_gateway_api_experimental(&self) {
        self.install_gateway_api();
        self.install_gateway_api_crds([(
            "TLSRoute",
            "tlsroutes",
            "Namespaced",
            &["v1alpha2"][..],
            gateway_api_schema::tls_route(),
        )]);
    }

    /// Stores a CRD of the Gateway API's group per `(kind, plural, scope, versions, status
    /// schema)`, the first version the stored one.
    fn install_gateway_api_crds<const N: usize>(&self, kinds: [(&str, &str, &str, &[&str], Value); N]) {
        let group = "gateway.networking.k8s.io";
        for (kind, plural, scope, versions, schema) in kinds {
            let versions: Vec<Value> = versions
                .iter()
                .map(|version| {
                    json!({"name": version, "served": true, "storage": *version == versions[0],
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": if kind == "ReferenceGrant" { json!({}) } else { json!({"status": {}}) }})
                })
                .collect();
            let name = format!("{plural}.{group}");
            self.put(
                &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"),
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                       "metadata": {"name": name},
                       "spec": {"group": group, "scope": scope, "versions": versions,
                                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                                          "listKind": format!("{kind}List")}}}),
            );
        }
    }

    /// The `APIResourceList` of `group`/`version`, from the stored CustomResourceDefinitions;
    /// `None` when none of them serves it.
    fn discovery(&self, group: &str, version: &str) -> Option<Value> {
        let state = self.state();
        let resources: Vec<Value> = state
            .objects
            .iter()
            .filter(|((g, resource, _, _), _)| g == "apiextensions.k8s.io" && resource == "customresourcedefinitions")
            .map(|(_, crd)| &crd["spec"])
            .filter(|spec| spec["group"] == group)
            .filter_map(|spec| {
                let served = spec["versions"].as_array()?.iter().find(|v| v["name"] == version && v["served"] != false)?;
                let names = &spec["names"];
                let resource = json!({"name": names["plural"], "singularName": names["singular"],
                    "namespaced": spec["scope"] == "Namespaced", "kind": names["kind"],
                    "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]});
                let status = served["subresources"].get("status").map(|_| {
                    json!({"name": format!("{}/status", names["plural"].as_str().unwrap_or_default()),
                           "singularName": "", "namespaced": spec["scope"] == "Namespaced",
                           "kind": names["kind"], "verbs": ["get", "patch", "update"]})
                });
                Some([Some(resource), status])
            })
            .flatten()
            .flatten()
            .collect();
        (!resources.is_empty()).then(|| {
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/{version}"),
                   "resources": resources})
        })
    }

    /// Why a write to `target`'s status subresource leaving `object` is refused (422 Invalid),
    /// as the API server refuses it: when the stored CustomResourceDefinition of its resource
    /// has a schema for `status` that `object`'s status breaks. Writes to anything else, and
    /// resources without such a schema, pass unchecked.
    fn status_refusal(
        &self,
        state: &State,
        target: &Target,
        object: &Value,
        before: Option<&Value>,
    ) -> Option<String> {
        if target.subresource.as_deref() != Some("status") {
            return None;
        }
        let crd = state.objects.iter().find_map(|((group, resource, _, _), crd)| {
            (group == "apiextensions.k8s.io"
                && resource == "customresourcedefinitions"
                && crd["spec"]["group"] == target.group
                && crd["spec"]["names"]["plural"] == target.resource)
                .then_some(crd)
        });
        let schema = crd?["spec"]["versions"]
            .as_array()?
            .iter()
            .find(|v| v["name"] == target.version)
            .map(|v| &v["schema"]["openAPIV3Schema"])
            .filter(|s| s["properties"].get("status").is_some())?;
        let errors = schema::errors(schema, object, before);
        (!errors.is_empty())
            .then(|| format!("{} {:?} is invalid: {}", target.resource, target.name, errors.join("; ")))
    }

    /// Why storing `object` as the Service `target` is refused (422 Invalid), as the API
    /// server refuses a cluster IP ([`service_ips`]); `None` for anything else.
    fn service_ip_refusal(&self, state: &State, target: &Target, object: &Value) -> Option<String> {
        if !(target.group.is_empty() && target.resource == "services" && target.subresource.is_none()) {
            return None;
        }
        let key = target.key();
        let others = state
            .objects
            .iter()
            .filter(|(other, _)| other.0.is_empty() && other.1 == "services" && **other != key);
        let name = target.name.as_deref().unwrap_or_default();
        service_ips::refusal(name, object, state.objects.get(&key), others.map(|(_, service)| service))
    }

    /// Waits until `condition` holds for the stored objects, polling (bounded by `guard`).
    pub async fn wait_for(&self, what: &str, guard: Duration, condition: impl Fn(&FakeApi) -> bool) {
        let deadline = tokio::time::Instant::now() + guard;
        while !condition(self) {
            assert!(tokio::time::Instant::now() < deadline, "waited {guard:?} for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn store(&self, state: &mut State, target: &Target, mut object: Value, kind: &'static str) -> Value {
        state.version += 1;
        let version = state.version;
        let key = target.key();
        let previous = state.objects.get(&key).cloned();
        let spec_changed = previous.as_ref().is_none_or(|p| p.get("spec") != object.get("spec"));
        let metadata = object.as_object_mut().map(|o| o.entry("metadata").or_insert_with(|| json!({})));
        if let Some(Value::Object(metadata)) = metadata {
            metadata.insert("name".into(), json!(key.3));
            if !key.2.is_empty() {
                metadata.insert("namespace".into(), json!(key.2));
            }
            metadata.insert("resourceVersion".into(), json!(version.to_string()));
            let kept = |field: &str| previous.as_ref().and_then(|p| p["metadata"].get(field).cloned());
            metadata.insert(
                "uid".into(),
                kept("uid").unwrap_or_else(|| json!(format!("uid-{}-{version}", key.3))),
            );
            metadata.insert(
                "creationTimestamp".into(),
                kept("creationTimestamp").unwrap_or_else(|| json!("2026-01-01T00:00:00Z")),
            );
            let generation = kept("generation").and_then(|g| g.as_i64()).unwrap_or(0);
            metadata
                .insert("generation".into(), json!(if spec_changed { generation + 1 } else { generation }));
        }
        state.objects.insert(key.clone(), object.clone());
        self.record_change(state, kind, key, object.clone());
        object
    }

    /// The pod proxy: records the request (`get` on `pods/proxy`), then forwards a GET to the
    /// registered address and answers with what it answered.
    async fn pod_proxy(
        &self,
        method: &Method,
        namespace: &str,
        pod_port: &str,
        rest: &str,
        query: &str,
    ) -> Response<ResponseBody> {
        let (pod, port) = pod_port.split_once(':').unwrap_or((pod_port, "80"));
        let target = Target {
            version: "v1".to_owned(),
            resource: "pods".to_owned(),
            namespace: Some(namespace.to_owned()),
            name: Some(pod.to_owned()),
            subresource: Some("proxy".to_owned()),
            ..Target::default()
        };
        let to = {
            let mut state = self.state();
            let existed = state.objects.contains_key(&target.key());
            state.requests.push(Recorded {
                method: method.to_string(),
                path: format!("/api/v1/namespaces/{namespace}/pods/{pod_port}/proxy/{rest}"),
                query: query.to_owned(),
                content_type: String::new(),
                target,
                existed,
            });
            let port = port.parse::<u16>().unwrap_or_default();
            state.pod_ports.get(&(namespace.to_owned(), pod.to_owned(), port)).copied()
        };
        let Some(to) = to.filter(|_| method == Method::GET) else {
            let message =
                format!("error trying to reach service: dial tcp {pod}:{port}: connect: connection refused");
            return status(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", &message);
        };
        let uri = match query {
            "" => format!("http://{to}/{rest}"),
            query => format!("http://{to}/{rest}?{query}"),
        };
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http::<Full<Bytes>>();
        let request = Request::get(uri).body(Full::new(Bytes::new())).expect("a GET is a request");
        match client.request(request).await {
            Ok(response) => {
                let (parts, body) = response.into_parts();
                let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                Response::from_parts(parts, Full::new(body).boxed_unsync())
            }
            Err(error) => status(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                &format!("error trying to reach service: {error}"),
            ),
        }
    }

    fn record_change(&self, state: &mut State, kind: &'static str, key: Key, object: Value) {
        state.version += 1;
        let change = Change { version: state.version, kind, key, object };
        state.history.push(change.clone());
        let _ = self.changes.send(change);
    }

    async fn handle(&self, request: Request<Body>) -> Response<ResponseBody> {
        let (parts, body) = request.into_parts();
        let path = parts.uri.path().to_owned();
        let query = parts.uri.query().unwrap_or_default().to_owned();
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let latency = self.state().latency;
        let watching = query.split('&').any(|pair| pair == "watch=true" || pair == "watch=1");
        if !latency.is_zero() && !watching {
            tokio::time::sleep(latency).await;
        }
        // `run` and `install` ask for the server's version first (refused below 1.28; native
        // sidecars need 1.29).
        if path == "/version" {
            let set = self.state().server_version.clone();
            let version = set.unwrap_or_else(|| json!({"major": "1", "minor": "31", "gitVersion": "v1.31.0", "gitCommit": "",
                "gitTreeState": "clean", "buildDate": "", "goVersion": "", "compiler": "gc", "platform": "linux/amd64"}));
            return ok(StatusCode::OK, &version);
        }
        if let ["apis", group, version] = path.trim_matches('/').split('/').collect::<Vec<_>>().as_slice() {
            return match self.discovery(group, version) {
                Some(resources) => ok(StatusCode::OK, &resources),
                None => status(StatusCode::NOT_FOUND, "NotFound", &format!("no such path {path}")),
            };
        }
        if let ["api", "v1", "namespaces", namespace, "pods", pod_port, "proxy", rest @ ..] =
            path.trim_matches('/').split('/').collect::<Vec<_>>().as_slice()
        {
            return self.pod_proxy(&parts.method, namespace, pod_port, &rest.join("/"), &query).await;
        }
        let Some(target) = Target::parse(&path) else {
            return status(StatusCode::NOT_FOUND, "NotFound", &format!("no such path {path}"));
        };
        let method = parts.method.clone();
        let mut state = self.state();
        let existed = target.name.is_some() && state.objects.contains_key(&target.key());
        state.requests.push(Recorded {
            method: method.to_string(),
            path: path.clone(),
            query: query.clone(),
            content_type: content_type.clone(),
            target: target.clone(),
            existed,
        });
        let param =
            |key: &str| query.split('&').find_map(|pair| pair.strip_prefix(&format!("{key}="))).map(decode);
        let sent: Value =
            if body.is_empty() { Value::Null } else { serde_json::from_slice(&body).unwrap_or(Value::Null) };

        match (method, target.name.is_some()) {
            (Method::GET, false) if matches!(param("watch").as_deref(), Some("true" | "1")) => {
                let since = param("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
                let live = self.changes.subscribe();
                let backlog: Vec<Change> =
                    state.history.iter().filter(|c| c.version > since).cloned().collect();
                let filter = Filter::new(&target, param("labelSelector"), param("fieldSelector"));
                drop(state);
                watch_response(backlog, live, filter)
            }
            (Method::GET, false) => {
                let filter = Filter::new(&target, param("labelSelector"), param("fieldSelector"));
                let items: Vec<Value> = state
                    .objects
                    .iter()
                    .filter(|(key, object)| filter.matches(key, object))
                    .map(|(_, o)| o.clone())
                    .collect();
                let list = json!({"apiVersion": "v1", "kind": "List",
                    "metadata": {"resourceVersion": state.version.to_string()}, "items": items});
                ok(StatusCode::OK, &list)
            }
            (Method::GET, true) => match state.objects.get(&target.key()) {
                Some(object) => ok(StatusCode::OK, object),
                None => not_found(&target),
            },
            (Method::POST, _) => {
                let mut target = target;
                if target.name.is_none() {
                    target.name = sent["metadata"]["name"].as_str().map(str::to_owned).or_else(|| {
                        sent["metadata"]["generateName"].as_str().map(|p| format!("{p}{}", state.version + 1))
                    });
                }
                if target.name.is_none() || state.objects.contains_key(&target.key()) {
                    return status(StatusCode::CONFLICT, "AlreadyExists", "already exists");
                }
                if let Some(refused) = terminating(&state, &target) {
                    return refused;
                }
                if let Some(why) = self.service_ip_refusal(&state, &target, &sent) {
                    return invalid(&why);
                }
                let stored = self.store(&mut state, &target, sent, "ADDED");
                ok(StatusCode::CREATED, &stored)
            }
            (Method::PUT, true) => {
                let Some(current) = state.objects.get(&target.key()).cloned() else {
                    return not_found(&target);
                };
                let expected = sent["metadata"]["resourceVersion"].as_str();
                if expected.is_some_and(|v| Some(v) != current["metadata"]["resourceVersion"].as_str()) {
                    return status(StatusCode::CONFLICT, "Conflict", "the object has been modified");
                }
                if let Some(why) = self
                    .status_refusal(&state, &target, &sent, Some(&current))
                    .or_else(|| self.service_ip_refusal(&state, &target, &sent))
                {
                    return invalid(&why);
                }
                let stored = self.store(&mut state, &target, sent, "MODIFIED");
                ok(StatusCode::OK, &stored)
            }
            (Method::PATCH, true) => {
                let current = state.objects.get(&target.key()).cloned();
                let is_status = target.subresource.as_deref() == Some("status");
                let patched = if content_type.starts_with("application/json-patch+json") {
                    let Some(mut object) = current else { return not_found(&target) };
                    let Ok(patch) = serde_json::from_value::<json_patch::Patch>(sent) else {
                        return status(StatusCode::BAD_REQUEST, "BadRequest", "not a JSON Patch");
                    };
                    if json_patch::patch(&mut object, &patch).is_err() {
                        return status(StatusCode::CONFLICT, "Conflict", "the JSON Patch does not apply");
                    }
                    object
                } else {
                    let is_apply = content_type.starts_with("application/apply-patch");
                    match current {
                        None if is_apply && !is_status => match terminating(&state, &target) {
                            Some(refused) => return refused,
                            None => sent,
                        },
                        None => return not_found(&target),
                        Some(mut object) => {
                            if is_status {
                                json_patch::merge(&mut object["status"], &sent["status"]);
                            } else {
                                json_patch::merge(&mut object, &sent);
                            }
                            object
                        }
                    }
                };
                let before = state.objects.get(&target.key());
                if let Some(why) = self
                    .status_refusal(&state, &target, &patched, before)
                    .or_else(|| self.service_ip_refusal(&state, &target, &patched))
                {
                    return invalid(&why);
                }
                let kind = if existed { "MODIFIED" } else { "ADDED" };
                let stored = self.store(&mut state, &target, patched, kind);
                ok(StatusCode::OK, &stored)
            }
            (Method::DELETE, true) => match state.objects.remove(&target.key()) {
                Some(object) => {
                    self.record_change(&mut state, "DELETED", target.key(), object.clone());
                    ok(StatusCode::OK, &object)
                }
                None => not_found(&target),
            },
            (method, _) => {
                status(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", &format!("{method} {path}"))
            }
        }
    }
}

/// Which objects a list or watch is about.
#[derive(Clone, Debug)]
struct Filter {
    group: String,
    resource: String,
    namespace: Option<String>,
    labels: Vec<Requirement>,
    /// Field selector terms: a dotted path into the object, the value, and whether it must equal.
    fields: Vec<(String, String, bool)>,
}

#[derive(Clone, Debug)]
enum Requirement {
    Equal(String, String),
    NotEqual(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

impl Filter {
    fn new(target: &Target, labels: Option<String>, fields: Option<String>) -> Self {
        let fields = fields
            .as_deref()
            .into_iter()
            .flat_map(|fields| fields.split(','))
            .filter_map(|term| {
                let (path, value, equal) = match term.split_once("!=") {
                    Some((path, value)) => (path, value, false),
                    None => {
                        let (path, value) = term.split_once("==").or_else(|| term.split_once('='))?;
                        (path, value, true)
                    }
                };
                Some((path.trim().to_owned(), value.trim().to_owned(), equal))
            })
            .collect();
        Self {
            group: target.group.clone(),
            resource: target.resource.clone(),
            namespace: target.namespace.clone(),
            labels: labels.as_deref().map(parse_selector).unwrap_or_default(),
            fields,
        }
    }

    fn matches(&self, key: &Key, object: &Value) -> bool {
        let (group, resource, namespace, name) = key;
        if *group != self.group || *resource != self.resource {
            return false;
        }
        if self.namespace.as_ref().is_some_and(|ns| ns != namespace) {
            return false;
        }
        let fields_match = self.fields.iter().all(|(path, value, equal)| {
            let field = match path.as_str() {
                "metadata.name" => Some(name.as_str()),
                "metadata.namespace" => Some(namespace.as_str()),
                path => path.split('.').try_fold(object, |at, key| at.get(key)).and_then(Value::as_str),
            };
            (field.unwrap_or_default() == value) == *equal
        });
        if !fields_match {
            return false;
        }
        let labels = &object["metadata"]["labels"];
        let label = |key: &str| labels.get(key).and_then(Value::as_str);
        self.labels.iter().all(|requirement| match requirement {
            Requirement::Equal(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEqual(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::Absent(k) => label(k).is_none(),
        })
    }
}

/// Parses a label selector (`a=b,c!=d,e in (f,g),h notin (i),j,!k`).
fn parse_selector(selector: &str) -> Vec<Requirement> {
    let mut requirements = Vec::new();
    let mut rest = selector.trim();
    while !rest.is_empty() {
        // A set's values contain commas: take up to the closing parenthesis.
        let end = match (rest.find(','), rest.find('(')) {
            (Some(comma), Some(open)) if open < comma => rest.find(')').map_or(rest.len(), |c| c + 1),
            (Some(comma), _) => comma,
            (None, _) => rest.len(),
        };
        let term = rest[..end].trim();
        rest = rest[end..].trim_start_matches(',').trim();
        let set = |op: &str| {
            term.split_once(op).map(|(k, vs)| {
                let values = vs.trim().trim_start_matches('(').trim_end_matches(')');
                (k.trim().to_owned(), values.split(',').map(|v| v.trim().to_owned()).collect::<Vec<_>>())
            })
        };
        let requirement = if let Some((k, vs)) = set(" notin ") {
            Requirement::NotIn(k, vs)
        } else if let Some((k, vs)) = set(" in ") {
            Requirement::In(k, vs)
        } else if let Some((k, v)) = term.split_once("!=") {
            Requirement::NotEqual(k.trim().to_owned(), v.trim().to_owned())
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            Requirement::Equal(k.trim().to_owned(), v.trim().to_owned())
        } else if let Some(k) = term.strip_prefix('!') {
            Requirement::Absent(k.trim().to_owned())
        } else {
            Requirement::Exists(term.to_owned())
        };
        requirements.push(requirement);
    }
    requirements
}

fn decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(byte) => {
                        out.push(byte);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn watch_response(
    backlog: Vec<Change>,
    live: broadcast::Receiver<Change>,
    filter: Filter,
) -> Response<ResponseBody> {
    let event = |change: &Change| {
        let mut line =
            serde_json::to_vec(&json!({"type": change.kind, "object": change.object})).unwrap_or_default();
        line.push(b'\n');
        Ok::<_, Infallible>(hyper::body::Frame::data(Bytes::from(line)))
    };
    let backlog_filter = filter.clone();
    let backlog: Vec<_> =
        backlog.iter().filter(|c| backlog_filter.matches(&c.key, &c.object)).map(event).collect();
    let live = futures::stream::unfold(live, move |mut live| {
        let filter = filter.clone();
        async move {
            loop {
                match live.recv().await {
                    Ok(change) if filter.matches(&change.key, &change.object) => {
                        let mut line =
                            serde_json::to_vec(&json!({"type": change.kind, "object": change.object}))
                                .unwrap_or_default();
                        line.push(b'\n');
                        return Some((Ok(hyper::body::Frame::data(Bytes::from(line))), live));
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    });
    let stream = futures::stream::iter(backlog).chain(live);
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(StreamBody::new(stream).boxed_unsync())
        .unwrap_or_default()
}

fn ok(code: StatusCode, value: &Value) -> Response<ResponseBody> {
    Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(value).unwrap_or_default())).boxed_unsync())
        .unwrap_or_default()
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response<ResponseBody> {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16()});
    ok(code, &body)
}

/// 422 Invalid, as the API server answers a write its schema refuses; said on stderr too, so
/// that a test waiting for a status that never comes shows why.
fn invalid(why: &str) -> Response<ResponseBody> {
    eprintln!("fake API server refused a status write: {why}");
    status(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", why)
}

/// The API server's answer to a create in a namespace being deleted (its `NamespaceLifecycle`
/// admission), when `target`'s namespace is one.
fn terminating(state: &State, target: &Target) -> Option<Response<ResponseBody>> {
    let namespace = target.namespace.as_deref()?;
    let key = (String::new(), "namespaces".to_owned(), String::new(), namespace.to_owned());
    if state.objects.get(&key)?["status"]["phase"] != "Terminating" {
        return None;
    }
    let name = target.name.as_deref().unwrap_or_default();
    let resource = if target.group.is_empty() {
        target.resource.clone()
    } else {
        format!("{}.{}", target.resource, target.group)
    };
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("{resource} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated"),
        "reason": "Forbidden",
        "details": {"name": name, "group": target.group, "kind": target.resource, "causes": [
            {"reason": "NamespaceTerminating", "message": format!("namespace {namespace} is being terminated"),
             "field": "metadata.namespace"}]},
        "code": 403});
    Some(ok(StatusCode::FORBIDDEN, &body))
}

fn not_found(target: &Target) -> Response<ResponseBody> {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{} {:?} not found", target.resource, target.name.as_deref().unwrap_or_default()),
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
    use kube::discovery::ApiResource;

    use super::*;

    #[tokio::test]
    async fn a_namespace_being_deleted_takes_no_new_objects_but_its_objects_can_change() {
        let api = FakeApi::new();
        let config_maps: Api<ConfigMap> = Api::namespaced(api.client(), "shop");
        let config_map = |name: &str| {
            serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": name}, "data": {"a": "1"}}))
                .expect("a ConfigMap")
        };
        config_maps.create(&PostParams::default(), &config_map("kept")).await.expect("created");
        api.terminate_namespace("shop");

        let params = PatchParams::apply("test");
        for refused in [
            config_maps.create(&PostParams::default(), &config_map("new")).await.map(|_| ()),
            config_maps.patch("applied", &params, &Patch::Apply(config_map("applied"))).await.map(|_| ()),
        ] {
            let Err(kube::Error::Api(status)) = refused else { panic!("created: {refused:?}") };
            assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
            assert!(status.message.ends_with("because it is being terminated"), "{}", status.message);
            let causes = status.details.expect("details").causes;
            assert_eq!(causes[0].reason, "NamespaceTerminating");
            assert_eq!(causes[0].field, "metadata.namespace");
        }
        config_maps.patch("kept", &params, &Patch::Apply(config_map("kept"))).await.expect("an update");
        assert!(api.get("/api/v1/namespaces/shop/configmaps/applied").is_none());
        let elsewhere: Api<ConfigMap> = Api::namespaced(api.client(), "blog");
        elsewhere.create(&PostParams::default(), &config_map("new")).await.expect("another namespace");
    }

    #[tokio::test]
    async fn a_status_write_the_crds_schema_refuses_is_refused_and_leaves_the_object_as_it_was() {
        let api = FakeApi::new();
        api.install_gateway_api();
        let path = "/apis/gateway.networking.k8s.io/v1/namespaces/shop/gateways/edge";
        api.put(path, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                             "metadata": {"name": "edge", "namespace": "shop"}, "spec": {"gatewayClassName": "x"}}));
        let resource = ApiResource {
            group: "gateway.networking.k8s.io".into(),
            version: "v1".into(),
            api_version: "gateway.networking.k8s.io/v1".into(),
            kind: "Gateway".into(),
            plural: "gateways".into(),
        };
        let gateways: Api<DynamicObject> = Api::namespaced_with(api.client(), "shop", &resource);
        let params = PatchParams::apply("test").force();
        let status = |reason: &str| {
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "status": {"conditions": [
                {"type": "Accepted", "status": "True", "reason": reason, "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
        };

        let refused = gateways.patch_status("edge", &params, &Patch::Apply(status("Not valid"))).await;
        match refused {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422);
                assert!(status.message.contains("reason"), "the message names the field: {}", status.message);
            }
            other => panic!("a reason with a space is written: {other:?}"),
        }
        assert!(api.get(path).expect("stored")["status"].is_null(), "nothing of it is stored");

        gateways
            .patch_status("edge", &params, &Patch::Apply(status("Accepted")))
            .await
            .expect("a valid status");
        assert_eq!(api.get(path).expect("stored")["status"]["conditions"][0]["reason"], "Accepted");
    }
}
