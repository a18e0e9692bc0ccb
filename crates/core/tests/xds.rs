//! The xDS translation end to end: fixture objects (an Envoy, EnvoyRoutes, Services,
//! EndpointSlices) in, Envoy resources and route statuses out, compared with golden files
//! byte for byte; the same output whatever the order of the inputs; and every translation,
//! as a static bootstrap, accepted by a real Envoy (`envoy --mode validate`).
//!
//! After a deliberate change to the translation, regenerate the golden files and review the
//! diff (see `tests/testdata/xds/README.md`):
//!
//! ```sh
//! UPDATE_GOLDEN=1 cargo test -p envoy-operator-core --test xds
//! ```

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use common::{TempDir, TempFile, static_resources, tool};

use envoy_operator_core::api::{Envoy, EnvoyRoute};
use envoy_operator_core::bootstrap::ControlPlane;
use envoy_operator_core::bootstrap::identity_sds_file;
use envoy_operator_core::children::envoy::{BOOTSTRAP_KEY, CONFIG_DIR, ControlPlaneTrust, desired_children};
use envoy_operator_core::identity;
use envoy_operator_core::manifest::parse_documents;
use envoy_operator_core::rules::{Defaulted, defaulted};
use envoy_operator_core::translate::envoyroute::{Inputs, Translation, translate};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Each case: its name (the directory under `tests/testdata/xds/`) and its input files,
/// relative to the workspace root.
const CASES: [(&str, &[&str]); 3] = [
    (
        "example",
        &[
            "examples/envoy.yaml",
            "examples/envoyroute.yaml",
            "crates/core/tests/testdata/xds/example/cluster.yaml",
        ],
    ),
    ("every-feature", &["crates/core/tests/testdata/xds/every-feature/input.yaml"]),
    ("quiet", &["crates/core/tests/testdata/xds/quiet/input.yaml"]),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/xds").join(case)
}

/// The objects of one case, as a translation reads them.
struct Fixture {
    envoy: Defaulted<Envoy>,
    routes: Vec<Arc<EnvoyRoute>>,
    services: Vec<Arc<Service>>,
    endpoint_slices: Vec<Arc<EndpointSlice>>,
}

impl Fixture {
    fn load(files: &[&str]) -> Self {
        let mut objects = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(workspace_root().join(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            for document in parse_documents(&text) {
                let mut object = document.content.unwrap_or_else(|e| panic!("{file}: {e}"));
                // As `kubectl apply` puts objects without a namespace.
                if object["metadata"]["namespace"].is_null() {
                    object["metadata"]["namespace"] = json!("default");
                }
                objects.push(object);
            }
        }
        let mut envoys: Vec<Envoy> = of_kind(&objects, "Envoy");
        assert_eq!(envoys.len(), 1, "one Envoy per case");
        Self {
            envoy: defaulted(envoys.remove(0)),
            routes: shared(of_kind(&objects, "EnvoyRoute")),
            services: shared(of_kind(&objects, "Service")),
            endpoint_slices: shared(of_kind(&objects, "EndpointSlice")),
        }
    }

    fn translate(&self) -> Translation {
        translate(&Inputs {
            envoy: &self.envoy,
            routes: &self.routes,
            services: &self.services,
            endpoint_slices: &self.endpoint_slices,
            rejected: envoy_operator_core::fleet::isolate::Rejections::none(),
        })
    }
}

/// Objects as the operator's caches hold them.
fn shared<K>(objects: Vec<K>) -> Vec<Arc<K>> {
    objects.into_iter().map(Arc::new).collect()
}

/// The objects of one kind, typed.
fn of_kind<K: DeserializeOwned>(objects: &[Value], kind: &str) -> Vec<K> {
    objects
        .iter()
        .filter(|object| object["kind"] == kind)
        .map(|object| serde_json::from_value(object.clone()).unwrap_or_else(|e| panic!("{e}: {object}")))
        .collect()
}

/// The golden form of a translation: the resources, then the route statuses.
fn golden_text(translation: &Translation) -> String {
    let mut value = serde_json::to_value(&translation.resources).expect("resources serialize");
    value["route_statuses"] = serde_json::to_value(&translation.route_statuses).expect("statuses serialize");
    format!("{}\n", serde_json::to_string_pretty(&value).expect("JSON"))
}

#[test]
fn translations_match_the_golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (case, files) in CASES {
        let actual = golden_text(&Fixture::load(files).translate());
        let path = golden_dir(case).join("expected.json");
        if update {
            std::fs::write(&path, &actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            continue;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        if expected != actual {
            stale.push(format!("{case}: {} differs from the translation:\n{actual}", path.display()));
        }
    }
    assert!(
        stale.is_empty(),
        "{}\nIf the change is deliberate: UPDATE_GOLDEN=1 cargo test -p envoy-operator-core --test xds, and review the diff",
        stale.join("\n")
    );
}

#[test]
fn the_order_of_the_inputs_does_not_matter() {
    for (case, files) in CASES {
        let fixture = Fixture::load(files);
        let mut reversed = Fixture::load(files);
        reversed.routes.reverse();
        reversed.services.reverse();
        reversed.endpoint_slices.reverse();
        assert_eq!(golden_text(&fixture.translate()), golden_text(&reversed.translate()), "{case}");
    }
}

/// What the golden files say, checked by meaning rather than by bytes: the semantics the
/// translation promises, so a regenerated golden file cannot silently lose them.
#[test]
fn the_every_feature_case_means_what_it_should() {
    let translation = Fixture::load(CASES[1].1).translate();
    let resources = serde_json::to_value(&translation.resources).unwrap();
    let clusters: Vec<&str> =
        resources["clusters"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(clusters, ["shop/api/9090", "shop/static/80", "shop/web/80"], "used, resolved backends only");
    let endpoints = |cluster: &str| -> Vec<String> {
        let assignment = resources["cluster_load_assignments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["cluster_name"] == cluster)
            .unwrap();
        assignment["endpoints"][0]["lb_endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{}:{}",
                    e["endpoint"]["address"]["socket_address"]["address"].as_str().unwrap(),
                    e["endpoint"]["address"]["socket_address"]["port_value"]
                )
            })
            .collect()
    };
    assert_eq!(
        endpoints("shop/web/80"),
        ["10.0.1.1:8080", "10.0.1.2:8080", "10.0.2.1:8080"],
        "ready, once, not the blog's"
    );
    assert_eq!(endpoints("shop/static/80"), ["10.0.3.1:8081"]);
    assert_eq!(endpoints("shop/api/9090"), ["fd00:10::7:9090"]);

    let http = &resources["route_configurations"][0];
    assert_eq!(http["name"], "http");
    let hosts: Vec<&str> =
        http["virtual_hosts"].as_array().unwrap().iter().map(|h| h["domains"][0].as_str().unwrap()).collect();
    assert_eq!(hosts, ["shop.example.com", "*.shop.example.com", "*"]);
    let shop_routes: Vec<&str> = http["virtual_hosts"][0]["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        shop_routes,
        [
            "shop/storefront/rule/0/match/0",
            "shop/storefront/rule/2/match/0",
            "shop/storefront/rule/1/match/0",
            "shop/storefront/rule/3/match/0",
            "shop/redirects/rule/1/match/0",
            "shop/redirects/rule/0/match/0",
        ],
        "the shop's own rules first, then the redirects every host gets"
    );
    let internal = &resources["route_configurations"][1];
    let internal_hosts: Vec<&str> = internal["virtual_hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["domains"][0].as_str().unwrap())
        .collect();
    assert_eq!(
        internal_hosts,
        ["shop.example.com", "*.example.com", "*.shop.example.com"],
        "no redirects there"
    );

    let statuses: Vec<String> = translation
        .route_statuses
        .iter()
        .map(|s| {
            format!(
                "{} {}: Accepted={} {}, ResolvedRefs={} {}",
                s.route,
                s.parent_ref.section_name.as_deref().unwrap_or("*"),
                s.accepted.status,
                s.accepted.reason,
                s.resolved_refs.status,
                s.resolved_refs.reason
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            "api grpc: Accepted=false NoMatchingParent, ResolvedRefs=false InvalidKind",
            "api internal: Accepted=true Accepted, ResolvedRefs=false InvalidKind",
            "broken *: Accepted=false UnsupportedValue, ResolvedRefs=true ResolvedRefs",
            "redirects http: Accepted=true Accepted, ResolvedRefs=true ResolvedRefs",
            "storefront *: Accepted=true Accepted, ResolvedRefs=false BackendNotFound",
        ]
    );
}

/// A bootstrap serving `translation` statically, with the admin interface on a free port.
fn static_bootstrap(translation: &Translation) -> Value {
    json!({
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "static_resources": static_resources(&translation.resources),
    })
}

#[test]
fn envoy_accepts_every_translation() {
    let Some(envoy) = tool("ENVOY_BIN", "envoy") else { return };
    for (case, files) in CASES {
        let bootstrap = static_bootstrap(&Fixture::load(files).translate());
        let file = TempFile::with(&format!("{case}.json"), &bootstrap.to_string());
        let output = Command::new(&envoy)
            .args(["--mode", "validate", "--log-level", "warn", "-c"])
            .arg(&file.0)
            .output()
            .expect("envoy runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && stdout.contains("OK"),
            "{case}: envoy --mode validate refused the translation:\n{stdout}\n{stderr}\n{bootstrap:#}"
        );
    }
}

/// The validation above is not a rubber stamp: a resource Envoy cannot load is refused.
#[test]
fn envoy_refuses_a_broken_translation() {
    let Some(envoy) = tool("ENVOY_BIN", "envoy") else { return };
    let mut bootstrap = static_bootstrap(&Fixture::load(CASES[1].1).translate());
    let route = &mut bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        ["route_config"]["virtual_hosts"][0]["routes"][0];
    route["match"] = json!({"safe_regex": {"regex": "(unclosed"}});
    let file = TempFile::with("broken.json", &bootstrap.to_string());
    let output =
        Command::new(&envoy).args(["--mode", "validate", "-c"]).arg(&file.0).output().expect("envoy runs");
    assert!(!output.status.success(), "envoy accepted an invalid regex");
}

/// Envoy refuses a regular expression whose RE2 program is larger than 100 unless its runtime
/// key `re2.max_program_size.error_level` says otherwise, which nothing before Envoy can check
/// exactly (the webhook compiles regexes with Rust's `regex`). The fleet's bootstrap raises the
/// limit, as Envoy Gateway's does, or one such route would make Envoy refuse its listener's
/// whole route configuration: proven with the bootstrap the operator writes into the fleet's
/// ConfigMap, its files where the pod mounts them, serving the translation statically.
#[test]
fn large_regexes_need_the_fleets_runtime_to_allow_them() {
    let Some(envoy) = tool("ENVOY_BIN", "envoy") else { return };
    let mut fixture = Fixture::load(CASES[0].1);
    let alternatives: Vec<String> = (0..40).map(|i| format!("segment{i}")).collect();
    let regex = format!("^/({})/[a-z0-9]{{1,64}}$", alternatives.join("|"));
    Arc::make_mut(&mut fixture.routes[0]).spec.rules[0].matches[0].path =
        Some(serde_json::from_value(json!({"type": "RegularExpression", "value": regex})).unwrap());
    // A prefix rewrite needs a PathPrefix match: the rule keeps its path as it is.
    Arc::make_mut(&mut fixture.routes[0]).spec.rules[0].filters.clear();
    let translation = fixture.translate();
    assert!(
        translation.route_statuses.iter().all(|s| s.accepted.status),
        "the rule engine accepts the regex: {:?}",
        translation.route_statuses
    );
    let validate = |bootstrap: &Value, name: &str| {
        let file = TempFile::with(name, &bootstrap.to_string());
        Command::new(&envoy)
            .args(["--mode", "validate", "--service-node", "edge-0", "--service-cluster", "edge", "-c"])
            .arg(&file.0)
            .output()
            .expect("envoy runs")
    };
    let refused = validate(&static_bootstrap(&translation), "large-regex.json");
    assert!(!refused.status.success(), "Envoy's default limit refuses it");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("max program size"));

    // The example's fleet names a user's xDS server; on the operator's, it gets the runtime.
    let mut own = fixture.envoy.clone().into_inner();
    own.spec.xds = None;
    let (_mount, bootstrap) = fleet_bootstrap_serving(&defaulted(own), &translation);
    let accepted = validate(&bootstrap, "large-regex-allowed.json");
    assert!(accepted.status.success(), "{}", String::from_utf8_lossy(&accepted.stderr));
}

/// The bootstrap of `envoy`'s fleet on the operator's control plane, as its ConfigMap holds it,
/// with `translation` added to its static resources; and the directory standing for the
/// ConfigMap's mount, where the bootstrap finds the CA's SDS file (keep it while Envoy runs).
fn fleet_bootstrap_serving(envoy: &Defaulted<Envoy>, translation: &Translation) -> (TempDir, Value) {
    let trust = ControlPlaneTrust {
        control_plane: ControlPlane { host: "envoy-operator-xds.ops.svc".to_owned(), port: 18000 },
        // Validation checks that the CA file exists, not what its certificate is.
        ca_pem: Some("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n".to_owned()),
    };
    let children = desired_children(envoy, Some(&trust));
    let data = children.config_map.data.expect("the ConfigMap's files");
    let mount = TempDir::new("fleet");
    for (file, text) in &data {
        std::fs::write(mount.0.join(file), text).expect("a mounted file");
    }
    // The identity Secret's mount, beside the ConfigMap's (validation needs the file, not a
    // certificate that works).
    let identity_dir = mount.0.join("identity");
    std::fs::create_dir(&identity_dir).expect("the identity mount");
    std::fs::write(identity_dir.join(identity::SDS_KEY), identity_sds_file("CERT", "KEY"))
        .expect("the identity file");
    let text = data[BOOTSTRAP_KEY]
        .replace(identity::MOUNT_DIR, &identity_dir.display().to_string())
        .replace(CONFIG_DIR, &mount.0.display().to_string());
    let mut bootstrap: Value = serde_saphyr::from_str(&text).expect("the bootstrap is YAML");
    let served = serde_json::to_value(static_resources(&translation.resources)).expect("resources serialize");
    for kind in ["listeners", "clusters"] {
        let list = bootstrap["static_resources"][kind].as_array_mut().expect("a list");
        list.extend(served[kind].as_array().into_iter().flatten().cloned());
    }
    (mount, bootstrap)
}
