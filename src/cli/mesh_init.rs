//! `envoy-operator mesh-init`: installs a mesh sidecar's outbound capture in the network
//! namespace it runs in (the pod's: the injector adds it as the pod's first init container).
//! The rules are [`envoy_operator_core::capture::rules`], piped to `iptables-restore --noflush`
//! (and, with `--capture-ipv6`, `ip6tables-restore --noflush`); it needs root with `NET_ADMIN` and `NET_RAW`, which that
//! init container has, and nothing else does.

use std::io::Write;
use std::process::{Command, ExitCode, Stdio};

use envoy_operator_core::capture::{self, Capture, Family};
use envoy_operator_core::proxy::{MESH_OUTBOUND_PORT, PROXY_UID};

#[derive(clap::Args, Clone, Debug)]
pub struct MeshInitArgs {
    /// The proxy's uid, whose connections are never redirected.
    #[arg(long, value_name = "UID", default_value_t = PROXY_UID as u32)]
    pub proxy_uid: u32,

    /// The sidecar's outbound listener, where outbound TCP is redirected.
    #[arg(long, value_name = "PORT", default_value_t = MESH_OUTBOUND_PORT)]
    pub outbound_port: u16,

    /// Destination ports left alone (comma-separated).
    #[arg(long, value_name = "PORTS", default_value = "")]
    pub exclude_outbound_ports: String,

    /// Destination networks left alone (comma-separated CIDRs, IPv4 and IPv6).
    #[arg(long, value_name = "CIDRS", default_value = "")]
    pub exclude_outbound_cidrs: String,

    /// Capture IPv6 too. Off by default: the outbound listener the control plane serves binds
    /// IPv4 only (it cannot know whether a pod has IPv6, and a listener on `::` fails where it
    /// has none), so an IPv6 connection redirected to `[::1]:15001` would be refused; left
    /// alone, it goes where it was headed.
    #[arg(long)]
    pub capture_ipv6: bool,

    /// Print the rules instead of installing them (as for a namespace without any).
    #[arg(long)]
    pub dry_run: bool,
}

impl MeshInitArgs {
    /// The capture these flags describe, checked.
    pub fn capture(&self) -> Result<Capture, String> {
        Ok(Capture {
            proxy_uid: self.proxy_uid,
            outbound_port: self.outbound_port,
            exclude_ports: capture::parse_ports(&self.exclude_outbound_ports)
                .map_err(|reason| format!("--exclude-outbound-ports: {reason}"))?,
            exclude_cidrs: capture::parse_cidrs(&self.exclude_outbound_cidrs)
                .map_err(|reason| format!("--exclude-outbound-cidrs: {reason}"))?,
        })
    }
}

/// `envoy-operator mesh-init`.
pub fn run(args: &MeshInitArgs) -> ExitCode {
    let capture = match args.capture() {
        Ok(capture) => capture,
        Err(message) => return super::usage_error(&message),
    };
    let families = if args.capture_ipv6 { &Family::ALL[..] } else { &[Family::V4][..] };
    for &family in families {
        if args.dry_run {
            print!("# {}\n{}", family.restore_program(), capture::rules(&capture, family, false));
            continue;
        }
        if family == Family::V6 && !ipv6_enabled() {
            eprintln!("mesh-init: IPv6 is disabled in this network namespace: IPv4 only");
            continue;
        }
        match install(&capture, family) {
            Ok(again) => {
                let how = if again { "renewed (installed before)" } else { "installed" };
                eprintln!(
                    "mesh-init: {family} outbound TCP capture {how}: to port {}, except uid {}, loopback, {} ports and {} networks left alone",
                    capture.outbound_port,
                    capture.proxy_uid,
                    capture.exclude_ports.len(),
                    capture
                        .exclude_cidrs
                        .iter()
                        .filter(|cidr| cidr.address.is_ipv4() == (family == Family::V4))
                        .count(),
                );
            }
            Err(message) => {
                eprintln!("mesh-init: {family}: {message}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Installs the rules of `family`; whether they were installed before (then renewed).
pub fn install(capture: &Capture, family: Family) -> Result<bool, String> {
    let saved = Command::new(family.save_program())
        .args(["-t", "nat"])
        .output()
        .map_err(|e| format!("running {}: {e}", family.save_program()))?;
    if !saved.status.success() {
        return Err(format!(
            "{} -t nat failed: {}",
            family.save_program(),
            String::from_utf8_lossy(&saved.stderr).trim()
        ));
    }
    let installed = capture::is_installed(&String::from_utf8_lossy(&saved.stdout));
    let rules = capture::rules(capture, family, installed);
    let mut restore = Command::new(family.restore_program())
        .arg("--noflush")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running {}: {e}", family.restore_program()))?;
    if let Some(mut stdin) = restore.stdin.take() {
        stdin
            .write_all(rules.as_bytes())
            .map_err(|e| format!("writing to {}: {e}", family.restore_program()))?;
    }
    let out = restore.wait_with_output().map_err(|e| format!("running {}: {e}", family.restore_program()))?;
    if !out.status.success() {
        return Err(format!(
            "{} --noflush refused the rules: {}\n{rules}",
            family.restore_program(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(installed)
}

/// Whether this network namespace has IPv6 (a kernel booted with `ipv6.disable=1` has no
/// `/proc/net/if_inet6`, and no ip6tables either).
fn ipv6_enabled() -> bool {
    std::path::Path::new("/proc/net/if_inet6").exists()
}
