//! What the operator keeps in a namespace with mesh sidecars (pure): the CA ConfigMap
//! ([`MESH_CA_CONFIG_MAP`]: the control plane's CA file, which the sidecars mount, and the record
//! of the identities issued there) and one identity Secret per ServiceAccount in use
//! ([`mesh_secret_name`]: the client certificate of `spiffe://…/ns/<namespace>/sa/<name>`).
//!
//! The operator may write Secrets but not read them, so it decides renewals from the records in
//! the ConfigMap, which it reads from its cache, as a fleet's are read from its Deployment.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::bootstrap::identity_sds_file;
use crate::children::envoy::CA_SDS_KEY;
use crate::identity::{IssuedIdentity, MESH_CA_CONFIG_MAP, SDS_KEY, mesh_secret_name};
use crate::names::{
    CERT_KEY, KEY_KEY, MANAGED_BY, MANAGED_BY_KEY, MESH_CA_LABEL, MESH_IDENTITY_SECRET_LABEL, TLS_SECRET_TYPE,
};

/// Key of the CA ConfigMap recording the identities issued in its namespace: JSON, each
/// ServiceAccount's [`IssuedIdentity::annotation`].
pub const ISSUED_KEY: &str = "issued-identities.json";

/// The identities recorded in a namespace's CA ConfigMap; none when it has none or they do not
/// read (each is then issued again, which is always safe).
pub fn records(config_map: &ConfigMap) -> BTreeMap<String, IssuedIdentity> {
    let Some(text) = config_map.data.as_ref().and_then(|data| data.get(ISSUED_KEY)) else {
        return BTreeMap::new();
    };
    let recorded: BTreeMap<String, String> = serde_json::from_str(text).unwrap_or_default();
    recorded
        .into_iter()
        .filter_map(|(account, record)| Some((account, IssuedIdentity::parse(&record)?)))
        .collect()
}

/// The CA ConfigMap of `namespace`: the CA file `ca_file` (when known) and `records`.
pub fn ca_config_map(
    namespace: &str,
    ca_file: Option<&str>,
    records: &BTreeMap<String, IssuedIdentity>,
) -> ConfigMap {
    let recorded: BTreeMap<&str, String> =
        records.iter().map(|(account, record)| (account.as_str(), record.annotation())).collect();
    let mut data = BTreeMap::from([(
        ISSUED_KEY.to_owned(),
        serde_json::to_string(&recorded).unwrap_or_else(|_| "{}".to_owned()),
    )]);
    if let Some(ca_file) = ca_file {
        data.insert(CA_SDS_KEY.to_owned(), ca_file.to_owned());
    }
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(MESH_CA_CONFIG_MAP.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (MANAGED_BY_KEY.to_owned(), MANAGED_BY.to_owned()),
                (MESH_CA_LABEL.to_owned(), "true".to_owned()),
            ])),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    }
}

/// The identity Secret of the mesh sidecars of `service_account`: `kubernetes.io/tls` (the
/// certificate and key) and the SDS file the sidecars read them from.
pub fn identity_secret(namespace: &str, service_account: &str, cert_pem: &str, key_pem: &str) -> Secret {
    let data = [
        (CERT_KEY, cert_pem.to_owned()),
        (KEY_KEY, key_pem.to_owned()),
        (SDS_KEY, identity_sds_file(cert_pem, key_pem)),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), ByteString(value.into_bytes())))
    .collect();
    Secret {
        metadata: ObjectMeta {
            name: Some(mesh_secret_name(service_account)),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (MANAGED_BY_KEY.to_owned(), MANAGED_BY.to_owned()),
                (MESH_IDENTITY_SECRET_LABEL.to_owned(), "true".to_owned()),
            ])),
            annotations: Some(BTreeMap::from([(
                MESH_IDENTITY_SECRET_LABEL.to_owned(),
                service_account.to_owned(),
            )])),
            ..Default::default()
        },
        type_: Some(TLS_SECRET_TYPE.to_owned()),
        data: Some(data),
        ..Default::default()
    }
}

/// What one namespace needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespacePlan {
    pub namespace: String,
    /// ServiceAccounts whose identity must be issued now (none recorded, another CA's, or due).
    pub issue: Vec<String>,
    /// Whether the ConfigMap must be written even with nothing to issue (absent, or its CA
    /// file is not the current one).
    pub write_config_map: bool,
}

/// What the namespaces need: `in_use` maps each namespace to the ServiceAccounts its mesh
/// pods run as; `config_maps` each namespace to its CA ConfigMap, when it has one; `ca_file` is
/// the CA file the sidecars must trust now (`None`: not known yet), `issuer` the identity CA's
/// fingerprint. Namespaces with nothing to do are left out.
pub fn plan(
    in_use: &BTreeMap<String, BTreeSet<String>>,
    config_maps: &BTreeMap<String, &ConfigMap>,
    ca_file: Option<&str>,
    issuer: &str,
    now_unix: i64,
) -> Vec<NamespacePlan> {
    in_use
        .iter()
        .filter_map(|(namespace, accounts)| {
            let config_map = config_maps.get(namespace);
            let recorded = config_map.map(|config_map| records(config_map)).unwrap_or_default();
            let issue: Vec<String> = accounts
                .iter()
                .filter(|account| IssuedIdentity::is_due(recorded.get(*account), issuer, now_unix))
                .cloned()
                .collect();
            let current_ca = config_map.and_then(|config_map| config_map.data.as_ref()?.get(CA_SDS_KEY));
            let write_config_map =
                config_map.is_none() || (ca_file.is_some() && current_ca.map(String::as_str) != ca_file);
            (!issue.is_empty() || write_config_map).then(|| NamespacePlan {
                namespace: namespace.clone(),
                issue,
                write_config_map,
            })
        })
        .collect()
}

/// The earliest renewal due among `config_maps`' records, in Unix seconds.
pub fn next_renewal<'a>(config_maps: impl IntoIterator<Item = &'a ConfigMap>) -> Option<i64> {
    config_maps
        .into_iter()
        .flat_map(|config_map| records(config_map).into_values())
        .map(|r| r.renew_after)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(issuer: &str, renew_after: i64) -> IssuedIdentity {
        IssuedIdentity { issuer: issuer.to_owned(), renew_after }
    }

    fn in_use(pairs: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
        let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (namespace, account) in pairs {
            map.entry((*namespace).to_owned()).or_default().insert((*account).to_owned());
        }
        map
    }

    #[test]
    fn the_config_map_records_what_was_issued_and_reads_it_back() {
        let records = BTreeMap::from([("web".to_owned(), record("ab12", 1_000))]);
        let config_map = ca_config_map("shop", Some("FILE"), &records);
        assert_eq!(config_map.metadata.name.as_deref(), Some("envoy-mesh-xds-ca"));
        assert_eq!(config_map.metadata.labels.as_ref().unwrap()[MANAGED_BY_KEY], MANAGED_BY);
        let data = config_map.data.as_ref().unwrap();
        assert_eq!(data[CA_SDS_KEY], "FILE");
        assert_eq!(data[ISSUED_KEY], r#"{"web":"ab12;renew-after=1000"}"#);
        assert_eq!(super::records(&config_map), records);
        let garbled = ConfigMap {
            data: Some(BTreeMap::from([(ISSUED_KEY.to_owned(), "not json".to_owned())])),
            ..Default::default()
        };
        assert!(super::records(&garbled).is_empty(), "issued again, which is safe");
    }

    #[test]
    fn the_secret_is_a_tls_secret_with_the_sds_file() {
        let secret = identity_secret("shop", "web", "CERT", "KEY");
        assert_eq!(secret.metadata.name.as_deref(), Some("web-mesh-identity"));
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        let data = secret.data.unwrap();
        assert_eq!(data.keys().collect::<Vec<_>>(), ["tls.crt", "tls.key", "xds-identity.yaml"]);
        assert!(String::from_utf8_lossy(&data["xds-identity.yaml"].0).contains("CERT"));
    }

    #[test]
    fn only_what_is_missing_due_or_of_another_ca_is_issued() {
        let now = 500;
        let current = ca_config_map(
            "shop",
            Some("FILE"),
            &BTreeMap::from([
                ("web".to_owned(), record("ab12", 1_000)),
                ("due".to_owned(), record("ab12", 400)),
                ("old-ca".to_owned(), record("cd34", 1_000)),
            ]),
        );
        let config_maps = BTreeMap::from([("shop".to_owned(), &current)]);
        let plans = plan(
            &in_use(&[
                ("shop", "web"),
                ("shop", "due"),
                ("shop", "old-ca"),
                ("shop", "new"),
                ("bank", "default"),
            ]),
            &config_maps,
            Some("FILE"),
            "ab12",
            now,
        );
        assert_eq!(
            plans,
            [
                NamespacePlan {
                    namespace: "bank".to_owned(),
                    issue: vec!["default".to_owned()],
                    write_config_map: true
                },
                NamespacePlan {
                    namespace: "shop".to_owned(),
                    issue: vec!["due".to_owned(), "new".to_owned(), "old-ca".to_owned()],
                    write_config_map: false
                },
            ]
        );
        // All current: nothing; a new CA file: the ConfigMap alone.
        assert!(plan(&in_use(&[("shop", "web")]), &config_maps, Some("FILE"), "ab12", now).is_empty());
        assert_eq!(
            plan(&in_use(&[("shop", "web")]), &config_maps, Some("NEW"), "ab12", now),
            [NamespacePlan { namespace: "shop".to_owned(), issue: Vec::new(), write_config_map: true }]
        );
        assert_eq!(next_renewal([&current]), Some(400));
    }
}
