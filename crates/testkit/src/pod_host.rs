//! A pod's network of its own: a network namespace joined to this host by a veth pair. A
//! process started in it binds what a pod's containers bind (the admin interface on
//! 127.0.0.1:9901, the readiness listener on :9902) without clashing with anything else here,
//! and runs a pod spec's hooks unchanged; the test reaches it at the pod's address, as the
//! kubelet and kube-proxy would. Needs root and `ip` (iproute2): without them the test is
//! skipped with a note, and fails under `.ci/run`.

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

pub struct PodHost {
    namespace: String,
    host_link: String,
    /// The pod's address, on the veth inside the namespace.
    pub address: IpAddr,
}

/// Whether this machine lets a test make a pod host.
pub fn available() -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|status| status.lines().any(|line| line.split_whitespace().take(2).eq(["Uid:", "0"])));
    let ip = Command::new("ip").args(["netns", "list"]).output().is_ok_and(|out| out.status.success());
    if root && ip {
        return true;
    }
    let required = std::env::var_os("ENVOY_OPERATOR_REQUIRE_TOOLS").is_some_and(|v| v == "1");
    assert!(!required, "a pod host needs root and iproute2's `ip` (root: {root}, ip: {ip})");
    eprintln!("SKIPPED: a pod host needs root and iproute2's `ip` (root: {root}, ip: {ip})");
    false
}

impl PodHost {
    /// A new namespace with loopback up and the pod at `10.231.N.2/30`, the host at `.1`.
    pub fn create() -> PodHost {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let index = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}{index}", std::process::id() % 100_000);
        let subnet = (std::process::id() + index) % 250;
        let host = PodHost {
            namespace: format!("eo-pod-{tag}"),
            host_link: format!("eoh{tag}"),
            address: IpAddr::V4(Ipv4Addr::new(10, 231, subnet as u8, 2)),
        };
        let pod_link = format!("eop{tag}");
        let (host_cidr, pod_cidr) = (format!("10.231.{subnet}.1/30"), format!("10.231.{subnet}.2/30"));
        let ns = host.namespace.as_str();
        run(&["netns", "add", ns]);
        // From here on, dropping `host` removes what was made.
        run(&["link", "add", &host.host_link, "type", "veth", "peer", "name", &pod_link]);
        run(&["link", "set", &pod_link, "netns", ns]);
        run(&["addr", "add", &host_cidr, "dev", &host.host_link]);
        run(&["link", "set", &host.host_link, "up"]);
        run(&["netns", "exec", ns, "ip", "addr", "add", &pod_cidr, "dev", &pod_link]);
        run(&["netns", "exec", ns, "ip", "link", "set", &pod_link, "up"]);
        run(&["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
        host
    }

    /// `program` to run inside the pod's network namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.namespace, program]);
        command
    }
}

impl Drop for PodHost {
    fn drop(&mut self) {
        // Deleting the namespace deletes the veth's end in it, and with it the pair.
        let _ = Command::new("ip").args(["netns", "del", &self.namespace]).status();
        let _ = Command::new("ip").args(["link", "del", &self.host_link]).output();
    }
}

fn run(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}
