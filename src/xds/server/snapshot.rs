//! An immutable, consistent set of resources for one fleet: every type's resources by name,
//! each encoded once, and a version derived from the content.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::fmt;
use std::sync::Arc;

use envoy_types::pb::envoy::config::listener::v3::Listener;
use sha2::{Digest, Sha256};

use super::resource::{Reference, Resource, XdsResource, short_hex, type_url};

/// Why a set of resources is not a usable snapshot.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("a resource of type {type_url} has an empty name")]
    EmptyName { type_url: String },

    #[error("two resources of type {type_url} are named {name:?}")]
    Duplicate { type_url: String, name: String },

    /// Envoy would wait for the missing resource (and keep the referring one warming) until
    /// its initial fetch timeout.
    #[error("{type_url} {name:?} refers to {reference_type} {reference:?}, which the snapshot lacks")]
    MissingReference { type_url: String, name: String, reference_type: String, reference: String },
}

/// The resources of one type, by name.
#[derive(Debug, Default)]
pub struct TypeResources {
    resources: BTreeMap<Arc<str>, Arc<Resource>>,
}

impl TypeResources {
    pub fn get(&self, name: &str) -> Option<&Arc<Resource>> {
        self.resources.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Resource>> {
        self.resources.values()
    }

    pub fn len(&self) -> usize {
        self.resources.len()
    }

    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
    }
}

/// A snapshot's content as people read it (keys redacted), for the operator's debugging
/// endpoints: the server itself never reads it. Made on demand, from whatever the snapshot was
/// built from, so a snapshot nobody asks about costs no JSON.
pub trait Describe: Send + Sync + fmt::Debug {
    fn describe(&self) -> serde_json::Value;
}

/// Every resource a fleet's proxies get, by type URL.
#[derive(Debug)]
pub struct Snapshot {
    version: Arc<str>,
    types: BTreeMap<String, TypeResources>,
    description: Option<Arc<dyn Describe>>,
}

static NO_RESOURCES: TypeResources = TypeResources { resources: BTreeMap::new() };

impl Snapshot {
    pub fn builder() -> SnapshotBuilder {
        SnapshotBuilder::default()
    }

    /// Hash of every resource's type, name and version: equal content, equal version.
    pub fn version(&self) -> &str {
        &self.version
    }

    pub(crate) fn shared_version(&self) -> &Arc<str> {
        &self.version
    }

    /// The resources of a type (none for a type the snapshot does not have).
    pub fn resources(&self, type_url: &str) -> &TypeResources {
        self.types.get(type_url).unwrap_or(&NO_RESOURCES)
    }

    pub fn type_urls(&self) -> impl Iterator<Item = &str> {
        self.types.keys().map(String::as_str)
    }

    /// What it holds as people read it, if its builder was given a description.
    pub fn describe(&self) -> Option<serde_json::Value> {
        self.description.as_ref().map(|description| description.describe())
    }

    /// This snapshot, with every resource whose content equals the same resource in `previous`
    /// replaced by the previous one, so its version (and its encoding) stays put. Without this a
    /// rebuilt resource with a multi-entry map could get a new version on every rebuild and be
    /// pushed to every proxy for nothing.
    pub(crate) fn stabilized(mut self, previous: &Snapshot) -> Snapshot {
        let mut replaced = false;
        for (type_url, resources) in &mut self.types {
            let Some(before) = previous.types.get(type_url) else { continue };
            for (name, resource) in &mut resources.resources {
                if let Some(old) = before.resources.get(name)
                    && old.version() != resource.version()
                    && old.same_as(resource)
                {
                    *resource = old.clone();
                    replaced = true;
                }
            }
        }
        if replaced {
            self.version = snapshot_version(&self.types).into();
        }
        self
    }
}

/// Collects resources, then checks and seals them into a [`Snapshot`].
#[derive(Debug, Default)]
pub struct SnapshotBuilder {
    resources: Vec<Resource>,
    description: Option<Arc<dyn Describe>>,
}

impl SnapshotBuilder {
    /// What the snapshot holds as people read it ([`Describe`]).
    pub fn describe(&mut self, description: Arc<dyn Describe>) -> &mut Self {
        self.description = Some(description);
        self
    }

    /// Adds a typed resource (encoded here, once).
    pub fn add<T: XdsResource>(&mut self, message: &T) -> &mut Self {
        self.resources.push(Resource::new(message));
        self
    }

    /// Adds a listener and the route configurations it makes Envoy request over ADS (see
    /// [`Resource::listener`]).
    pub fn add_listener(
        &mut self,
        listener: &Listener,
        route_configurations: impl IntoIterator<Item = String>,
    ) -> &mut Self {
        self.resources.push(Resource::listener(listener, route_configurations));
        self
    }

    /// Adds a listener and everything it makes Envoy request over ADS: its route
    /// configurations and the secrets its filter chains present (see
    /// [`Resource::listener_referencing`]).
    pub fn add_listener_referencing(
        &mut self,
        listener: &Listener,
        references: impl IntoIterator<Item = Reference>,
    ) -> &mut Self {
        self.resources.push(Resource::listener_referencing(listener, references));
        self
    }

    /// Checks names and references (go-control-plane's consistency rule: every route
    /// configuration and secret a listener uses and every endpoint set an EDS cluster uses, over
    /// ADS, must be present) and computes the version.
    pub fn build(self) -> Result<Snapshot, SnapshotError> {
        let mut types: BTreeMap<String, TypeResources> = BTreeMap::new();
        for resource in self.resources {
            let type_url = resource.type_url().to_string();
            if resource.name().is_empty() {
                return Err(SnapshotError::EmptyName { type_url });
            }
            let entries = &mut types.entry(type_url.clone()).or_default().resources;
            match entries.entry(resource.shared_name().clone()) {
                Entry::Occupied(_) => {
                    return Err(SnapshotError::Duplicate { type_url, name: resource.name().into() });
                }
                Entry::Vacant(slot) => {
                    slot.insert(Arc::new(resource));
                }
            }
        }
        check_references(&types)?;
        let version = snapshot_version(&types).into();
        Ok(Snapshot { version, types, description: self.description })
    }
}

fn check_references(types: &BTreeMap<String, TypeResources>) -> Result<(), SnapshotError> {
    for type_url in [type_url::LISTENER, type_url::CLUSTER] {
        let Some(resources) = types.get(type_url) else { continue };
        for resource in resources.iter() {
            for reference in resource.references() {
                let present = types.get(reference.type_url).is_some_and(|t| t.get(&reference.name).is_some());
                if !present {
                    return Err(SnapshotError::MissingReference {
                        type_url: type_url.into(),
                        name: resource.name().into(),
                        reference_type: reference.type_url.into(),
                        reference: reference.name.clone(),
                    });
                }
            }
        }
    }
    Ok(())
}

fn snapshot_version(types: &BTreeMap<String, TypeResources>) -> String {
    let mut hasher = Sha256::new();
    for (type_url, resources) in types {
        for resource in resources.iter() {
            for part in [type_url.as_str(), resource.name(), resource.version()] {
                hasher.update(part.as_bytes());
                hasher.update([0]);
            }
        }
    }
    short_hex(&hasher.finalize())
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::cluster::v3::cluster::{
        ClusterDiscoveryType, DiscoveryType, EdsClusterConfig,
    };
    use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
    use envoy_types::pb::envoy::config::core::v3::{AggregatedConfigSource, ConfigSource};
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;

    use super::*;

    fn eds_cluster(name: &str) -> Cluster {
        Cluster {
            name: name.into(),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
            eds_cluster_config: Some(EdsClusterConfig {
                eds_config: Some(ConfigSource {
                    config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
                    ..Default::default()
                }),
                service_name: String::new(),
            }),
            ..Default::default()
        }
    }

    fn endpoints(name: &str) -> ClusterLoadAssignment {
        ClusterLoadAssignment { cluster_name: name.into(), ..Default::default() }
    }

    #[test]
    fn an_eds_cluster_without_its_endpoints_is_refused() {
        let mut builder = Snapshot::builder();
        builder.add(&eds_cluster("web"));
        let error = builder.build().unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "{} \"web\" refers to {} \"web\", which the snapshot lacks",
                type_url::CLUSTER,
                type_url::ENDPOINT
            )
        );
    }

    #[test]
    fn a_listener_without_its_route_configuration_is_refused() {
        let mut builder = Snapshot::builder();
        builder.add_listener(&Listener { name: "http".into(), ..Default::default() }, ["routes".to_owned()]);
        assert!(matches!(
            builder.build(),
            Err(SnapshotError::MissingReference { reference_type, reference, .. })
                if reference_type == type_url::ROUTE && reference == "routes"
        ));
    }

    #[test]
    fn duplicate_and_empty_names_are_refused() {
        let mut builder = Snapshot::builder();
        builder.add(&eds_cluster("web")).add(&eds_cluster("web")).add(&endpoints("web"));
        assert!(matches!(builder.build(), Err(SnapshotError::Duplicate { name, .. }) if name == "web"));
        let mut builder = Snapshot::builder();
        builder.add(&endpoints(""));
        assert!(matches!(builder.build(), Err(SnapshotError::EmptyName { .. })));
    }

    #[test]
    fn the_version_depends_on_content_only() {
        let build = |names: &[&str]| {
            let mut builder = Snapshot::builder();
            for name in names {
                builder.add(&eds_cluster(name)).add(&endpoints(name));
            }
            builder.build().unwrap()
        };
        let (a, b, c) = (build(&["x", "y"]), build(&["y", "x"]), build(&["x"]));
        assert_eq!(a.version(), b.version());
        assert_ne!(a.version(), c.version());
        assert_eq!(a.resources(type_url::CLUSTER).len(), 2);
        assert!(a.resources(type_url::LISTENER).is_empty());
    }
}
