//! Resources as the server keeps them: encoded once into an `Any`, named, versioned by content,
//! and annotated with the other resources Envoy will request because of them (a cluster's
//! endpoints, read from the cluster; a listener's route configurations and certificates, given
//! by whoever built the listener, since the encoded listener hides them in `Any`s), which the
//! snapshot's consistency check and the push ordering rely on.

use std::fmt;
use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType};
use envoy_types::pb::envoy::config::core::v3::ConfigSource;
use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use sha2::{Digest, Sha256};

/// Type URLs of the resource types Envoy requests over ADS, by their short names here (the
/// strings are the core's, [`envoy_operator_core::envoy::type_urls`]).
pub mod type_url {
    use envoy_operator_core::envoy::type_urls;

    pub const LISTENER: &str = type_urls::LISTENER;
    pub const ROUTE: &str = type_urls::ROUTE_CONFIGURATION;
    pub const SCOPED_ROUTE: &str = type_urls::SCOPED_ROUTE_CONFIGURATION;
    pub const VIRTUAL_HOST: &str = type_urls::VIRTUAL_HOST;
    pub const CLUSTER: &str = type_urls::CLUSTER;
    pub const ENDPOINT: &str = type_urls::CLUSTER_LOAD_ASSIGNMENT;
    pub const SECRET: &str = type_urls::SECRET;
}

/// Where a type sits in the make-before-break order. Upstream resources (secrets, clusters,
/// endpoints, and types this server knows nothing about) are what downstream resources
/// (listeners and routes) point at, so they are added first and removed last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    Upstream,
    Downstream,
}

/// Push order of a type within the whole sequence: CDS before EDS, LDS before RDS.
pub(crate) fn push_rank(type_url: &str) -> u8 {
    match type_url {
        type_url::SECRET => 0,
        type_url::CLUSTER => 1,
        type_url::ENDPOINT => 2,
        type_url::LISTENER => 4,
        type_url::SCOPED_ROUTE => 5,
        type_url::ROUTE => 6,
        type_url::VIRTUAL_HOST => 7,
        _ => 3,
    }
}

pub(crate) fn stage(type_url: &str) -> Stage {
    if push_rank(type_url) >= push_rank(type_url::LISTENER) { Stage::Downstream } else { Stage::Upstream }
}

/// A resource another resource makes Envoy request: the endpoints of an EDS cluster, the
/// route configuration of a listener's HTTP connection manager, the certificate (secret) a
/// listener's filter chain presents (all only when delivered over ADS; other config sources are
/// not this server's business).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reference {
    pub type_url: &'static str,
    pub name: String,
}

/// A typed Envoy resource the snapshot builder accepts, whose references can be read from its
/// own fields. (A listener is not one: see [`Resource::listener`].)
pub trait XdsResource: Message + Name + PartialEq + Default + Sized {
    /// The name Envoy knows the resource by (for endpoints, the cluster name).
    fn resource_name(&self) -> &str;

    /// Resources Envoy will request over ADS because of this one.
    fn references(&self) -> Vec<Reference> {
        Vec::new()
    }
}

fn is_ads(source: Option<&ConfigSource>) -> bool {
    matches!(
        source.and_then(|source| source.config_source_specifier.as_ref()),
        Some(ConfigSourceSpecifier::Ads(_))
    )
}

impl XdsResource for Cluster {
    fn resource_name(&self) -> &str {
        &self.name
    }

    fn references(&self) -> Vec<Reference> {
        let is_eds = matches!(self.cluster_discovery_type, Some(ClusterDiscoveryType::Type(kind)) if kind == DiscoveryType::Eds as i32);
        let Some(eds) = self.eds_cluster_config.as_ref().filter(|_| is_eds) else { return Vec::new() };
        if !is_ads(eds.eds_config.as_ref()) {
            return Vec::new();
        }
        // Envoy's rule: the service name if set, else the cluster's own name.
        let name = if eds.service_name.is_empty() { self.name.clone() } else { eds.service_name.clone() };
        vec![Reference { type_url: type_url::ENDPOINT, name }]
    }
}

impl XdsResource for ClusterLoadAssignment {
    fn resource_name(&self) -> &str {
        &self.cluster_name
    }
}

impl XdsResource for RouteConfiguration {
    fn resource_name(&self) -> &str {
        &self.name
    }
}

impl XdsResource for Secret {
    fn resource_name(&self) -> &str {
        &self.name
    }
}

/// Compares two encodings of the same message type by content. prost encodes protobuf map
/// fields (`HashMap`s: metadata, `typed_per_filter_config`, ...) in the map's iteration order,
/// so equal messages can encode to different bytes; this tells them apart from real changes.
pub(crate) type SameContent = fn(&[u8], &[u8]) -> bool;

fn same_content<T: Message + Default + PartialEq>(a: &[u8], b: &[u8]) -> bool {
    // Equal messages encode to the same length whatever their map order.
    a.len() == b.len() && matches!((T::decode(a), T::decode(b)), (Ok(left), Ok(right)) if left == right)
}

/// One resource, encoded once and shared by every stream that sends it.
pub struct Resource {
    name: Arc<str>,
    version: Arc<str>,
    body: Any,
    references: Box<[Reference]>,
    same_content: SameContent,
}

impl Resource {
    /// Encodes a typed resource.
    pub fn new<T: XdsResource>(message: &T) -> Self {
        let body = Any { type_url: T::type_url(), value: message.encode_to_vec() };
        Self::from_parts(
            message.resource_name(),
            body,
            message.references().into_boxed_slice(),
            same_content::<T>,
        )
    }

    /// Encodes a listener that makes Envoy request `route_configurations` over ADS (its HTTP
    /// connection managers' RDS names). They are given, not read back: the encoded listener
    /// holds them in an `Any`, and whoever built the listener knows them from its model
    /// ([`envoy_operator_core::envoy::Listener::ads_route_configurations`]).
    pub fn listener(listener: &Listener, route_configurations: impl IntoIterator<Item = String>) -> Self {
        let references =
            route_configurations.into_iter().map(|name| Reference { type_url: type_url::ROUTE, name });
        Self::listener_referencing(listener, references)
    }

    /// Encodes a listener that makes Envoy request `references` over ADS: its route
    /// configurations and, for a listener terminating TLS, the secrets its filter chains present
    /// ([`envoy_operator_core::envoy::Listener::ads_secrets`]). As for [`Resource::listener`],
    /// they are given by whoever built the listener.
    pub fn listener_referencing(
        listener: &Listener,
        references: impl IntoIterator<Item = Reference>,
    ) -> Self {
        let references = references.into_iter().collect();
        let body = Any { type_url: Listener::type_url(), value: listener.encode_to_vec() };
        Self::from_parts(&listener.name, body, references, same_content::<Listener>)
    }

    fn from_parts(name: &str, body: Any, references: Box<[Reference]>, same_content: SameContent) -> Self {
        let version = content_version(&body).into();
        Self { name: name.into(), version, body, references, same_content }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    /// Hash of the encoded content: equal content has the same version, also across restarts
    /// as long as the message has no map with several entries (prost encodes maps in their
    /// iteration order). Within a process, the cache keeps a resource's version when only
    /// that order changed.
    pub fn version(&self) -> &str {
        &self.version
    }

    pub(crate) fn shared_version(&self) -> &Arc<str> {
        &self.version
    }

    pub fn type_url(&self) -> &str {
        &self.body.type_url
    }

    pub fn body(&self) -> &Any {
        &self.body
    }

    pub fn references(&self) -> &[Reference] {
        &self.references
    }

    /// Whether `other` is the same resource with the same content, whatever its encoding.
    pub(crate) fn same_as(&self, other: &Resource) -> bool {
        if self.version == other.version {
            return true;
        }
        self.name == other.name
            && self.body.type_url == other.body.type_url
            && (self.same_content)(&self.body.value, &other.body.value)
    }
}

impl fmt::Debug for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resource")
            .field("type_url", &self.body.type_url)
            .field("name", &self.name)
            .field("version", &self.version)
            .field("bytes", &self.body.value.len())
            .finish()
    }
}

fn content_version(body: &Any) -> String {
    let mut hasher = Sha256::new();
    hasher.update(body.type_url.as_bytes());
    hasher.update([0]);
    hasher.update(&body.value);
    short_hex(&hasher.finalize())
}

/// The first 8 bytes of a digest in hex: 64 bits tell versions apart well enough.
pub(crate) fn short_hex(digest: &[u8]) -> String {
    digest.iter().take(8).map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use envoy_types::pb::envoy::config::cluster::v3::cluster::EdsClusterConfig;
    use envoy_types::pb::envoy::config::core::v3::{AggregatedConfigSource, Metadata};
    use envoy_types::pb::google::protobuf::Struct;

    use super::*;

    fn ads() -> Option<ConfigSource> {
        Some(ConfigSource {
            config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
            ..Default::default()
        })
    }

    fn eds_cluster(name: &str, service_name: &str) -> Cluster {
        Cluster {
            name: name.into(),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
            eds_cluster_config: Some(EdsClusterConfig {
                eds_config: ads(),
                service_name: service_name.into(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn an_eds_cluster_references_its_service_name_or_its_own_name() {
        let named = |cluster: &Cluster| cluster.references().into_iter().map(|r| r.name).collect::<Vec<_>>();
        assert_eq!(named(&eds_cluster("web", "")), ["web"]);
        assert_eq!(named(&eds_cluster("web", "web-endpoints")), ["web-endpoints"]);
        let static_cluster = Cluster { name: "static".into(), ..Default::default() };
        assert!(static_cluster.references().is_empty());
    }

    #[test]
    fn the_version_follows_the_content() {
        let a = Resource::new(&eds_cluster("web", ""));
        let b = Resource::new(&eds_cluster("web", ""));
        let c = Resource::new(&eds_cluster("web", "other"));
        assert_eq!(a.version(), b.version());
        assert_ne!(a.version(), c.version());
        assert_eq!(a.version().len(), 16);
    }

    #[test]
    fn equal_content_in_another_map_order_is_the_same_resource() {
        // Many entries make a different iteration order of two HashMaps near certain.
        let metadata = || Metadata {
            filter_metadata: (0..32)
                .map(|i| (format!("key-{i}"), Struct::default()))
                .collect::<HashMap<_, _>>(),
            ..Default::default()
        };
        let cluster =
            |metadata| Cluster { name: "web".into(), metadata: Some(metadata), ..Default::default() };
        let (first, second) = (Resource::new(&cluster(metadata())), Resource::new(&cluster(metadata())));
        assert!(first.same_as(&second));
        let mut changed = metadata();
        changed.filter_metadata.insert("key-0".into(), Struct { fields: Default::default() });
        changed.filter_metadata.insert("extra".into(), Struct::default());
        assert!(!first.same_as(&Resource::new(&cluster(changed))));
    }
}
