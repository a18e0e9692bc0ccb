//! The `certs` and `webhook-config` commands, run as the binary.

use std::process::Command;

fn envoy_operator() -> Command {
    Command::new(env!("CARGO_BIN_EXE_envoy-operator"))
}

#[test]
fn certs_writes_a_private_key_and_refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("certs");
    let run = |extra: &[&str]| {
        envoy_operator()
            .arg("certs")
            .arg("--out")
            .arg(&out)
            .args(["--operator-namespace", "ops"])
            .args(extra)
            .output()
            .unwrap()
    };
    let first = run(&[]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert!(String::from_utf8_lossy(&first.stderr).contains("envoy-operator-webhook.ops.svc.cluster.local"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(out.join("tls.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let cert = std::fs::read(out.join("tls.crt")).unwrap();

    let again = run(&[]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists; pass --force"));
    assert_eq!(std::fs::read(out.join("tls.crt")).unwrap(), cert, "nothing was overwritten");

    assert!(run(&["--force"]).status.success());
    assert_ne!(std::fs::read(out.join("tls.crt")).unwrap(), cert);
}

#[test]
fn certs_names_extra_hosts_for_a_webhook_outside_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let output = envoy_operator()
        .arg("certs")
        .arg("--out")
        .arg(dir.path())
        .args(["--name", "172.18.0.1", "--name", "host.minikube.internal"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("127.0.0.1, envoy-operator-webhook.envoy-operator.svc"), "{stderr}");
    assert!(stderr.contains(".svc.cluster.local, 172.18.0.1, host.minikube.internal"), "{stderr}");
}

#[test]
fn webhook_config_local_mode_embeds_the_ca_and_urls() {
    let dir = tempfile::tempdir().unwrap();
    assert!(envoy_operator().arg("certs").arg("--out").arg(dir.path()).output().unwrap().status.success());
    let output = envoy_operator()
        .args(["webhook-config", "--mode", "local", "--url", "https://127.0.0.1:9443"])
        .arg("--ca-file")
        .arg(dir.path().join("ca.crt"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let yaml = String::from_utf8(output.stdout).unwrap();
    assert!(yaml.contains("url: https://127.0.0.1:9443/mutate"));
    assert!(yaml.contains("url: https://127.0.0.1:9443/validate"));
    assert!(yaml.contains("url: https://127.0.0.1:9443/inject\n"));
    assert!(yaml.contains("url: https://127.0.0.1:9443/inject_annotation\n"));
    assert_eq!(yaml.matches("caBundle:").count(), 9);
    assert!(!yaml.contains("service:"));
}

#[test]
fn webhook_config_cluster_mode_prints_what_is_committed() {
    let output = envoy_operator().arg("webhook-config").output().unwrap();
    assert!(output.status.success());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("webhook-config");
    let committed = [
        std::fs::read_to_string(root.join("mutating-webhook-configuration.yaml")).unwrap(),
        std::fs::read_to_string(root.join("validating-webhook-configuration.yaml")).unwrap(),
    ]
    .join("---\n");
    assert_eq!(String::from_utf8(output.stdout).unwrap(), committed);
}
