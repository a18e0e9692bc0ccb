//! Golden translations: objects in (`<case>.in.yaml`), the translation's IR and statuses out
//! (`<case>.out.yaml`), compared byte for byte, through both front doors of the route
//! translation: `testdata/golden/envoyroute/` (Envoys and EnvoyRoutes, `xds::translate`),
//! `testdata/golden/gateway/` (Gateway API, `gateway::translate`, every case read after
//! `gateway/_base.yaml`) and `testdata/golden/mesh/` (HTTPRoutes on Services, the mesh's part of
//! `gateway::translate`, every case read after `mesh/_base.yaml`). Every IR must pass `Fleet::validate`, and the output must not depend
//! on the order of the input documents. See `testdata/golden/README.md`.
//!
//! After a deliberate change to the translation, regenerate and review the diff:
//!
//! ```sh
//! UPDATE_GOLDEN=1 cargo test -p envoy-operator-core --test golden
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use envoy_operator_core::api::{Envoy, EnvoyRoute};
use envoy_operator_core::fleet::isolate::{Rejection, Rejections, RouteId};
use envoy_operator_core::ir::Fleet;
use envoy_operator_core::manifest::parse_documents;
use envoy_operator_core::rules::defaulted;
use envoy_operator_core::translate::envoyroute::{self as xds, Inputs, RouteStatus};
use envoy_operator_core::translate::gateway::{self, GatewayInputs};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const REGENERATE: &str = "UPDATE_GOLDEN=1 cargo test -p envoy-operator-core --test golden";

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/golden")
}

/// The input documents of a file, each an object; namespaced objects without a namespace in
/// `default`, as `kubectl apply` puts them.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_documents(&text)
        .into_iter()
        .filter_map(|document| {
            let object = document.content.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (!object.is_null()).then_some(object)
        })
        .map(|mut object| {
            let cluster_scoped =
                ["Namespace", "GatewayClass"].contains(&object["kind"].as_str().unwrap_or_default());
            if !cluster_scoped && object["metadata"]["namespace"].is_null() {
                object["metadata"]["namespace"] = json!("default");
            }
            object
        })
        .collect()
}

/// The objects as `kubectl apply` leaves them: the last of the same kind, namespace and name
/// replaces the others (a case's object replaces the base's).
fn applied(objects: impl Iterator<Item = Value>) -> Vec<Value> {
    let mut kept: Vec<Value> = Vec::new();
    for object in objects {
        let key = |o: &Value| {
            (o["kind"].clone(), o["metadata"]["namespace"].clone(), o["metadata"]["name"].clone())
        };
        kept.retain(|known| key(known) != key(&object));
        kept.push(object);
    }
    kept
}

/// The objects of one kind, typed, each shared as the operator's caches hold them.
fn of_kind<K: DeserializeOwned>(objects: &[Value], kind: &str) -> Vec<Arc<K>> {
    objects
        .iter()
        .filter(|object| object["kind"] == kind)
        .map(|object| {
            Arc::new(serde_json::from_value(object.clone()).unwrap_or_else(|e| panic!("{e}: {object}")))
        })
        .collect()
}

/// What the fleets' proxies refused: documents of the harness's own kind `Rejection`
/// (`apiVersion: golden.test/v1`), naming the route by `routeKind` and its metadata.
fn rejections(objects: &[Value]) -> Rejections {
    let mut rejections = Rejections::default();
    for object in objects.iter().filter(|o| o["kind"] == "Rejection") {
        let kind = match object["routeKind"].as_str() {
            Some("HTTPRoute") => "HTTPRoute",
            Some("EnvoyRoute") => "EnvoyRoute",
            Some("GRPCRoute") => "GRPCRoute",
            other => panic!("a Rejection's routeKind is HTTPRoute, GRPCRoute or EnvoyRoute, not {other:?}"),
        };
        let metadata: ObjectMeta = serde_json::from_value(object["metadata"].clone()).expect("metadata");
        let id = RouteId::of(kind, &metadata).expect("a Rejection names the route's name and uid");
        let generation = object["generation"].as_i64().expect("a Rejection's generation");
        let message = object["message"].as_str().expect("a Rejection's message").to_owned();
        rejections.insert(id, Rejection { generation, message });
    }
    rejections
}

fn check_kinds(objects: &[Value], known: &[&str]) {
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        assert!(known.contains(&kind), "kind {kind:?} is not read by this door (known: {known:?})");
    }
}

/// One Envoy's translation, as its golden file prints it.
#[derive(Serialize)]
struct EnvoyOutcome<'a> {
    envoy: String,
    ir: &'a Fleet,
    route_statuses: &'a [RouteStatus],
}

/// The EnvoyRoute door: one entry per Envoy, sorted, each translated with the objects of its
/// namespace; and the IRs.
fn envoyroute(objects: &[Value]) -> (String, Vec<(String, Fleet)>) {
    check_kinds(objects, &["Envoy", "EnvoyRoute", "Service", "EndpointSlice", "Rejection"]);
    let rejected = rejections(objects);
    let mut envoys: Vec<Arc<Envoy>> = of_kind(objects, "Envoy");
    envoys.sort_by_key(|envoy| (envoy.metadata.namespace.clone(), envoy.metadata.name.clone()));
    let mut translations = Vec::new();
    for envoy in envoys {
        let namespace = envoy.metadata.namespace.clone().unwrap_or_default();
        let here: Vec<Value> =
            objects.iter().filter(|o| o["metadata"]["namespace"] == namespace).cloned().collect();
        let key = format!("{namespace}/{}", envoy.metadata.name.as_deref().unwrap_or_default());
        let envoy = defaulted(Envoy::clone(&envoy));
        let translation = xds::translate(&Inputs {
            envoy: &envoy,
            routes: &of_kind::<EnvoyRoute>(&here, "EnvoyRoute"),
            services: &of_kind(&here, "Service"),
            endpoint_slices: &of_kind(&here, "EndpointSlice"),
            rejected: &rejected,
        });
        translations.push((key, translation));
    }
    let outcomes: Vec<EnvoyOutcome> = translations
        .iter()
        .map(|(key, t)| EnvoyOutcome { envoy: key.clone(), ir: &t.ir, route_statuses: &t.route_statuses })
        .collect();
    let text = serde_saphyr::to_string(&outcomes).expect("the outcomes print");
    (text, translations.into_iter().map(|(key, t)| (key, t.ir)).collect())
}

/// The Gateway API door: the whole translation; and the IRs. Every Envoy of the input is both
/// a possible fleet and a possible class parameter, as `render --xds` passes them.
fn gateway(objects: &[Value]) -> (String, Vec<(String, Fleet)>) {
    let kinds = [
        "GatewayClass",
        "Gateway",
        "HTTPRoute",
        "GRPCRoute",
        "TLSRoute",
        "ReferenceGrant",
        "Namespace",
        "Service",
    ];
    check_kinds(objects, &[&kinds[..], &["EndpointSlice", "Secret", "Envoy", "Rejection"]].concat());
    let tls: Vec<Value> = objects.iter().filter(|o| o["type"] == "kubernetes.io/tls").cloned().collect();
    let envoys = of_kind(objects, "Envoy");
    let translation = gateway::translate(&GatewayInputs {
        classes: &of_kind(objects, "GatewayClass"),
        gateways: &of_kind(objects, "Gateway"),
        routes: &of_kind(objects, "HTTPRoute"),
        grpc_routes: &of_kind(objects, "GRPCRoute"),
        tls_routes: &of_kind(objects, "TLSRoute"),
        grants: &of_kind(objects, "ReferenceGrant"),
        namespaces: &of_kind(objects, "Namespace"),
        services: &of_kind(objects, "Service"),
        endpoint_slices: &of_kind(objects, "EndpointSlice"),
        secrets: &of_kind(&tls, "Secret"),
        fleets: &envoys,
        parameters: &envoys,
        rejected: &rejections(objects),
        mesh_pods: &[],
    });
    let text = serde_saphyr::to_string(&translation).expect("the translation prints");
    let gateways = translation.gateways.into_iter().map(|g| (format!("{}/{}", g.namespace, g.name), g.ir));
    let meshes = translation.meshes.into_iter().map(|m| (format!("{} (mesh)", m.namespace), m.ir));
    let irs = gateways.chain(meshes).collect();
    (text, irs)
}

/// The mesh door: the same whole translation as [`gateway`]'s, of which only the mesh's part
/// is printed (the HTTPRoutes naming a Service, with every parent's outcome, and each meshed
/// namespace's sidecar IR); and those IRs.
fn mesh(objects: &[Value]) -> (String, Vec<(String, Fleet)>) {
    let kinds = ["HTTPRoute", "ReferenceGrant", "Namespace", "Service", "EndpointSlice", "Pod"];
    check_kinds(objects, &[&kinds[..], &["Rejection"]].concat());
    let translation = gateway::translate(&GatewayInputs {
        routes: &of_kind(objects, "HTTPRoute"),
        grants: &of_kind(objects, "ReferenceGrant"),
        namespaces: &of_kind(objects, "Namespace"),
        services: &of_kind(objects, "Service"),
        endpoint_slices: &of_kind(objects, "EndpointSlice"),
        rejected: &rejections(objects),
        // Every Pod of a case has a mesh sidecar (the index watches only those).
        mesh_pods: &of_kind(objects, "Pod"),
        ..GatewayInputs::default()
    });
    #[derive(Serialize)]
    struct MeshPart<'a> {
        routes: &'a [gateway::RouteOutcome],
        meshes: &'a [envoy_operator_core::translate::mesh::MeshOutcome],
    }
    let text =
        serde_saphyr::to_string(&MeshPart { routes: &translation.routes, meshes: &translation.meshes })
            .expect("the translation prints");
    let irs = translation.meshes.into_iter().map(|m| (format!("{} (mesh)", m.namespace), m.ir)).collect();
    (text, irs)
}

/// A short line diff of `expected` to `actual` (longest common subsequence), at most 40 lines.
fn diff(expected: &str, actual: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut common = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            common[i][j] =
                if a[i] == b[j] { common[i + 1][j + 1] + 1 } else { common[i + 1][j].max(common[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut lines) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            (i, j) = (i + 1, j + 1);
        } else if i < a.len() && (j == b.len() || common[i + 1][j] >= common[i][j + 1]) {
            lines.push(format!("  {:>4} - {}", i + 1, a[i]));
            i += 1;
        } else {
            lines.push(format!("  {:>4} + {}", j + 1, b[j]));
            j += 1;
        }
    }
    let more = lines.len().saturating_sub(40);
    lines.truncate(40);
    if more > 0 {
        lines.push(format!("  ... and {more} more lines"));
    }
    lines.join("\n")
}

#[test]
fn translations_match_the_golden_files() {
    type Door = fn(&[Value]) -> (String, Vec<(String, Fleet)>);
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let base = documents(&golden_dir().join("gateway/_base.yaml"));
    let mesh_base = documents(&golden_dir().join("mesh/_base.yaml"));
    let doors: [(&str, Door, &[Value]); 3] =
        [("envoyroute", envoyroute, &[]), ("gateway", gateway, &base), ("mesh", mesh, &mesh_base)];
    let mut failures = Vec::new();
    let mut count = 0;
    for (door, translate, base) in doors {
        let dir = golden_dir().join(door);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("the door's directory")
            .map(|e| e.expect("an entry").path())
            .collect();
        files.sort();
        for file in &files {
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if let Some(case) = name.strip_suffix(".out.yaml")
                && !dir.join(format!("{case}.in.yaml")).exists()
            {
                failures.push(format!("{door}/{case}: stale, {name} has no {case}.in.yaml: delete it"));
            }
            let Some(case) = name.strip_suffix(".in.yaml") else { continue };
            count += 1;
            let objects = applied(base.iter().cloned().chain(documents(file)));
            let (actual, irs) = translate(&objects);
            for (fleet, ir) in &irs {
                if let Err(problems) = ir.validate() {
                    failures.push(format!("{door}/{case}: the IR of {fleet} is invalid: {problems:?}"));
                }
            }
            let reversed: Vec<Value> = objects.iter().rev().cloned().collect();
            if translate(&reversed).0 != actual {
                failures
                    .push(format!("{door}/{case}: the output depends on the order of the input documents"));
            }
            let out = dir.join(format!("{case}.out.yaml"));
            if update {
                std::fs::write(&out, &actual).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
                continue;
            }
            match std::fs::read_to_string(&out) {
                Ok(expected) if expected == actual => {}
                Ok(expected) => failures.push(format!(
                    "{door}/{case}: the translation differs from {case}.out.yaml (- golden, + now):\n{}",
                    diff(&expected, &actual)
                )),
                Err(_) => failures.push(format!("{door}/{case}: no {case}.out.yaml")),
            }
        }
    }
    assert!(count > 0, "no cases found under {}", golden_dir().display());
    assert!(
        failures.is_empty(),
        "{}\n\nIf the change is deliberate, regenerate and review the diff:\n  {REGENERATE}",
        failures.join("\n\n")
    );
}
