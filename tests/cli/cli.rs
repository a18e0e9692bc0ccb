//! Command-line conventions users bring from kubectl: `-f a,b`, `-R`, `-o json`, `--kubeconfig`
//! and `--context`, `version`, `completion`, confirmation before destroying data.

use std::process::Output;

use crate::envoy_operator;

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn files_are_comma_separated_and_directories_read_recursively() {
    let output = envoy_operator(&["check", "-f", "examples/foo.yaml,examples/envoy.yaml"], None);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("kind: Foo") && text.contains("kind: Envoy"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("team/shop")).unwrap();
    std::fs::copy("examples/foo.yaml", dir.path().join("team/shop/foo.yaml")).unwrap();
    let path = dir.path().to_str().unwrap();
    let flat = envoy_operator(&["check", "-f", path], None);
    assert!(!flat.status.success(), "without -R the directory holds no manifest");
    assert!(stderr(&flat).contains("no documents"), "{}", stderr(&flat));
    let recursive = envoy_operator(&["check", "-R", "-f", path], None);
    assert!(recursive.status.success(), "{}", stderr(&recursive));
    assert!(String::from_utf8_lossy(&recursive.stdout).contains("name: example-foo"));
}

#[test]
fn json_output_is_a_list_like_kubectls() {
    for command in ["check", "render", "inject"] {
        let output = envoy_operator(&[command, "-f", "examples/foo.yaml", "-o", "json"], None);
        assert!(output.status.success(), "{command}: {}", stderr(&output));
        let list: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
        assert_eq!(
            (list["apiVersion"].as_str(), list["kind"].as_str()),
            (Some("v1"), Some("List")),
            "{command}"
        );
        assert!(!list["items"].as_array().expect("items").is_empty(), "{command}");
    }
    let crds = envoy_operator(&["crds", "-o", "json"], None);
    let list: serde_json::Value = serde_json::from_slice(&crds.stdout).expect("JSON");
    assert_eq!(list["items"][0]["kind"], "CustomResourceDefinition");
}

#[test]
fn version_and_completion() {
    let version = envoy_operator(&["version"], None);
    assert!(version.status.success());
    let text = String::from_utf8_lossy(&version.stdout);
    assert!(text.starts_with(&format!("envoy-operator {}", env!("CARGO_PKG_VERSION"))), "{text}");
    assert!(text.contains("example.com/v1 Envoy"), "{text}");
    for shell in ["bash", "zsh", "fish"] {
        let completion = envoy_operator(&["completion", shell], None);
        assert!(completion.status.success(), "{shell}");
        assert!(String::from_utf8_lossy(&completion.stdout).contains("render"), "{shell} completes commands");
    }
}

#[test]
fn namespace_flags_mean_one_thing() {
    // -n is the namespace of objects (as in kubectl), never the operator's or the watched one.
    let run = envoy_operator(&["run", "-n", "shop", "--help"], None);
    assert!(!run.status.success(), "run has no -n");
    let controller = envoy_operator(&["controller", "--namespace", "shop", "--help"], None);
    assert!(!controller.status.success(), "the watched namespace is --watch-namespace");
    let inject = envoy_operator(
        &["inject", "-n", "shop", "-f", "examples/deployment.yaml", "--envoys", "examples/envoy.yaml"],
        None,
    );
    assert!(inject.status.success(), "{}", stderr(&inject));
    let help = String::from_utf8_lossy(&envoy_operator(&["run", "--help"], None).stdout).into_owned();
    assert!(help.contains("--operator-namespace") && help.contains("leader Lease"), "{help}");
    assert!(help.contains("--kubeconfig") && help.contains("--context"), "{help}");
}

#[test]
fn deleting_the_crds_needs_a_yes() {
    let output = envoy_operator(&["uninstall", "--delete-crds"], Some(""));
    assert!(!output.status.success());
    assert!(stderr(&output).contains("confirm with --yes"), "{}", stderr(&output));
}

#[test]
fn connection_errors_name_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: gone\nclusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:{port}'}}\n\
             contexts:\n- name: gone\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user: {{token: t}}\n"
        ),
    )
    .unwrap();
    let output =
        envoy_operator(&["install", "--kubeconfig", kubeconfig.to_str().unwrap(), "--timeout", "1"], None);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains(&format!("https://127.0.0.1:{port}/ (context gone)")),
        "{}",
        stderr(&output)
    );
}

#[test]
fn local_webhook_configurations_refuse_what_cannot_work() {
    let output =
        envoy_operator(&["webhook-config", "--mode", "local", "--url", "http://127.0.0.1:8443"], None);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("HTTPS only"), "{}", stderr(&output));
    let certs =
        envoy_operator(&["certs", "--out", "/nonexistent-never-written", "--name", "bad name!"], None);
    assert_eq!(certs.status.code(), Some(2), "a usage error");
    assert!(stderr(&certs).contains("neither an IP address nor a DNS name"), "{}", stderr(&certs));
}

/// client-go treats an empty `KUBERNETES_SERVICE_HOST` as "not in a cluster": so does `run`,
/// which then serves the webhooks alone (development mode) instead of failing to load an
/// in-cluster configuration.
#[test]
fn run_with_an_empty_kubernetes_service_host_is_not_in_a_cluster() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_envoy-operator"))
        .args(["run", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .env("KUBECONFIG", dir.path().join("no-such-kubeconfig"))
        .env("HOME", dir.path())
        .env("KUBERNETES_SERVICE_HOST", "")
        .env("KUBERNETES_SERVICE_PORT", "443")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let log = BufReader::new(child.stderr.take().expect("stderr is piped"));
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in log.lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let verdict = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match received.recv_timeout(left) {
            Ok(line) if line.contains("no cluster configured") => break Ok(()),
            Ok(line) => seen.push(line),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break Err("run exited"),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => break Err("no answer within 30 s"),
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    if let Err(what) = verdict {
        panic!("{what} without saying it runs without a cluster; its log:\n{}", seen.join("\n"));
    }
}
