//! Where the injector finds `Envoy` resources named by pods: in the webhook, the operator's
//! in-memory cache of Envoys (never a blocking API call on the admission path); offline, a
//! catalog read from manifests.

use std::collections::HashMap;

use serde_json::Value;

use crate::admission::parse;
use crate::api::Envoy;
use crate::bootstrap::XdsTarget;
use crate::manifest::parse_documents;
use crate::rules::defaulted;

/// Where the proxies of an `Envoy` take their configuration from, as a sidecar naming it
/// takes it too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvoyXds {
    /// Its `spec.xds`: a user's xDS server.
    External(XdsTarget),
    /// No `spec.xds`: the operator's control plane, whose CA the Envoy's bootstrap ConfigMap
    /// `config_map` carries (where the operator runs the control plane).
    ControlPlane { config_map: String },
}

/// Finds where an `Envoy`'s proxies take their configuration from.
pub trait EnvoyLookup {
    /// `None` when there is no Envoy `name` in `namespace`.
    fn xds_for(&self, namespace: &str, name: &str) -> Option<EnvoyXds>;
}

/// Where an Envoy's proxies take their configuration from after defaulting, exactly as its
/// own fleet does. A cache of Envoys should call this on each cached object.
pub fn xds_of(envoy: &Envoy) -> EnvoyXds {
    let envoy = defaulted(envoy.clone());
    let spec = envoy.effective();
    match &spec.xds {
        Some(target) => EnvoyXds::External(target.clone()),
        None => EnvoyXds::ControlPlane { config_map: spec.config_map_name.clone() },
    }
}

/// No Envoy resources at all (an operator without a cache, or `inject` without `--envoys`).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoEnvoys;

impl EnvoyLookup for NoEnvoys {
    fn xds_for(&self, _namespace: &str, _name: &str) -> Option<EnvoyXds> {
        None
    }
}

/// Envoys by namespace and name, e.g. read from `--envoys FILE`.
#[derive(Clone, Debug, Default)]
pub struct EnvoyCatalog {
    envoys: HashMap<(String, String), EnvoyXds>,
}

impl EnvoyCatalog {
    pub fn insert(&mut self, namespace: &str, envoy: &Envoy) -> Option<()> {
        let name = envoy.metadata.name.clone()?;
        self.envoys.insert((namespace.to_owned(), name), xds_of(envoy));
        Some(())
    }

    pub fn len(&self) -> usize {
        self.envoys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.envoys.is_empty()
    }

    /// Adds the `Envoy` documents of a manifest (others are ignored); those without a
    /// namespace go into `default_namespace`. Returns a message per document that looked like
    /// an Envoy but could not be read.
    pub fn add_manifest(&mut self, source: &str, text: &str, default_namespace: &str) -> Vec<String> {
        let mut problems = Vec::new();
        for document in parse_documents(text) {
            let origin = format!("{source} (document {}, line {})", document.index, document.line);
            let object = match document.content {
                Ok(object) => object,
                Err(message) => {
                    problems.push(format!("{origin}: not valid YAML or JSON: {message}"));
                    continue;
                }
            };
            let is_envoy = object.get("kind").and_then(Value::as_str) == Some("Envoy")
                && object.get("apiVersion").and_then(Value::as_str) == Some("example.com/v1");
            if !is_envoy {
                continue;
            }
            match parse::<Envoy>(&object) {
                Ok(envoy) => {
                    let namespace =
                        envoy.metadata.namespace.clone().unwrap_or_else(|| default_namespace.to_owned());
                    if self.insert(&namespace, &envoy).is_none() {
                        problems.push(format!("{origin}: an Envoy without metadata.name"));
                    }
                }
                Err(error) => problems.push(format!("{origin}: {error}")),
            }
        }
        problems
    }
}

impl EnvoyLookup for EnvoyCatalog {
    fn xds_for(&self, namespace: &str, name: &str) -> Option<EnvoyXds> {
        self.envoys.get(&(namespace.to_owned(), name.to_owned())).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_applies_defaults_and_namespaces() {
        let text = "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge}\nspec:\n  xds: {host: xds.mesh, port: 18000}\n---\n\
apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: bare, namespace: shop}\nspec: {}\n---\n\
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n";
        let mut catalog = EnvoyCatalog::default();
        assert!(catalog.add_manifest("envoys.yaml", text, "default").is_empty());
        assert_eq!(catalog.len(), 2);
        let Some(EnvoyXds::External(edge)) = catalog.xds_for("default", "edge") else { panic!("spec.xds") };
        assert_eq!((edge.cluster_name.as_str(), edge.port), ("xds_cluster", 18000));
        // Without spec.xds, the operator's control plane; the ConfigMap name defaulted.
        assert_eq!(
            catalog.xds_for("shop", "bare"),
            Some(EnvoyXds::ControlPlane { config_map: "bare-bootstrap".to_owned() })
        );
        assert_eq!(catalog.xds_for("shop", "edge"), None);
    }

    #[test]
    fn unreadable_envoys_are_reported() {
        let text =
            "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge}\nspec: {replicas: many}\n";
        let problems = EnvoyCatalog::default().add_manifest("envoys.yaml", text, "default");
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("spec.replicas"), "{problems:?}");
    }
}
