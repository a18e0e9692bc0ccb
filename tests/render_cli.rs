//! `envoy-operator render` as a user runs it.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use envoy_operator_core::manifest::parse_documents;

fn render(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_envoy-operator"))
        .arg("render")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run envoy-operator");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    child.wait_with_output().expect("wait for envoy-operator")
}

#[test]
fn renders_the_children_of_the_seed_examples() {
    let output = render(&["-f", "examples/envoy.yaml", "-f", "examples/foo.yaml"], "");
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    let kinds: Vec<String> = parse_documents(&stdout)
        .into_iter()
        .map(|d| d.content.expect("YAML")["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(kinds, ["ConfigMap", "Deployment", "Service", "Deployment"]);
    assert!(stdout.contains("# Foo example-foo: the status the reconciler aims for"));
    assert!(stdout.contains("image: nginx:1.27.3"));
}

#[test]
fn renders_every_example_and_skips_other_kinds() {
    let output = render(&["-f", "examples/"], "");
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    let documents = parse_documents(&String::from_utf8_lossy(&output.stdout));
    assert!(documents.len() >= 4);
    assert!(documents.iter().all(|d| d.content.is_ok()));
}

#[test]
fn the_nginx_image_flag_reaches_the_deployment() {
    let output = render(&["-f", "examples/foo.yaml", "--nginx-image", "nginx:1.27.4"], "");
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("image: nginx:1.27.4"));
}

#[test]
fn an_invalid_foo_on_stdin_is_reported_and_fails() {
    let manifest = "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: bad\nspec:\n  replicas: 5000\n";
    let output = render(&["-f", "-"], manifest);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("The Foo \"bad\" is invalid: spec.replicas"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn lists_and_unserved_versions_fail_like_kubectl_would() {
    let list = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: samplecontroller.k8s.io/v1alpha1, kind: Foo, metadata: {name: big}, spec: {replicas: 5000}}\n";
    let output = render(&["-f", "-"], list);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("items[0]: The Foo \"big\" is invalid: spec.replicas"), "{stderr}");

    let unserved = "apiVersion: samplecontroller.k8s.io/v1\nkind: Foo\nmetadata: {name: x}\nspec: {}\n";
    let output = render(&["-f", "-"], unserved);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("Foo is served as samplecontroller.k8s.io/v1alpha1")
    );
}

#[test]
fn fleets_without_an_xds_server_are_admin_only_unless_the_control_plane_is_asked_for() {
    let envoy =
        "apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: edge, namespace: shop}\nspec: {}\n";
    let plain = render(&["-f", "-"], envoy);
    assert!(plain.status.success(), "stderr: {}", String::from_utf8_lossy(&plain.stderr));
    let plain = String::from_utf8(plain.stdout).expect("UTF-8");
    assert!(!plain.contains("envoy_operator_xds"), "run serves no control plane yet:\n{plain}");

    let asked = render(&["-f", "-", "--xds-advertise", "xds.example.internal:18000"], envoy);
    assert!(asked.status.success(), "stderr: {}", String::from_utf8_lossy(&asked.stderr));
    let asked = String::from_utf8(asked.stdout).expect("UTF-8");
    assert!(asked.contains("envoy_operator_xds") && asked.contains("xds.example.internal"), "{asked}");
}
