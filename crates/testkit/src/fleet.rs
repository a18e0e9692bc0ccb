//! A fleet's bootstrap ConfigMap, as the reconciler writes it, made runnable by an Envoy on
//! loopback: what the pod's mount and command line would supply, supplied here.

use std::collections::BTreeMap;
use std::path::Path;

use envoy_operator_core::children::envoy::{BOOTSTRAP_KEY, CA_SDS_KEY, CONFIG_DIR};
use envoy_operator_core::identity;
use serde_json::{Value, json};

/// The ConfigMap's files written to `dir` (instead of the pod's mount at `/etc/envoy`), the
/// identity Secret's SDS file `identity_sds` to `dir/identity` (instead of its mount), the node
/// id and cluster the pod passes (`--service-node $(POD_NAME)`, `--service-cluster`), and
/// admin and readiness ports the system picks. "localhost" may resolve to ::1 first; the tests'
/// control planes listen on 127.0.0.1, so DNS clusters look up IPv4 only.
pub fn runnable_bootstrap(
    data: &BTreeMap<String, String>,
    dir: &Path,
    node_id: &str,
    cluster: &str,
    identity_sds: &str,
) -> Value {
    let mount = dir.to_str().expect("a UTF-8 path");
    let ca = data.get(CA_SDS_KEY).expect("the ConfigMap carries the control plane's CA");
    std::fs::write(dir.join(CA_SDS_KEY), ca).expect("writing the CA file");
    let identity_dir = identity_dir(dir);
    std::fs::create_dir_all(&identity_dir).expect("the identity directory");
    renew_identity(dir, identity_sds);
    let yaml = data
        .get(BOOTSTRAP_KEY)
        .expect("the ConfigMap carries the bootstrap")
        .replace(identity::MOUNT_DIR, identity_dir.to_str().expect("a UTF-8 path"))
        .replace(CONFIG_DIR, mount);
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

/// Where [`runnable_bootstrap`] puts the identity Secret's file.
pub fn identity_dir(dir: &Path) -> std::path::PathBuf {
    dir.join("identity")
}

/// Replaces the identity file as the kubelet updates a Secret volume: the new file is moved
/// into the watched directory, never written in place.
pub fn renew_identity(dir: &Path, identity_sds: &str) {
    let identity_dir = identity_dir(dir);
    let staged = identity_dir.join(".staged");
    std::fs::write(&staged, identity_sds).expect("staging the identity file");
    std::fs::rename(&staged, identity_dir.join(identity::SDS_KEY)).expect("moving the identity file in");
}
