//! The examples compose: `kubectl apply -f examples/` puts them in one namespace, where every
//! Envoy is served by the operator's control plane, every EnvoyRoute is accepted by the Envoys
//! it names and resolves the Services it sends to, and every sidecar names one of those Envoys
//! on ports its pod leaves free. (The seeds' own manifests, which name an xDS server of their
//! own, are `tests/fixtures/seeds/`.)

use std::path::Path;

use crate::envoy_operator;
use envoy_operator_core::manifest::parse_documents;
use envoy_operator_core::names::FLEET_LABEL;
use serde_json::Value;

const ENVOY_ANNOTATION: &str = "sidecar.example.com/envoy";

/// Every example through the injector, the sidecars served by the operator's control plane.
const INJECT_EXAMPLES: [&str; 9] = [
    "inject",
    "-f",
    "examples/",
    "--envoys",
    "examples/envoy.yaml",
    "--xds-advertise",
    "envoy-operator-xds.envoy-operator.svc:18000",
    "-o",
    "json",
];

/// Every object of `examples/*.yaml`, with the file it is in.
fn examples() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for path in files {
        let name = path.file_name().expect("a file name").to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).expect("readable");
        for document in parse_documents(&text) {
            let object = document.content.unwrap_or_else(|e| panic!("{name}: {e}"));
            if !object.is_null() {
                objects.push((name.clone(), object));
            }
        }
    }
    assert!(!objects.is_empty(), "the examples are read");
    objects
}

fn of_kind<'a>(objects: &'a [(String, Value)], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|(_, o)| o["kind"] == kind).map(|(_, o)| o).collect()
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().expect("a name")
}

/// The pod templates (and bare Pods) of the examples: `(file, pod metadata, pod spec)`.
fn pods(objects: &[(String, Value)]) -> Vec<(&str, &Value, &Value)> {
    objects
        .iter()
        .filter_map(|(file, object)| match object["kind"].as_str() {
            Some("Pod") => Some((file.as_str(), &object["metadata"], &object["spec"])),
            Some("Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job") => {
                let template = &object["spec"]["template"];
                Some((file.as_str(), &template["metadata"], &template["spec"]))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn every_example_goes_to_the_namespace_it_is_applied_to() {
    for (file, object) in examples() {
        assert!(
            object["metadata"].get("namespace").is_none(),
            "{file}: {} {} names a namespace: `kubectl apply -f examples/` would split the examples",
            object["kind"].as_str().unwrap_or_default(),
            name(&object)
        );
    }
}

#[test]
fn every_envoy_example_is_served_by_the_operator() {
    let objects = examples();
    let envoys = of_kind(&objects, "Envoy");
    assert!(envoys.len() >= 2, "examples/envoy.yaml and examples/envoy-full.yaml");
    for envoy in envoys {
        assert!(
            envoy["spec"].get("xds").is_none(),
            "Envoy {} names an xDS server the examples do not run: without spec.xds the operator serves it",
            name(envoy)
        );
    }
}

/// Names, as the translation checks them: every parentRef an example Envoy (and one of its
/// listeners), every backendRef an example Service port. The `render --xds` test below checks
/// the same through the operator's own translation; this one says which name is wrong.
#[test]
fn every_route_example_names_example_envoys_and_services() {
    let objects = examples();
    let envoys = of_kind(&objects, "Envoy");
    let services = of_kind(&objects, "Service");
    let routes = of_kind(&objects, "EnvoyRoute");
    assert!(!routes.is_empty());
    for route in routes {
        let route_name = name(route);
        for parent in route["spec"]["parentRefs"].as_array().expect("parentRefs") {
            let envoy = envoys
                .iter()
                .find(|e| e["metadata"]["name"] == parent["name"])
                .unwrap_or_else(|| panic!("EnvoyRoute {route_name}: no example Envoy {}", parent["name"]));
            if let Some(listener) = parent.get("sectionName") {
                let ports = envoy["spec"]["ports"].as_array().expect("the Envoy's ports");
                assert!(
                    ports.iter().any(|p| &p["name"] == listener),
                    "EnvoyRoute {route_name}: Envoy {} has no listener {listener}",
                    name(envoy)
                );
            }
        }
        let backends = route["spec"]["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .flat_map(|rule| rule["backendRefs"].as_array().cloned().unwrap_or_default().into_iter());
        for backend in backends {
            let service = services
                .iter()
                .find(|s| s["metadata"]["name"] == backend["name"])
                .unwrap_or_else(|| panic!("EnvoyRoute {route_name}: no example Service {}", backend["name"]));
            let ports = service["spec"]["ports"].as_array().expect("the Service's ports");
            assert!(
                ports.iter().any(|p| p["port"] == backend["port"]),
                "EnvoyRoute {route_name}: Service {} has no port {}",
                name(service),
                backend["port"]
            );
        }
    }
}

/// What the operator's control plane would serve the examples: every route accepted by every
/// Envoy it names, its backends resolved.
#[test]
fn the_control_plane_serves_every_route_example_to_every_envoy_it_names() {
    let output = envoy_operator(&["render", "--xds", "-o", "json", "-f", "examples/"], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "render --xds -f examples/ failed: {stderr}");
    assert!(!stderr.contains("not rendered"), "{stderr}");
    let fleets: Value = serde_json::from_slice(&output.stdout).expect("a JSON array");
    let fleets = fleets.as_array().expect("one document per fleet");
    let objects = examples();
    assert_eq!(fleets.len(), of_kind(&objects, "Envoy").len(), "every Envoy example is a fleet");
    let mut served = Vec::new();
    for fleet in fleets {
        for status in fleet["route_statuses"].as_array().expect("route statuses") {
            let (route, parent) = (&status["route"], &status["parentRef"]["name"]);
            for condition in ["accepted", "resolvedRefs"] {
                assert_eq!(
                    status[condition]["status"], true,
                    "EnvoyRoute {route} on Envoy {parent}: {condition} {}",
                    status[condition]
                );
            }
            served.push((route.clone(), parent.clone()));
        }
    }
    for route in of_kind(&objects, "EnvoyRoute") {
        for parent in route["spec"]["parentRefs"].as_array().expect("parentRefs") {
            let pair = (route["metadata"]["name"].clone(), parent["name"].clone());
            assert!(served.contains(&pair), "EnvoyRoute {} is not served to {}", pair.0, pair.1);
        }
    }
}

/// A sidecar naming an Envoy binds that Envoy's listener ports in its pod: the examples'
/// pods leave them free, opt in (the namespace `kubectl apply -f examples/` goes to is not
/// labelled for injection), and name nothing the examples do not run.
#[test]
fn every_sidecar_example_names_an_example_envoy_on_ports_its_pod_leaves_free() {
    let objects = examples();
    let envoys = of_kind(&objects, "Envoy");
    let pods = pods(&objects);
    let mut sidecars = 0;
    for (file, metadata, spec) in &pods {
        assert!(
            metadata["annotations"].get("sidecar.example.com/xds").is_none(),
            "{file}: names an xDS server the examples do not run"
        );
        let Some(named) = metadata["annotations"].get(ENVOY_ANNOTATION) else { continue };
        sidecars += 1;
        assert_eq!(metadata["labels"]["sidecar.example.com/inject"], "true", "{file}: opts in");
        let envoy = envoys
            .iter()
            .find(|e| &e["metadata"]["name"] == named)
            .unwrap_or_else(|| panic!("{file}: names Envoy {named}, which no example is"));
        let container_ports: Vec<&Value> = spec["containers"]
            .as_array()
            .expect("containers")
            .iter()
            .flat_map(|c| c["ports"].as_array().into_iter().flatten())
            .map(|p| &p["containerPort"])
            .collect();
        for port in envoy["spec"]["ports"].as_array().expect("the Envoy's ports") {
            let listener = port.get("targetPort").unwrap_or(&port["port"]);
            assert!(
                !container_ports.contains(&listener),
                "{file}: the sidecar would bind {listener} (Envoy {named}'s listener {}), which the app uses",
                port["name"]
            );
        }
    }
    assert!(sidecars >= 2, "examples/pod.yaml and examples/deployment.yaml name an Envoy");

    // The injector agrees: every example is injected, served by the operator's control plane.
    let output = envoy_operator(&INJECT_EXAMPLES, None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "inject -f examples/ failed: {stderr}");
    let injected: Value = serde_json::from_slice(&output.stdout).expect("a v1 List");
    let fleet_members = injected["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|o| {
            let metadata =
                if o["kind"] == "Pod" { &o["metadata"] } else { &o["spec"]["template"]["metadata"] };
            metadata["labels"][FLEET_LABEL] == "edge-envoy"
        })
        .count();
    assert_eq!(fleet_members, sidecars, "each sidecar is served edge-envoy's configuration: {stderr}");
}

/// Images the cluster can pull: none of a private registry.
#[test]
fn every_example_image_is_public() {
    let objects = examples();
    for (file, _, spec) in pods(&objects) {
        for container in spec["containers"].as_array().expect("containers") {
            let image = container["image"].as_str().expect("an image");
            assert!(
                ["registry.k8s.io/", "envoyproxy/envoy:", "nginx:"].iter().any(|p| image.starts_with(p)),
                "{file}: {image} is not an image every cluster can pull"
            );
        }
    }
    for envoy in of_kind(&objects, "Envoy") {
        if let Some(image) = envoy["spec"]["image"].as_str() {
            assert!(image.starts_with("envoyproxy/envoy:"), "Envoy {}: {image}", name(envoy));
        }
    }
}

/// The e2e story that applies the examples on a real cluster
/// (`admission::the_examples_apply_together_and_the_route_is_accepted_by_both_envoys`) applies
/// every one of them.
#[test]
fn the_e2e_story_applies_every_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let story = std::fs::read_to_string(root.join("tests/e2e/admission.rs")).expect("tests/e2e/admission.rs");
    let mut files: Vec<String> = std::fs::read_dir(root.join("examples"))
        .expect("examples/")
        .map(|entry| entry.expect("a directory entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml"))
        .collect();
    files.sort();
    for file in files {
        assert!(
            story.contains(&format!("include_str!(\"../../examples/{file}\")")),
            "the e2e story does not apply examples/{file}"
        );
    }
}

/// Every `--image=` a command of the README, the docs or the examples' comments runs names a
/// tag or a digest: an untagged image is whatever `latest` is the day it is pulled.
#[test]
fn every_image_the_docs_run_is_pinned() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for dir in ["docs", "examples"] {
        let entries = std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("{dir}/: {e}"));
        files.extend(
            entries
                .map(|entry| entry.expect("a directory entry").path())
                .filter(|path| path.extension().is_some_and(|e| e == "md" || e == "yaml")),
        );
    }
    let mut images = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        for image in text.split("--image=").skip(1).filter_map(|rest| rest.split_whitespace().next()) {
            images += 1;
            let last_segment = image.rsplit('/').next().unwrap_or(image);
            assert!(
                last_segment.contains(':') || image.contains('@'),
                "{}: --image={image} names no tag",
                path.display()
            );
        }
    }
    assert!(images >= 3, "the README's curl and agnhost, the route example's curl");
}

/// `kubectl apply -f examples/` fits a laptop cluster (kind or minikube with 2 CPUs, whose own
/// control plane and the operator's replicas ask for about 1.2 of them): the CPU the examples'
/// pods request, as the operator makes them (the fleets of the Envoys and the Deployments of the
/// Foos as `render` makes them, the workloads with their sidecars as `inject` makes them, and a
/// Gateway's fleet of one proxy of the defaults), stays within 600m.
#[test]
fn the_examples_ask_for_little_enough_cpu_for_a_laptop_cluster() {
    const BUDGET_MILLICPU: f64 = 600.0;
    let requested = |pod_spec: &Value| -> f64 {
        let containers = ["containers", "initContainers"]
            .iter()
            .flat_map(|list| pod_spec[*list].as_array().cloned().unwrap_or_default());
        containers
            .filter_map(|c| c["resources"]["requests"]["cpu"].as_str().map(str::to_owned))
            .map(|cpu| envoy_operator_core::rules::quantity::parse(&cpu).expect("a CPU quantity") * 1000.0)
            .sum()
    };
    // Pods get a sidecar where they opt in with the label: `kubectl apply` puts the examples in
    // a namespace that is not labelled for injection.
    let opted_in = |object: &Value| {
        let labels = if object["kind"] == "Pod" {
            &object["metadata"]["labels"]
        } else {
            &object["spec"]["template"]["metadata"]["labels"]
        };
        labels["sidecar.example.com/inject"] == "true"
    };
    let workloads = |args: &[&str]| -> Vec<(String, f64)> {
        let output = envoy_operator(args, None);
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        let listed: Value = serde_json::from_slice(&output.stdout).expect("a v1 List");
        let items = listed["items"].as_array().cloned().unwrap_or_default();
        let injecting = args[0] == "inject";
        let originals = examples();
        items
            .iter()
            .map(|object| match injecting && !opted_in(object) {
                // Not opted in: the workload as written.
                true => originals
                    .iter()
                    .map(|(_, original)| original)
                    .find(|original| original["kind"] == object["kind"] && name(original) == name(object))
                    .unwrap_or(object),
                false => object,
            })
            .filter_map(|object| {
                let (replicas, pod) = match object["kind"].as_str() {
                    Some("Deployment") => (
                        object["spec"]["replicas"].as_f64().unwrap_or(1.0),
                        &object["spec"]["template"]["spec"],
                    ),
                    Some("Pod") => (1.0, &object["spec"]),
                    _ => return None,
                };
                Some((format!("{} {}", object["kind"], name(object)), replicas * requested(pod)))
            })
            .collect()
    };
    let mut asks = workloads(&["render", "-f", "examples/", "-o", "json"]);
    asks.extend(workloads(&INJECT_EXAMPLES));
    let gateway_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gateway-api");
    let gateways = std::fs::read_dir(gateway_dir)
        .expect("examples/gateway-api/")
        .map(|entry| std::fs::read_to_string(entry.expect("an entry").path()).expect("readable"))
        .flat_map(|text| {
            parse_documents(&text).into_iter().filter_map(|d| d.content.ok()).collect::<Vec<_>>()
        })
        .filter(|object| object["kind"] == "Gateway")
        .count();
    let default_proxy =
        envoy_operator_core::rules::quantity::parse(envoy_operator_core::names::DEFAULT_PROXY_CPU_REQUEST)
            .expect("a CPU quantity")
            * 1000.0;
    asks.extend((0..gateways).map(|_| ("a Gateway's fleet".to_owned(), default_proxy)));
    assert!(asks.len() >= 8, "the examples' workloads are all counted: {asks:?}");
    let total: f64 = asks.iter().map(|(_, cpu)| cpu).sum();
    assert!(
        total <= BUDGET_MILLICPU,
        "the examples ask for {total}m CPU (budget {BUDGET_MILLICPU}m): {asks:?}"
    );
}

/// README's conformance command for the Gateway profiles passes the suite exactly the features
/// every GatewayClass's status says the operator supports (GEP-2162), so the suite runs the
/// same tests whether it is given the list or infers it.
#[test]
fn the_readme_claims_the_features_the_gateway_classes_say() {
    use envoy_operator_core::translate::gateway::features::SUPPORTED_FEATURES;

    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).expect("README");
    let command = readme
        .split("```sh\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .find(|block| block.contains("--conformance-profiles=GATEWAY-HTTP"))
        .expect("README shows the conformance command for GATEWAY-HTTP");
    let list = command
        .split("--supported-features=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the command passes --supported-features=");
    let mut claimed: Vec<&str> = list.split(',').collect();
    claimed.sort_unstable();
    assert_eq!(claimed, SUPPORTED_FEATURES, "README's --supported-features= and the classes' status differ");
}
