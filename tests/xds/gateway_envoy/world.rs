//! One `run` against the in-memory API server with the Gateway API's CRDs, a GatewayClass
//! naming the operator, a test's Gateways and routes, and backends; a real Envoy per Gateway,
//! started from the bootstrap and identity the operator made for the Gateway's fleet, as
//! `run_xds::run_serves_a_gateway_its_routes_from_the_api_server` does. And what the tests ask
//! of it: objects' conditions, and answers through the proxy awaited with bounded waits.

use std::collections::BTreeMap;

use base64::Engine;
use envoy_operator::operator::RunError;
use envoy_operator_core::children::envoy::CA_SDS_KEY;
use envoy_operator_core::identity;
use envoy_operator_core::names::CONTROLLER_NAME;
use envoy_operator_core::translate::gateway;
use envoy_operator_testkit::fake_api::FakeApi;
use envoy_operator_testkit::fleet_world::{FleetWorld, HANG_GUARD, NS, at, at_in, prefix_to, route};
use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::Answer;
use crate::support::backend::Backend;
use crate::support::envoy::Envoy;
use crate::support::{CONVERGE, eventually, fleet, operator};

pub const GATEWAY_API: &str = "gateway.networking.k8s.io/v1";
pub const CLASS: &str = "envoy";

/// The API path of Gateway API object `name` (`resource`, `v1`) in [`NS`].
pub fn gateway_api_at(resource: &str, name: &str) -> String {
    at(GATEWAY_API, resource, name)
}

/// A Gateway `name` of [`NS`] of the class naming the operator, with `listeners`.
pub fn gateway(name: &str, listeners: Value) -> (String, Value) {
    (
        gateway_api_at("gateways", name),
        json!({"apiVersion": GATEWAY_API, "kind": "Gateway", "metadata": {"name": name, "namespace": NS},
               "spec": {"gatewayClassName": CLASS, "listeners": listeners}}),
    )
}

/// An HTTPRoute `name` of `namespace` with `spec`.
pub fn http_route_in(namespace: &str, name: &str, spec: Value) -> (String, Value) {
    (
        at_in(namespace, GATEWAY_API, "httproutes", name),
        json!({"apiVersion": GATEWAY_API, "kind": "HTTPRoute",
               "metadata": {"name": name, "namespace": namespace}, "spec": spec}),
    )
}

/// An HTTPRoute `name` of [`NS`] with `spec`.
pub fn http_route(name: &str, spec: Value) -> (String, Value) {
    http_route_in(NS, name, spec)
}

/// A `kubernetes.io/tls` Secret `name` of [`NS`] holding `chain_pem` and `key_pem`.
pub fn tls_secret(name: &str, chain_pem: &str, key_pem: &str) -> (String, Value) {
    let encode = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    (
        at("v1", "secrets", name),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
               "metadata": {"name": name, "namespace": NS},
               "data": {"tls.crt": encode(chain_pem), "tls.key": encode(key_pem)}}),
    )
}

/// `(status, reason)` of condition `kind` among `conditions`, if there.
pub fn condition(conditions: &Value, kind: &str) -> Option<(String, String)> {
    let found = conditions.as_array()?.iter().find(|c| c["type"] == kind)?;
    Some((found["status"].as_str()?.to_owned(), found["reason"].as_str()?.to_owned()))
}

/// The status of listener `name` in a Gateway's status.
pub fn listener_status<'a>(gateway: &'a Value, name: &str) -> Option<&'a Value> {
    gateway["status"]["listeners"].as_array()?.iter().find(|l| l["name"] == name)
}

/// What a request should be answered with.
#[derive(Clone, Copy, Debug)]
pub enum Expect<'a> {
    /// 200, from this backend.
    By(&'a str),
    /// This status from the proxy itself (404: no route; 500: no valid backend).
    Status(u16),
}

impl Expect<'_> {
    pub fn check(self, answer: Result<Answer, String>) -> Result<(), String> {
        let answer = answer?;
        let met = match self {
            Expect::By(backend) => answer.served_by() == Some(backend),
            Expect::Status(status) => answer.status == status,
        };
        if met { Ok(()) } else { Err(format!("expected {self:?}, answered {answer:?}")) }
    }
}

/// The proxy of one Gateway: a real Envoy started from its fleet's bootstrap and identity.
pub struct Proxy {
    pub envoy: Envoy,
    _files: TempDir,
}

impl Proxy {
    pub async fn admin_json(&self, path: &str) -> Value {
        let (status, body) = self.envoy.get(self.envoy.admin, path).await.expect("Envoy's admin");
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).expect("JSON")
    }

    /// The value of Envoy's counter or gauge `name`.
    pub async fn stat(&self, name: &str) -> u64 {
        let stats =
            self.admin_json(&format!("/stats?format=json&filter=^{}$", name.replace('.', "\\."))).await;
        let found = stats["stats"].as_array().and_then(|stats| stats.iter().find(|s| s["name"] == name));
        found.and_then(|stat| stat["value"].as_u64()).unwrap_or_else(|| panic!("no stat {name}: {stats}"))
    }

    /// The ports of the listeners Envoy bound.
    pub async fn bound_ports(&self) -> Vec<u64> {
        let listeners = self.admin_json("/listeners?format=json").await;
        let statuses = listeners["listener_statuses"].as_array().cloned().unwrap_or_default();
        statuses.iter().filter_map(|s| s["local_address"]["socket_address"]["port_value"].as_u64()).collect()
    }
}

/// `run` on an API server holding the Gateway API and a test's objects.
pub struct GatewayWorld {
    pub api: FakeApi,
    world: FleetWorld<RunError>,
}

impl GatewayWorld {
    /// Puts the Gateway API's CRDs, the GatewayClass, `objects` (path, object) and `backends`
    /// (Service name in [`NS`], backend) in the API server, then starts `run` on it.
    pub async fn start(backends: &[(&str, &Backend)], objects: &[(String, Value)]) -> Self {
        let api = FakeApi::new();
        api.install_gateway_api();
        Self::start_on(api, backends, objects).await
    }

    /// [`Self::start`] with the experimental channel's CRDs too (TLSRoute).
    pub async fn start_experimental(backends: &[(&str, &Backend)], objects: &[(String, Value)]) -> Self {
        let api = FakeApi::new();
        api.install_gateway_api_experimental();
        Self::start_on(api, backends, objects).await
    }

    async fn start_on(api: FakeApi, backends: &[(&str, &Backend)], objects: &[(String, Value)]) -> Self {
        api.put(
            &format!("/apis/{GATEWAY_API}/gatewayclasses/{CLASS}"),
            json!({"apiVersion": GATEWAY_API, "kind": "GatewayClass",
                   "metadata": {"name": CLASS}, "spec": {"controllerName": CONTROLLER_NAME}}),
        );
        for (path, object) in objects {
            api.put(path, object.clone());
        }
        // FleetWorld's own fleet (`edge`) needs an EnvoyRoute; it plays no part here.
        let edge_route = route("edge-route", 1, json!([prefix_to("/", backends[0].0)]));
        let world = FleetWorld::start_on(api, backends, edge_route, operator::run).await;
        GatewayWorld { api: world.api.clone(), world }
    }

    /// A real Envoy serving Gateway `gateway`, once the operator wrote its fleet's bootstrap
    /// (with the control plane's CA) and issued its identity.
    pub async fn proxy(&self, gateway: &str) -> Proxy {
        self.proxy_with(gateway, |_| {}).await
    }

    /// The same, its bootstrap changed by `edit` first.
    pub async fn proxy_with(&self, gateway: &str, edit: impl FnOnce(&mut Value)) -> Proxy {
        let fleet_name = gateway::fleet::name(gateway, CLASS);
        let bootstrap_at = at("v1", "configmaps", &format!("{fleet_name}-bootstrap"));
        let what = format!("Gateway {gateway}'s fleet's bootstrap with the control plane's CA");
        self.api
            .wait_for(&what, HANG_GUARD, |api| {
                api.get(&bootstrap_at).is_some_and(|c| c["data"].get(CA_SDS_KEY).is_some())
            })
            .await;
        let identity_at = at("v1", "secrets", &identity::secret_name(&fleet_name));
        let what = format!("Gateway {gateway}'s fleet's identity");
        self.api.wait_for(&what, HANG_GUARD, |api| api.get(&identity_at).is_some()).await;
        let data: BTreeMap<String, String> =
            serde_json::from_value(self.api.get(&bootstrap_at).expect("the ConfigMap")["data"].clone())
                .expect("string data");
        let encoded = self.api.get(&identity_at).expect("the Secret")["data"][identity::SDS_KEY]
            .as_str()
            .expect("the Secret carries the SDS file")
            .to_owned();
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).expect("base64 data");
        let identity_sds = String::from_utf8(decoded).expect("a UTF-8 file");
        let files = tempfile::tempdir().expect("a directory for the ConfigMap's files");
        let node = format!("{fleet_name}-7d9c-x1");
        let mut bootstrap = fleet::runnable_bootstrap(&data, files.path(), &node, &fleet_name, &identity_sds);
        edit(&mut bootstrap);
        Proxy { envoy: Envoy::start(&bootstrap).await, _files: files }
    }

    /// Waits until `check` holds of the object at `path`, failing with `what` and the object.
    pub async fn until_object(&self, what: &str, path: &str, check: impl Fn(&Value) -> bool) {
        eventually(what, CONVERGE, || async {
            match self.api.get(path) {
                Some(object) if check(&object) => Ok(()),
                Some(object) => Err(object["status"].to_string()),
                None => Err(format!("no object at {path}")),
            }
        })
        .await;
    }

    /// Waits until the route at `route_at` has a parent for Gateway `gateway` (and listener
    /// `section`, if named) with condition `kind` at `status` and `reason`.
    pub async fn until_route_condition(
        &self,
        route_at: &str,
        parent: (&str, Option<&str>),
        (kind, status, reason): (&str, &str, &str),
    ) {
        let (gateway, section) = parent;
        let what = format!("{route_at}: {kind} {status} ({reason}) for {gateway} {section:?}");
        self.until_object(&what, route_at, |route| {
            let parents = route["status"]["parents"].as_array().cloned().unwrap_or_default();
            parents.iter().any(|p| {
                p["parentRef"]["name"] == gateway
                    && section.is_none_or(|s| p["parentRef"]["sectionName"] == s)
                    && condition(&p["conditions"], kind) == Some((status.to_owned(), reason.to_owned()))
            })
        })
        .await;
    }

    /// Waits until listener `listener` of Gateway `gateway` has condition `kind` at `status`
    /// and `reason`.
    pub async fn until_listener_condition(
        &self,
        gateway: &str,
        listener: &str,
        (kind, status, reason): (&str, &str, &str),
    ) {
        let what = format!("Gateway {gateway}'s listener {listener}: {kind} {status} ({reason})");
        self.until_object(&what, &gateway_api_at("gateways", gateway), |gateway| {
            listener_status(gateway, listener).is_some_and(|l| {
                condition(&l["conditions"], kind) == Some((status.to_owned(), reason.to_owned()))
            })
        })
        .await;
    }

    /// Waits until route `route` (of [`NS`]) is accepted as the suite's
    /// `GatewayAndHTTPRoutesMustBeAccepted` requires: exactly one parent, its parentRef written
    /// out (group, kind, name), the operator's `controllerName`, `Accepted` True (`Accepted`).
    pub async fn until_accepted_as_the_suite_checks(&self, route: &str, gateway: &str) {
        self.until_kind_accepted_as_the_suite_checks("httproutes", route, gateway).await;
    }

    /// [`Self::until_accepted_as_the_suite_checks`] for a route of `resource` (`grpcroutes`).
    pub async fn until_kind_accepted_as_the_suite_checks(&self, resource: &str, route: &str, gateway: &str) {
        let what =
            format!("{resource} {route} accepted by Gateway {gateway} as the conformance suite checks");
        self.until_object(&what, &gateway_api_at(resource, route), |route| {
            let parents = route["status"]["parents"].as_array().cloned().unwrap_or_default();
            let [parent] = parents.as_slice() else { return false };
            let reference = &parent["parentRef"];
            reference["group"] == "gateway.networking.k8s.io"
                && reference["kind"] == "Gateway"
                && reference["name"] == gateway
                && parent["controllerName"] == CONTROLLER_NAME
                && condition(&parent["conditions"], "Accepted")
                    == Some(("True".to_owned(), "Accepted".to_owned()))
        })
        .await;
    }

    pub async fn stop(self) {
        self.world.stop().await.expect("the operator ran without error");
    }
}

/// Waits until a GET of `path` with `Host: host` on `port` is answered as `expected`.
pub async fn until_answered(
    port: u16,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    expected: Expect<'_>,
) {
    let what = format!("GET {host}{path} {headers:?} answered {expected:?}");
    eventually(&what, CONVERGE, || async {
        expected.check(super::client::get_with(port, host, path, headers).await)
    })
    .await;
}
