//! The Gateway API on a real cluster: a GatewayClass naming the operator; a Gateway with an
//! HTTP listener (80) and an HTTPS listener (443) presenting a certificate for
//! `*.gateway.example.test` (from a CA made for the story) from a `kubernetes.io/tls` Secret; an HTTPRoute in another
//! namespace (the listeners allow routes from `All`), sending half of its requests to a
//! backend of its own namespace and half to one in a third namespace, where a ReferenceGrant
//! allows it. The classes, the Gateway and the route report `Accepted` (and the Gateway
//! `Programmed`, with an address); traffic from a client pod in the cluster reaches both
//! backends over HTTP and over HTTPS with SNI. Then the ReferenceGrant is deleted: the route
//! says `ResolvedRefs` False `RefNotPermitted` and the third namespace's share is answered 500.
//!
//! Needs the Gateway API CRDs (v1.3 standard channel or newer), which are the cluster
//! owner's to install: the story fails at once, naming the missing ones and the command, when
//! they are absent. Kubernetes 1.28+, as the whole suite (the harness checks). The story spans
//! three namespaces, so its in-process operator watches every namespace (and runs alone in the
//! test process, refusing to start beside another operator: see the harness's `Watch`). The
//! statuses are checked in both modes. The fleet's pods reach the control plane only of the
//! deployed operator, so the traffic half does not apply in-process (skipped with a note); with
//! `E2E_IN_CLUSTER=1` it needs a node that takes pods and fails, saying why, without one
//! (unless `E2E_NO_NODES=1` declares such a cluster). Images: agnhost (the backends), Envoy,
//! curlimages/curl.

use std::time::Duration;

use envoy_operator_core::api::gateway::{Gateway, GatewayClass, HTTPRoute, ReferenceGrant};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DeleteParams};
use serde_json::json;

use crate::harness::{
    Cluster, E2E_LABEL, LONG, SHORT, create_in, get, gone, in_cluster, in_cluster_mode,
    in_cluster_watching_all, is_not_found, pod_state, script_pod_log, wait_for,
};
use crate::load_client::CURL_IMAGE;
const BACKEND_IMAGE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";
const CONTROLLER_NAME: &str = envoy_operator_core::names::CONTROLLER_NAME;
/// What the story needs of the Gateway API, as `<plural>.<group>`.
const GATEWAY_API_CRDS: [&str; 4] = [
    "gatewayclasses.gateway.networking.k8s.io",
    "gateways.gateway.networking.k8s.io",
    "httproutes.gateway.networking.k8s.io",
    "referencegrants.gateway.networking.k8s.io",
];
const INSTALL_GATEWAY_API: &str = "kubectl apply --server-side -f https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.3.0/standard-install.yaml";
/// The name the route's requests are for, which the certificate covers.
const HOST: &str = "www.gateway.example.test";
/// Requests per probe: with two backends of equal weight, both are seen unless something is
/// wrong (a miss by chance is 2 in a million).
const REQUESTS: usize = 24;
const REVOKED: &str = "the route's ResolvedRefs False (RefNotPermitted) once the ReferenceGrant is gone";

/// Fails at once, naming what is missing and how to install it, without the Gateway API.
pub(crate) async fn require_gateway_api(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut missing = Vec::new();
    for name in GATEWAY_API_CRDS {
        match crds.get(name).await {
            Ok(_) => {}
            Err(error) if is_not_found(&error) => missing.push(name),
            Err(error) => panic!("reading CRD {name}: {error}"),
        }
    }
    assert!(
        missing.is_empty(),
        "the Gateway API CRDs {missing:?} are not installed; install them (v1.3 standard channel or newer) with\n  {INSTALL_GATEWAY_API}\nthen restart the operator (it reads them at start)"
    );
}

fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<(&'a str, &'a str)> {
    conditions.iter().find(|c| c.type_ == type_).map(|c| (c.status.as_str(), c.reason.as_str()))
}

/// An echo server (agnhost netexec: `/hostname` answers its pod's name) behind the Service
/// `echo` port 80, in `namespace`.
async fn echo_backend(client: &kube::Client, namespace: &str) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    create_in::<Deployment>(&deployments, json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "echo"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "echo"}},
                 "template": {"metadata": {"labels": {"app": "echo", "sidecar.example.com/inject": "false"}},
                              "spec": {"containers": [{"name": "echo", "image": BACKEND_IMAGE,
                                                       "args": ["netexec", "--http-port=8080"],
                                                       "ports": [{"name": "http", "containerPort": 8080}],
                                                       "readinessProbe": {"tcpSocket": {"port": "http"}}}]}}}}))
    .await;
    create_in::<Service>(&Api::namespaced(client.clone(), namespace), json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "echo"},
        "spec": {"selector": {"app": "echo"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}))
    .await;
}

/// A certificate for `*.gateway.example.test`, its key, and the CA that signed it (made here,
/// trusted by the probe alone), as PEM.
struct Certificates {
    ca: String,
    certificate: String,
    key: String,
}

fn wildcard_certificate() -> Certificates {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca_params.distinguished_name.push(DnType::CommonName, "envoy-operator e2e gateway CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca = ca_params.self_signed(&ca_key).expect("a CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("a key");
    let mut params =
        CertificateParams::new(vec!["*.gateway.example.test".to_owned()]).expect("certificate parameters");
    // Distinct from the CA's, or the certificate looks self-signed.
    params.distinguished_name.push(DnType::CommonName, "*.gateway.example.test");
    let certificate = params.signed_by(&key, &issuer).expect("a certificate");
    Certificates { ca: ca.pem(), certificate: certificate.pem(), key: key.serialize_pem() }
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster with the Gateway API CRDs"]
async fn a_gateway_serves_http_and_https_routes_across_namespaces_as_reference_grants_allow() {
    in_cluster_watching_all("gateway", async |cluster| {
        require_gateway_api(&cluster.client).await;
        let class_name = format!("e2e-{}", cluster.run_id);
        let classes: Api<GatewayClass> = Api::all(cluster.client.clone());
        let outcome =
            futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(story(cluster, &class_name))).await;
        // Cluster-scoped: not deleted with the run's namespaces.
        match classes.delete(&class_name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(error) if is_not_found(&error) => {}
            Err(error) => eprintln!("warning: deleting GatewayClass {class_name}: {error}"),
        }
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    })
    .await;
}

/// A Gateway named like a user's Service, in a namespace that also holds a Service of its
/// fleet's name: the Gateway claims neither's address, says in `Programmed` (and a Warning event)
/// which object stands in its fleet's way; once that goes, its address is its fleet's own
/// Service's. Statuses only: every mode.
#[tokio::test]
#[ignore = "needs a Kubernetes cluster with the Gateway API CRDs"]
async fn a_gateway_claims_no_address_of_a_users_service_and_names_what_stands_in_its_fleets_way() {
    in_cluster("gateway-names", async |cluster| {
        require_gateway_api(&cluster.client).await;
        let class_name = format!("e2e-names-{}", cluster.run_id);
        let classes: Api<GatewayClass> = Api::all(cluster.client.clone());
        let outcome =
            futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(names_story(cluster, &class_name)))
                .await;
        match classes.delete(&class_name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(error) if is_not_found(&error) => {}
            Err(error) => eprintln!("warning: deleting GatewayClass {class_name}: {error}"),
        }
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    })
    .await;
}

async fn names_story(cluster: &Cluster, class_name: &str) {
    let classes: Api<GatewayClass> = Api::all(cluster.client.clone());
    create_in::<GatewayClass>(
        &classes,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": class_name, "labels": {E2E_LABEL: "true"}},
        "spec": {"controllerName": CONTROLLER_NAME}}),
    )
    .await;
    let fleet = envoy_operator_core::translate::gateway::fleet::name("alt", class_name);
    let users_service = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"selector": {"app": "users-own"}, "ports": [{"name": "http", "port": 80}]}})
    };
    let users: Service = cluster.create(users_service("alt")).await;
    let _: Service = cluster.create(users_service(&fleet)).await;
    let _: Gateway = cluster
        .create(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "alt"},
            "spec": {"gatewayClassName": class_name,
                     "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}))
        .await;

    let gateways = cluster.api::<Gateway>();
    let taken = format!("Service Resource \"{fleet}\" already exists and is not managed by Envoy");
    wait_for("the Gateway Programmed False, naming the Service in its fleet's way", SHORT, || async {
        let status = get(&gateways, "alt").await?.status.unwrap_or_default();
        let programmed = status.conditions.iter().find(|c| c.type_ == "Programmed");
        match programmed {
            Some(c) if c.status == "False" && c.reason == "Invalid" && c.message.contains(&taken) => Ok(()),
            other => Err(format!("{other:?}: {status:?}")),
        }
    })
    .await;
    let status = get(&gateways, "alt").await.expect("the Gateway").status.unwrap_or_default();
    assert!(status.addresses.is_empty(), "no address of a Service the fleet does not control: {status:?}");
    let events: Api<k8s_openapi::api::events::v1::Event> = cluster.api();
    wait_for("a Warning event on the Gateway naming the Service", SHORT, || async {
        let list = events.list(&Default::default()).await.map_err(|e| e.to_string())?;
        let found = list.items.iter().any(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.regarding
                    .as_ref()
                    .is_some_and(|r| r.kind.as_deref() == Some("Gateway") && r.name.as_deref() == Some("alt"))
                && e.note.as_deref().is_some_and(|note| note.contains(&taken))
        });
        if found { Ok(()) } else { Err(format!("{} events, none matching", list.items.len())) }
    })
    .await;

    // The user's Service in the fleet's way goes: the fleet makes its own, whose address the
    // Gateway reports (never the cluster IP of the user's Service `alt`).
    let services = cluster.api::<Service>();
    services.delete(&fleet, &DeleteParams::default()).await.expect("deleting the user's Service");
    let address = wait_for("the Gateway's address, its fleet's Service's", LONG, || async {
        let status = get(&gateways, "alt").await?.status.unwrap_or_default();
        let own = get(&services, &fleet).await?;
        let controlled = own.metadata.owner_references.iter().flatten().any(|o| o.kind == "Envoy");
        let ip = own.spec.as_ref().and_then(|spec| spec.cluster_ip.clone()).unwrap_or_default();
        match status.addresses.first() {
            Some(address) if controlled && address.value == ip => Ok(address.value.clone()),
            other => Err(format!("{other:?} (the fleet's Service: {ip:?}, controlled: {controlled})")),
        }
    })
    .await;
    let users_ip = users.spec.and_then(|spec| spec.cluster_ip).unwrap_or_default();
    assert_ne!(address, users_ip, "the user's Service alt");
}

async fn story(cluster: &Cluster, class_name: &str) {
    let client = &cluster.client;
    let gateway_namespace = cluster.namespace.clone();
    let routes_namespace = cluster.extra_namespace("routes", json!({})).await;
    let backends_namespace = cluster.extra_namespace("backends", json!({})).await;

    let classes: Api<GatewayClass> = Api::all(client.clone());
    create_in::<GatewayClass>(
        &classes,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": class_name, "labels": {E2E_LABEL: "true"}},
        "spec": {"controllerName": CONTROLLER_NAME}}),
    )
    .await;

    let certificates = wildcard_certificate();
    let _: Secret = cluster
        .create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "wildcard"},
            "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": certificates.certificate, "tls.key": certificates.key}}))
        .await;
    let all_namespaces = json!({"namespaces": {"from": "All"}});
    let _: Gateway = cluster
        .create(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "edge"},
            "spec": {"gatewayClassName": class_name, "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": all_namespaces},
                {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "*.gateway.example.test",
                 "tls": {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": "wildcard"}]},
                 "allowedRoutes": all_namespaces}]}}))
        .await;

    echo_backend(client, &routes_namespace).await;
    echo_backend(client, &backends_namespace).await;
    let grants: Api<ReferenceGrant> = Api::namespaced(client.clone(), &backends_namespace);
    create_in::<ReferenceGrant>(&grants, json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
        "metadata": {"name": "routes-to-echo"},
        "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": routes_namespace}],
                 "to": [{"group": "", "kind": "Service", "name": "echo"}]}}))
    .await;
    let routes: Api<HTTPRoute> = Api::namespaced(client.clone(), &routes_namespace);
    create_in::<HTTPRoute>(
        &routes,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "web"},
        "spec": {"parentRefs": [{"name": "edge", "namespace": gateway_namespace}],
                 "hostnames": [HOST],
                 "rules": [{"backendRefs": [
                     {"name": "echo", "port": 80, "weight": 1},
                     {"name": "echo", "namespace": backends_namespace, "port": 80, "weight": 1}]}]}}),
    )
    .await;

    wait_for(
        "the GatewayClass Accepted (is the operator's Gateway controller on? it says at start)",
        SHORT,
        || async {
            let status = get(&classes, class_name).await?.status.unwrap_or_default();
            match condition(&status.conditions, "Accepted") {
                Some(("True", _)) => Ok(()),
                other => Err(format!("{other:?}: {status:?}")),
            }
        },
    )
    .await;
    route_judged(&routes, "the route Accepted by the Gateway, its references resolved", "True", "True").await;
    let gateways = cluster.api::<Gateway>();
    wait_for("the Gateway Accepted", SHORT, || async {
        let status = get(&gateways, "edge").await?.status.unwrap_or_default();
        match condition(&status.conditions, "Accepted") {
            Some(("True", _)) => Ok(()),
            other => Err(format!("{other:?}: {status:?}")),
        }
    })
    .await;

    let traffic = if in_cluster_mode() {
        cluster.runs_pods("gateway: the traffic half")
    } else {
        eprintln!(
            "note: gateway: the traffic half needs the deployed operator (E2E_IN_CLUSTER=1), whose control plane the fleet's pods reach; skipped"
        );
        false
    };
    let mut probe = None;
    if traffic {
        let address = wait_for("the Gateway Programmed, with an address", LONG, || async {
            let status = get(&gateways, "edge").await?.status.unwrap_or_default();
            match (condition(&status.conditions, "Programmed"), status.addresses.first()) {
                (Some(("True", _)), Some(address)) => Ok(address.value.clone()),
                other => Err(format!("{other:?}: {status:?}")),
            }
        })
        .await;
        let local = backend_pod_name(client, &routes_namespace).await;
        let remote = backend_pod_name(client, &backends_namespace).await;
        let client_probe = Probe { cluster, address, ca: certificates.ca.clone() };
        for scheme in [Scheme::Http, Scheme::Https] {
            let what = format!("{scheme:?} requests reaching both backends ({local}, {remote})");
            wait_for(&what, LONG, || async {
                let answers = client_probe.run(scheme).await?;
                let seen = |pod: &str| answers.iter().any(|(code, body)| code == "200" && body == pod);
                if seen(&local) && seen(&remote) { Ok(()) } else { Err(format!("{answers:?}")) }
            })
            .await;
        }
        probe = Some((client_probe, local));
    }

    // The grant goes: the route may no longer send to the third namespace.
    grants.delete("routes-to-echo", &DeleteParams::default()).await.expect("deleting the ReferenceGrant");
    wait_for("the ReferenceGrant gone", SHORT, || gone(&grants, "routes-to-echo")).await;
    route_judged(&routes, REVOKED, "True", "False RefNotPermitted").await;
    if let Some((client_probe, local)) = &probe {
        for scheme in [Scheme::Http, Scheme::Https] {
            let what = format!("{scheme:?}: the third namespace's share answered 500, the rest by {local}");
            wait_for(&what, LONG, || async {
                let answers = client_probe.run(scheme).await?;
                let refused = answers.iter().filter(|(code, _)| code == "500").count();
                let served_locally =
                    answers.iter().filter(|(code, body)| code == "200" && body == local).count();
                if refused > 0 && served_locally > 0 && refused + served_locally == answers.len() {
                    Ok(())
                } else {
                    Err(format!("{answers:?}"))
                }
            })
            .await;
        }
    }
}

/// `Accepted` and `ResolvedRefs` of the route's parent entry written by the operator, each as
/// `"<status> <reason>"`.
async fn route_conditions(routes: &Api<HTTPRoute>) -> Result<(String, String), String> {
    let route = get(routes, "web").await?;
    let parents = route.status.map(|s| s.parents).unwrap_or_default();
    let parent = parents
        .iter()
        .find(|p| p.controller_name == CONTROLLER_NAME)
        .ok_or_else(|| format!("no status.parents entry of {CONTROLLER_NAME} yet: {parents:?}"))?;
    let words = |type_: &str| {
        condition(&parent.conditions, type_)
            .map_or_else(|| format!("no {type_}"), |(status, reason)| format!("{status} {reason}"))
    };
    Ok((words("Accepted"), words("ResolvedRefs")))
}

/// Waits until the route's `(Accepted, ResolvedRefs)` statuses are `accepted` and `resolved`
/// (`"True"`, or `"False <reason>"`).
async fn route_judged(routes: &Api<HTTPRoute>, what: &str, accepted: &str, resolved: &str) {
    wait_for(what, SHORT, || async {
        let (is_accepted, is_resolved) = route_conditions(routes).await?;
        if is_accepted.starts_with(accepted) && is_resolved.starts_with(resolved) {
            Ok(())
        } else {
            Err(format!("Accepted {is_accepted}, ResolvedRefs {is_resolved}"))
        }
    })
    .await;
}

/// The name of the echo pod of `namespace` once it is Ready (what its `/hostname` answers).
async fn backend_pod_name(client: &kube::Client, namespace: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    wait_for(&format!("the echo backend of {namespace} Ready"), LONG, || async {
        let list = pods
            .list(&kube::api::ListParams::default().labels("app=echo"))
            .await
            .map_err(|e| e.to_string())?;
        list.items
            .iter()
            .find(|pod| {
                let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
                conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .and_then(|pod| pod.metadata.name.clone())
            .ok_or_else(|| {
                let states: Vec<String> = list.items.iter().map(pod_state).collect();
                format!("{} pods, none Ready: {states:?}", list.items.len())
            })
    })
    .await
}

#[derive(Clone, Copy, Debug)]
enum Scheme {
    Http,
    Https,
}

/// A client pod in the Gateway's namespace sending [`REQUESTS`] requests for [`HOST`] to the
/// Gateway's address, each answer printed as `<code> <body>`.
struct Probe<'a> {
    cluster: &'a Cluster,
    /// The Gateway's `status.addresses[0]`.
    address: String,
    /// The CA the HTTPS listener's certificate must chain to.
    ca: String,
}

impl Probe<'_> {
    async fn run(&self, scheme: Scheme) -> Result<Vec<(String, String)>, String> {
        // An IPv6 address in a URL or `--connect-to` needs brackets.
        let target =
            if self.address.contains(':') { format!("[{}]", self.address) } else { self.address.to_owned() };
        let (url_scheme, port, extra) = match scheme {
            Scheme::Http => ("http", 80, ""),
            Scheme::Https => ("https", 443, "--cacert /tmp/ca.pem"),
        };
        let url = format!("{url_scheme}://{HOST}:{port}/hostname");
        // `--connect-to` sends to the Gateway's address while the URL keeps the name: the Host
        // header, and for HTTPS the SNI and the certificate check, are for HOST.
        let script = format!(
            r#"printf '%s\n' "$CA" > /tmp/ca.pem
for i in $(seq 1 {REQUESTS}); do
  rm -f /tmp/body
  code=$(curl -s -o /tmp/body -w '%{{http_code}}' --max-time 3 {extra} --connect-to {HOST}:{port}:{target}:{port} {url})
  echo "$code $(tr -d '\r\n' < /tmp/body 2>/dev/null | head -c 200)"
done"#
        );
        let env = json!([{"name": "CA", "value": &self.ca}]);
        let log = script_pod_log(self.cluster, CURL_IMAGE, &script, env, Duration::from_secs(120)).await;
        let answers: Vec<(String, String)> = log?
            .lines()
            .filter_map(|line| {
                line.split_once(' ').map(|(code, body)| (code.to_owned(), body.trim().to_owned()))
            })
            .collect();
        if answers.len() == REQUESTS {
            Ok(answers)
        } else {
            Err(format!("{} answers: {answers:?}", answers.len()))
        }
    }
}
