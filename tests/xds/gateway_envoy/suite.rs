//! The upstream conformance suite's fixtures, as the tests reproducing it use them: its three
//! infra backends, its `same-namespace` Gateway, and references as a real API server stores
//! them.

use serde_json::{Value, json};

use super::world::gateway;
use crate::support::backend::Backend;

/// The suite's Gateway most of its tests route through.
pub const GATEWAY: &str = "same-namespace";

/// The suite's three infra backends, started.
pub struct Backends([Backend; 3]);

impl Backends {
    pub async fn start() -> Self {
        Backends([
            Backend::start("infra-backend-v1").await,
            Backend::start("infra-backend-v2").await,
            Backend::start("infra-backend-v3").await,
        ])
    }

    /// Their Services: (name, backend).
    pub fn services(&self) -> Vec<(&str, &Backend)> {
        self.0.iter().map(|backend| (backend.name.as_str(), backend)).collect()
    }
}

/// [`GATEWAY`] with one HTTP listener on `port` taking routes of its namespace.
pub fn same_namespace_gateway(port: u16) -> (String, Value) {
    gateway(
        GATEWAY,
        json!([{"name": "http", "port": port, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "Same"}}}]),
    )
}

/// A parentRef to Gateway `name` as a real API server stores it: the HTTPRoute CRD's schema
/// defaults `group` and `kind` (the in-memory API server applies no defaults), and the route's
/// status copies them, as the suite requires.
pub fn defaulted_parent_ref(name: &str) -> Value {
    json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name})
}

/// A backendRef to Service `name` (our Services listen on 80, the suite's on 8080).
pub fn backend_ref(name: &str) -> Value {
    json!({"name": name, "port": 80})
}
