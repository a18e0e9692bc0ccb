//! A fleet's bootstrap ConfigMap, as the reconciler writes it, made runnable by an Envoy on
//! loopback: what the pod's mount and command line would supply, supplied here.

use std::collections::BTreeMap;
use std::path::Path;

use envoy_operator_core::children::envoy::{BOOTSTRAP_KEY, CA_SDS_KEY, CONFIG_DIR};
use serde_json::{Value, json};

/// The ConfigMap's files written to `dir` (instead of the pod's mount at `/etc/envoy`), the
/// node id and cluster the pod passes (`--service-node $(POD_NAME)`, `--service-cluster`), and
/// admin and readiness ports the system picks. "localhost" may resolve to ::1 first; the tests'
/// control planes listen on 127.0.0.1, so DNS clusters look up IPv4 only.
pub fn runnable_bootstrap(
    data: &BTreeMap<String, String>,
    dir: &Path,
    node_id: &str,
    cluster: &str,
) -> Value {
    let mount = dir.to_str().expect("a UTF-8 path");
    let ca = data.get(CA_SDS_KEY).expect("the ConfigMap carries the control plane's CA");
    std::fs::write(dir.join(CA_SDS_KEY), ca).expect("writing the CA file");
    let yaml =
        data.get(BOOTSTRAP_KEY).expect("the ConfigMap carries the bootstrap").replace(CONFIG_DIR, mount);
    let mut bootstrap: Value = serde_saphyr::from_str(&yaml).expect("the bootstrap is YAML");
    bootstrap["node"]["id"] = json!(node_id);
    bootstrap["node"]["cluster"] = json!(cluster);
    bootstrap["admin"]["address"]["socket_address"]["port_value"] = json!(0);
    for listener in bootstrap["static_resources"]["listeners"].as_array_mut().into_iter().flatten() {
        listener["address"]["socket_address"]["port_value"] = json!(0);
    }
    for cluster in bootstrap["static_resources"]["clusters"].as_array_mut().into_iter().flatten() {
        if cluster["type"] == "STRICT_DNS" {
            cluster["dns_lookup_family"] = json!("V4_ONLY");
        }
    }
    bootstrap
}
