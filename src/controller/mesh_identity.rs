//! The mesh sidecars' identities: in every namespace with a pod carrying a mesh sidecar (the
//! injector labels them [`MESH_SIDECAR_LABEL`]), the CA ConfigMap the sidecars mount (the control
//! plane's CA file) and, per ServiceAccount those pods run as, the identity Secret with its
//! client certificate (`spiffe://cluster.local/ns/<namespace>/sa/<name>`), issued by the identity
//! CA and renewed at half its life or when the CA changes, as a fleet's are. A pod waits
//! (`ContainerCreating`, its volumes not ready) until both exist, and is Ready only once its
//! sidecar is configured.
//!
//! Level-driven and whole: on any change of the mesh pods, of the ConfigMaps, of the CA or of the
//! control plane's trust, and when a renewal falls due, the pure
//! [`envoy_operator_core::children::mesh::plan`] says what each namespace needs, and only that
//! is written (server-side apply, forced: the objects are the operator's alone). Secrets are
//! written, never read; the issued identities are recorded in the ConfigMap. The leader runs it,
//! where the operator serves its control plane.
//!
//! [`MESH_SIDECAR_LABEL`]: envoy_operator_core::names::MESH_SIDECAR_LABEL

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use envoy_operator_core::bootstrap::ca_sds_file;
use envoy_operator_core::children::envoy::ControlPlaneTrust;
use envoy_operator_core::children::mesh::{self, NamespacePlan};
use envoy_operator_core::identity::{FleetIdentity, MESH_CA_CONFIG_MAP, mesh_secret_name};
use envoy_operator_core::names::FIELD_MANAGER;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use time::OffsetDateTime;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::certs::identity_ca::IdentityCa;
use crate::index::Index;
use crate::ops::logging::readable;

/// How long a burst of changes is gathered before the namespaces are looked at again.
const SETTLE: Duration = Duration::from_millis(500);
/// Looked at again at least this often (a failed write is retried then), and whenever a
/// renewal falls due.
const RESYNC: Duration = Duration::from_secs(300);

/// Keeps the mesh identities current until the index's watches end.
pub async fn run(
    index: Arc<Index>,
    trust: watch::Receiver<ControlPlaneTrust>,
    mut issuer: watch::Receiver<Arc<IdentityCa>>,
) {
    let (pods, config_maps) = (index.mesh_pods().clone(), index.mesh_config_maps().clone());
    let mut changes = std::pin::pin!(futures::stream::select(
        pods.changes().map(|_| ()),
        config_maps.changes().map(|_| ())
    ));
    let mut trust_changes = trust.clone();
    if pods.listed().await.is_err() || config_maps.listed().await.is_err() {
        return;
    }
    loop {
        let (current_trust, current_issuer) = (trust.borrow().clone(), issuer.borrow_and_update().clone());
        trust_changes.mark_unchanged();
        let wait = reconcile(&index, &current_trust, &current_issuer).await;
        let sleep = tokio::time::sleep(wait);
        tokio::pin!(sleep);
        tokio::select! {
            change = changes.next() => if change.is_none() { return },
            changed = issuer.changed() => if changed.is_err() { return },
            changed = trust_changes.changed() => if changed.is_err() { return },
            () = &mut sleep => {},
        }
        // A rollout labels many pods at once: look once they have come.
        tokio::time::sleep(SETTLE).await;
    }
}

/// One pass over every namespace with mesh pods; how long until the next is needed.
async fn reconcile(index: &Index, trust: &ControlPlaneTrust, issuer: &IdentityCa) -> Duration {
    let mut in_use: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for pod in index.mesh_pods().store().state() {
        let Some(namespace) = pod.namespace() else { continue };
        let account = pod.spec.as_ref().and_then(|spec| spec.service_account_name.clone());
        in_use.entry(namespace).or_default().insert(account.unwrap_or_else(|| "default".to_owned()));
    }
    let cached = index.mesh_config_maps().store().state();
    let config_maps: BTreeMap<String, &ConfigMap> = cached
        .iter()
        .filter(|config_map| config_map.name_any() == MESH_CA_CONFIG_MAP)
        .filter_map(|config_map| Some((config_map.namespace()?, config_map.as_ref())))
        .collect();
    let ca_file = trust.ca_pem.as_deref().map(|ca_pem| ca_sds_file(ca_pem, &trust.control_plane.host));
    let now = OffsetDateTime::now_utc();
    let plans =
        mesh::plan(&in_use, &config_maps, ca_file.as_deref(), issuer.fingerprint(), now.unix_timestamp());
    let mut failed = false;
    for plan in plans {
        let recorded = config_maps.get(&plan.namespace).map(|config_map| mesh::records(config_map));
        if let Err(error) =
            write(index, &plan, recorded.unwrap_or_default(), ca_file.as_deref(), issuer, now).await
        {
            failed = true;
            warn!(namespace = %plan.namespace, %error, "keeping the mesh identities current failed; retrying");
        }
    }
    let next = mesh::next_renewal(config_maps.values().copied())
        .map(|renew_after| u64::try_from(renew_after - now.unix_timestamp()).unwrap_or(0))
        .map_or(RESYNC, |seconds| Duration::from_secs(seconds).min(RESYNC));
    if failed { next.min(Duration::from_secs(10)) } else { next.max(Duration::from_secs(1)) }
}

/// Issues what `plan` says and writes the Secrets, then the ConfigMap recording them.
async fn write(
    index: &Index,
    plan: &NamespacePlan,
    mut records: BTreeMap<String, envoy_operator_core::identity::IssuedIdentity>,
    ca_file: Option<&str>,
    issuer: &IdentityCa,
    now: OffsetDateTime,
) -> Result<(), String> {
    let namespace = &plan.namespace;
    let secrets: Api<Secret> = Api::namespaced(index.client().clone(), namespace);
    // Forced: the objects are the operator's alone (their labels say so).
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for account in &plan.issue {
        let identity = FleetIdentity::mesh(namespace, account);
        let issued = issuer.issue(&identity, now).map_err(|error| error.to_string())?;
        let secret = mesh::identity_secret(namespace, account, &issued.cert_pem, &issued.key_pem);
        let name = mesh_secret_name(account);
        secrets
            .patch(&name, &params, &Patch::Apply(&secret))
            .await
            .map_err(|error| format!("apply Secret {name:?}: {}", readable(&error)))?;
        info!(%namespace, service_account = %account, secret = %name, issuer = issuer.fingerprint(), "issued a mesh sidecar identity");
        records.insert(account.clone(), issued.record);
    }
    let config_map = mesh::ca_config_map(namespace, ca_file, &records);
    let config_maps: Api<ConfigMap> = Api::namespaced(index.client().clone(), namespace);
    config_maps
        .patch(MESH_CA_CONFIG_MAP, &params, &Patch::Apply(&config_map))
        .await
        .map_err(|error| format!("apply ConfigMap {MESH_CA_CONFIG_MAP:?}: {}", readable(&error)))?;
    Ok(())
}
