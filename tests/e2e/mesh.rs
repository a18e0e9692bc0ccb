//! The mesh (Gateway API's GAMMA): in a namespace labelled for injection, an HTTPRoute on the
//! Service `echo-v1` splits the requests its clients send to `http://echo-v1` between the pods of
//! `echo-v1` and `echo-v2` and sets a response header, through each client pod's own sidecar;
//! the Service `echo-v2`, which no route takes, answers as without a mesh. Both modes check the
//! route's status for its Service parent; the traffic half needs the deployed operator (the
//! sidecars reach its control plane) and a node, and fails saying why without one (unless
//! `E2E_NO_NODES=1` declares such a cluster); in-process it is skipped with a note. Images:
//! agnhost (the echo servers), curlimages/curl (the client).

use std::time::Duration;

use envoy_operator_core::api::gateway::HTTPRoute;
use envoy_operator_core::inject::annotations::{NAMESPACE_LABEL, NAMESPACE_LABEL_ENABLED};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams};
use serde_json::json;

use crate::harness::{
    Cluster, LONG, SHORT, create_in, get, in_cluster, in_cluster_mode, pod_state, script_pod_log, wait_for,
};
use crate::load_client::CURL_IMAGE;

const ECHO_IMAGE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";
const CONTROLLER_NAME: &str = envoy_operator_core::names::CONTROLLER_NAME;
/// Requests per probe: with two backends of equal weight, both are seen unless something is
/// wrong (a miss by chance is 2 in a million).
const REQUESTS: usize = 24;
/// The header the route sets on its answers.
const ROUTED: &str = "x-mesh-route";

/// `echo-<version>`: an agnhost netexec pod (`/hostname` answers its pod's name) behind the
/// Service of the same name, port 80.
async fn echo(client: &kube::Client, namespace: &str, version: &str) {
    let name = format!("echo-{version}");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    create_in::<Deployment>(&deployments, json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "echo", "version": version}},
                 "template": {"metadata": {"labels": {"app": "echo", "version": version}},
                              "spec": {"containers": [{"name": "echo", "image": ECHO_IMAGE,
                                                       "args": ["netexec", "--http-port=8080"],
                                                       "ports": [{"name": "http", "containerPort": 8080}],
                                                       "readinessProbe": {"tcpSocket": {"port": "http"}}}]}}}}))
    .await;
    create_in::<Service>(
        &Api::namespaced(client.clone(), namespace),
        json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": "echo", "version": version},
                 "ports": [{"name": "http", "port": 80, "targetPort": "http", "appProtocol": "http"}]}}),
    )
    .await;
}

/// The name of the ready pod of `echo-<version>`.
async fn echo_pod(client: &kube::Client, namespace: &str, version: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("app=echo,version={version}");
    wait_for(&format!("a ready echo-{version} pod"), LONG, || async {
        let list = pods.list(&ListParams::default().labels(&selector)).await.map_err(|e| e.to_string())?;
        let ready = list.items.iter().find(|pod| {
            pod.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        });
        match ready {
            Some(pod) => Ok(pod.metadata.name.clone().unwrap_or_default()),
            None => Err(list.items.iter().map(pod_state).collect::<Vec<_>>().join("; ")),
        }
    })
    .await
}

/// The script of a probe pod: `REQUESTS` requests to `url`, a line each: the status code, the
/// route's header (`-` without it) and the body (a pod's name).
pub fn probe_script(url: &str) -> String {
    format!(
        r#"for i in $(seq 1 {REQUESTS}); do
  rm -f /tmp/body /tmp/headers
  code=$(curl -s -o /tmp/body -D /tmp/headers -w '%{{http_code}}' --max-time 3 {url})
  routed=$(tr -d '\r' < /tmp/headers 2>/dev/null | grep -i '^{ROUTED}:' | cut -d' ' -f2)
  echo "$code ${{routed:--}} $(tr -d '\r\n' < /tmp/body 2>/dev/null | head -c 200)"
done"#
    )
}

/// One answer of a probe: status code, the route's header (None: absent), body.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    pub code: String,
    pub routed: Option<String>,
    pub body: String,
}

/// The answers of a probe's log ([`probe_script`]).
pub fn answers(log: &str) -> Vec<Answer> {
    log.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ' ');
            let code = parts.next()?.to_owned();
            let routed = parts.next()?;
            Some(Answer {
                code,
                routed: (routed != "-").then(|| routed.to_owned()),
                body: parts.next().unwrap_or_default().trim().to_owned(),
            })
        })
        .collect()
}

/// Runs a probe pod (it gets a mesh sidecar, as every pod of the namespace) calling `url`, and
/// returns its answers once it has finished.
async fn probe(cluster: &Cluster, url: &str) -> Result<Vec<Answer>, String> {
    let log =
        script_pod_log(cluster, CURL_IMAGE, &probe_script(url), json!([]), Duration::from_secs(180)).await?;
    let answers = answers(&log);
    if answers.len() == REQUESTS {
        Ok(answers)
    } else {
        Err(format!("{} answers: {answers:?}", answers.len()))
    }
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn a_route_on_a_service_splits_its_clients_requests_through_their_sidecars() {
    in_cluster("mesh", async |cluster| {
        let client = &cluster.client;
        crate::gateway::require_gateway_api(client).await;
        let namespace =
            cluster.extra_namespace("mesh", json!({NAMESPACE_LABEL: NAMESPACE_LABEL_ENABLED})).await;
        echo(client, &namespace, "v1").await;
        echo(client, &namespace, "v2").await;
        let routes: Api<HTTPRoute> = Api::namespaced(client.clone(), &namespace);
        create_in::<HTTPRoute>(&routes, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "echo-split"},
            "spec": {"parentRefs": [{"group": "", "kind": "Service", "name": "echo-v1", "port": 80}],
                     "rules": [{"filters": [{"type": "ResponseHeaderModifier",
                                             "responseHeaderModifier": {"set": [{"name": ROUTED, "value": "split"}]}}],
                                "backendRefs": [{"name": "echo-v1", "port": 80}, {"name": "echo-v2", "port": 80}]}]}}))
        .await;
        wait_for("the route Accepted by its Service parent", SHORT, || async {
            let route = get(&routes, "echo-split").await?;
            let parents = route.status.map(|status| status.parents).unwrap_or_default();
            let ours = parents
                .iter()
                .find(|parent| parent.controller_name == CONTROLLER_NAME && parent.parent_ref.name == "echo-v1");
            match ours.map(|parent| parent.conditions.iter().find(|c| c.type_ == "Accepted")) {
                Some(Some(accepted)) if accepted.status == "True" => Ok(()),
                other => Err(format!("{other:?}: {parents:?}")),
            }
        })
        .await;

        if !in_cluster_mode() {
            eprintln!(
                "note: mesh: the traffic half needs the deployed operator (E2E_IN_CLUSTER=1), whose control plane the sidecars reach; skipped"
            );
            return;
        }
        if !cluster.runs_pods("mesh: the traffic half") {
            return;
        }
        let (v1, v2) = (echo_pod(client, &namespace, "v1").await, echo_pod(client, &namespace, "v2").await);
        let split = wait_for("requests to echo-v1 split between both versions by the route", LONG, || async {
            let answers = probe(cluster, "http://echo-v1/hostname").await?;
            let from = |pod: &str| answers.iter().filter(|a| a.body == pod).count();
            let all_routed = answers.iter().all(|a| a.code == "200" && a.routed.as_deref() == Some("split"));
            if all_routed && from(&v1) > 0 && from(&v2) > 0 { Ok(answers) } else { Err(format!("{answers:?}")) }
        })
        .await;
        assert_eq!(split.len(), REQUESTS);

        let direct = probe(cluster, "http://echo-v2/hostname").await.expect("a probe of echo-v2");
        assert!(
            direct.iter().all(|a| a.code == "200" && a.body == v2 && a.routed.is_none()),
            "echo-v2, which no route takes, answers itself, untouched: {direct:?}"
        );
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe's script, run here with this machine's `sh` and `curl` against a server on
    /// loopback answering as a routed echo would, then as an unrouted one: the parser reads
    /// what the script prints.
    #[test]
    fn the_probe_prints_a_line_per_request_that_the_parser_reads() {
        use std::io::{Read, Write};
        let Ok(curl) = std::process::Command::new("curl").arg("--version").output() else {
            eprintln!("SKIPPED: no curl on this machine");
            return;
        };
        assert!(curl.status.success());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let address = listener.local_addr().expect("its address");
        std::thread::spawn(move || {
            for (i, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { return };
                let mut request = [0u8; 1024];
                let _ = stream.read(&mut request);
                let header = if i % 2 == 0 { format!("{ROUTED}: split\r\n") } else { String::new() };
                let body = format!("echo-v{}-7d9f", 1 + i % 2);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\n{header}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(probe_script(&format!("http://{address}/hostname")))
            .output()
            .expect("sh runs");
        let answers = answers(&String::from_utf8_lossy(&output.stdout));
        assert_eq!(answers.len(), REQUESTS, "{answers:?}");
        assert_eq!(
            answers[0],
            Answer { code: "200".into(), routed: Some("split".into()), body: "echo-v1-7d9f".into() }
        );
        assert_eq!(answers[1], Answer { code: "200".into(), routed: None, body: "echo-v2-7d9f".into() });
    }
}
