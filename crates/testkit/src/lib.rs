//! Test support for envoy-operator's integration tests, the library's unit tests, the
//! examples and the benchmarks: one dev-dependency instead of modules included by path.
//!
//! - Kubernetes without a cluster: [`fake_api`] (an in-memory API server, [`api_path`]) and
//!   [`mock`] (the unit tests' request-by-request mock), checked against [`rbac`] (what
//!   `deploy/` allows, decided as the RBAC authorizer does).
//! - xDS and Envoy: [`xds`] (Envoy resources, fleets' node metadata, a control plane on a
//!   port), [`envoy`] (a real Envoy process), [`fleet`] (a bootstrap ConfigMap made runnable),
//!   [`fleet_world`] (the operator and one fleet against the in-memory API server),
//!   [`backend`] (HTTP backends), [`pod_host`] (a pod's network namespace), [`certs`],
//!   [`h2_frame`] (raw HTTP/2 frames).
//! - [`cli`] (the built binary run as a user does) and [`e2e`] (the end-to-end harness against
//!   a real cluster).
//!
//! It never depends on the `envoy-operator` package (as its dev-dependency that would build the
//! library twice): what needs the library's own types (its xDS server, its operator) is handed
//! in by the caller, as a closure or a [`e2e::Launcher`].

pub mod api_path;
pub mod backend;
pub mod certs;
pub mod cli;
pub mod e2e;
pub mod envoy;
pub mod fake_api;
pub mod fleet;
pub mod fleet_world;
pub mod gateway_api_schema;
pub mod h2_frame;
pub mod mock;
pub mod pod_host;
pub mod ports;
pub mod rbac;
pub mod schema;
pub mod service_ips;
mod timing;
pub mod xds;

use std::path::{Path, PathBuf};

pub use timing::{CONVERGE, Percentiles, eventually};

/// The repository's root (where `deploy/`, `crds/` and `examples/` are).
pub fn repository() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// An external program a test needs (`promtool`, `envoy`): from the environment variable
/// `env`, else `name` on `PATH`. Missing, the test fails under `.ci/run` (which installs them
/// and sets `ENVOY_OPERATOR_REQUIRE_TOOLS=1`) and is otherwise skipped with a note on stderr,
/// never silently.
pub fn tool(env: &str, name: &str) -> Option<std::path::PathBuf> {
    let found = std::env::var_os(env).map(std::path::PathBuf::from).or_else(|| {
        std::env::var_os("PATH")
            .and_then(|path| std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file()))
    });
    if found.is_none() {
        let required = std::env::var_os("ENVOY_OPERATOR_REQUIRE_TOOLS").is_some_and(|v| v == "1");
        assert!(!required, "{name} is not installed (set {env} or put it on PATH); .ci/run installs it");
        eprintln!("SKIPPED: {name} is not installed (set {env} or put it on PATH); .ci/run installs it");
    }
    found
}
