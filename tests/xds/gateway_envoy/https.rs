//! HTTPS with a certificate from a `kubernetes.io/tls` Secret, through `run`: a client asking
//! for the route's name gets the Secret's certificate and the backend's answer; the Secret's
//! data replaced in the API server reaches new handshakes in the same Envoy process; and the
//! private key is never written into a ConfigMap.

use envoy_operator_core::translate::gateway::fleet::name as fleet_name;
use envoy_operator_testkit::fleet_world::{at, free_port};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value, json};

use super::client::{Authority, Issued};
use super::world::{CLASS, Expect, GatewayWorld, Proxy, gateway, http_route, tls_secret};
use crate::support::backend::Backend;
use crate::support::{CONVERGE, envoy, eventually};

const HOST: &str = "shop.gateway.test";

/// Waits until a handshake asking for [`HOST`] is presented `expected` and the request is
/// answered by `backend`.
async fn until_served_with(authority: &Authority, port: u16, expected: &Issued, backend: &str) {
    eventually(
        &format!("https://{HOST} served by {backend} with the expected certificate"),
        CONVERGE,
        || async {
            let (leaf, answer) = authority.get(port, HOST, HOST, "/").await?;
            if leaf != expected.der {
                return Err("another certificate presented".to_owned());
            }
            Expect::By(backend).check(Ok(answer))
        },
    )
    .await;
}

/// Envoy's uptime in this process (seconds), and that it was never hot-restarted.
async fn uptime(proxy: &Proxy) -> u64 {
    let info = proxy.admin_json("/server_info").await;
    assert_eq!(info["state"], "LIVE", "{info}");
    let epoch = &info["command_line_options"]["restart_epoch"];
    assert!(epoch.is_null() || epoch == 0, "no hot restart: {info}");
    let text = info["uptime_current_epoch"].as_str().unwrap_or_default();
    text.trim_end_matches('s').parse().unwrap_or_else(|_| panic!("an uptime, not {info}"))
}

/// The base64 lines of a PEM key: what would show of it in any file that copied it.
fn key_lines(key_pem: &str) -> Vec<&str> {
    key_pem.lines().filter(|line| !line.starts_with("-----") && !line.is_empty()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_serves_https_with_a_secrets_certificate_rotated_without_a_restart() {
    if !envoy::available() {
        return;
    }
    let backend = Backend::start("backend-a").await;
    let authority = Authority::new();
    let first = authority.issue(&["*.gateway.test"]);
    let port = free_port().port();
    let listener = json!({"name": "https", "port": port, "protocol": "HTTPS", "hostname": "*.gateway.test",
                          "tls": {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": "shop-tls"}]}});
    let world = GatewayWorld::start(
        &[("a", &backend)],
        &[
            tls_secret("shop-tls", &first.chain_pem, &first.key_pem),
            gateway("public", json!([listener])),
            http_route(
                "store",
                json!({"parentRefs": [{"name": "public"}], "hostnames": [HOST],
                       "rules": [{"backendRefs": [{"name": "a", "port": 80}]}]}),
            ),
        ],
    )
    .await;
    let proxy = world.proxy("public").await;

    until_served_with(&authority, port, &first, &backend.name).await;
    world.until_listener_condition("public", "https", ("ResolvedRefs", "True", "ResolvedRefs")).await;
    world.until_listener_condition("public", "https", ("Programmed", "True", "Programmed")).await;
    let before = uptime(&proxy).await;
    let modified = proxy.stat("listener_manager.listener_modified").await;

    // The Secret renewed in the API server (as cert-manager does): same name, new data.
    let renewed = authority.issue(&["*.gateway.test"]);
    assert_ne!(renewed.der, first.der);
    let (secret_at, secret) = tls_secret("shop-tls", &renewed.chain_pem, &renewed.key_pem);
    world.api.put(&secret_at, secret);
    until_served_with(&authority, port, &renewed, &backend.name).await;
    // The same process served it, never restarted (the test started it once; its uptime ran on).
    assert!(uptime(&proxy).await >= before, "Envoy's uptime went back: restarted");
    // Only the certificate changed, over SDS: the listener was not replaced, nothing rejected.
    assert_eq!(proxy.stat("listener_manager.listener_modified").await, modified, "the listener was replaced");
    assert_eq!(proxy.stat("listener_manager.lds.update_rejected").await, 0);

    // Private keys live in Secrets and in memory only: no ConfigMap of any namespace holds a
    // line of either.
    let config_maps = kube::Api::<ConfigMap>::all(world.api.client())
        .list(&Default::default())
        .await
        .expect("the ConfigMaps");
    assert!(!config_maps.items.is_empty(), "the fleet's bootstrap ConfigMap at least");
    for config_map in &config_maps.items {
        let text = serde_json::to_string(config_map).expect("JSON");
        for (issued, which) in [(&first, "first"), (&renewed, "renewed")] {
            for line in key_lines(&issued.key_pem) {
                assert!(
                    !text.contains(line),
                    "ConfigMap {:?} holds the {which} private key",
                    config_map.metadata.name
                );
            }
        }
    }
    let fleet = world.api.get(&at("example.com/v1", "envoys", &fleet_name("public", CLASS)));
    let fleet_text = fleet.as_ref().map(Value::to_string).expect("the Gateway's fleet");
    assert!(
        key_lines(&renewed.key_pem).iter().all(|line| !fleet_text.contains(line)),
        "the fleet's Envoy holds the key"
    );
    drop(proxy);
    world.stop().await;
}
