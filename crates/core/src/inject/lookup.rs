//! Where the injector finds `Envoy` resources named by pods: in the webhook, the operator's
//! in-memory cache of Envoys (never a blocking API call on the admission path); offline, a
//! catalog read from manifests.

use std::collections::HashMap;

use serde_json::Value;

use crate::admission::parse;
use crate::api::Envoy;
use crate::bootstrap::XdsTarget;
use crate::children::envoy::ca_config_map_name;
use crate::manifest::parse_documents;
use crate::rules::defaulted;

/// Where the proxies of an `Envoy` take their configuration from, as a sidecar naming it
/// takes it too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvoyXds {
    /// Its `spec.xds`: a user's xDS server.
    External(XdsTarget),
    /// No `spec.xds`: the operator's control plane (where the operator runs one). A sidecar
    /// trusts the CA of the ConfigMap `ca_config_map`, and is served the fleet's `listeners`,
    /// which it binds in its pod as the fleet's proxies do in theirs.
    ControlPlane { ca_config_map: String, listeners: Vec<ListenerPort> },
}

/// A listener of a fleet: the port it binds in the pod, and the name of the Envoy's port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerPort {
    pub name: String,
    pub port: i32,
}

/// Finds where an `Envoy`'s proxies take their configuration from.
pub trait EnvoyLookup {
    /// `None` when there is no Envoy `name` in `namespace`.
    fn xds_for(&self, namespace: &str, name: &str) -> Option<EnvoyXds>;

    /// The one namespace whose Envoys this lookup sees, when it does not see every namespace
    /// (an operator with `--watch-namespace`): elsewhere, `None` from
    /// [`xds_for`](Self::xds_for) does not mean the Envoy does not exist.
    fn only_namespace(&self) -> Option<&str> {
        None
    }
}

/// Where an Envoy's proxies take their configuration from after defaulting, exactly as its
/// own fleet does. A cache of Envoys should call this on each cached object.
pub fn xds_of(envoy: &Envoy) -> EnvoyXds {
    let envoy = defaulted(envoy.clone());
    let spec = envoy.effective();
    match &spec.xds {
        Some(target) => EnvoyXds::External(target.clone()),
        None => EnvoyXds::ControlPlane {
            ca_config_map: ca_config_map_name(envoy.metadata.name.as_deref().unwrap_or_default()),
            // Exactly the ports the control plane's listeners bind (`xds::listener`).
            listeners: spec
                .ports
                .iter()
                .filter_map(|port| {
                    let bound = port.bound_port()?;
                    Some(ListenerPort { name: port.name.clone(), port: i32::from(bound) })
                })
                .collect(),
        },
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
        // Without spec.xds, the operator's control plane: the CA's ConfigMap, named after the
        // Envoy whatever its spec.configMapName, and the default port's listener.
        assert_eq!(
            catalog.xds_for("shop", "bare"),
            Some(EnvoyXds::ControlPlane {
                ca_config_map: "bare-xds-ca".to_owned(),
                listeners: vec![ListenerPort { name: "http".to_owned(), port: 8080 }],
            })
        );
        assert_eq!(catalog.xds_for("shop", "edge"), None);
    }

    /// A sidecar binds what the fleet's listeners bind: each port's targetPort, else its port.
    #[test]
    fn the_listeners_are_on_the_target_ports() {
        let text = "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge}\n\
spec: {configMapName: cfg, ports: [{name: http, port: 80, targetPort: 8080}, {name: admin-api, port: 9000}]}\n";
        let mut catalog = EnvoyCatalog::default();
        assert!(catalog.add_manifest("edge.yaml", text, "shop").is_empty());
        let Some(EnvoyXds::ControlPlane { ca_config_map, listeners }) = catalog.xds_for("shop", "edge")
        else {
            panic!("served by the control plane");
        };
        assert_eq!(ca_config_map, "edge-xds-ca");
        let ports: Vec<(&str, i32)> = listeners.iter().map(|l| (l.name.as_str(), l.port)).collect();
        assert_eq!(ports, [("http", 8080), ("admin-api", 9000)]);
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
