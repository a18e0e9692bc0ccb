//! The translation serving real requests: an Envoy started on loopback with a translation as
//! its static configuration, and two "backends" that are listeners of the same Envoy echoing
//! what reached them (path, host, headers) in response headers. Proves what validation cannot:
//! path prefixes match whole segments, rewrites and redirects produce the right paths, header
//! changes and matches work, the Host's port is ignored, a backend that does not resolve
//! answers 500, and each request is logged as JSON.

mod common;

use std::sync::Arc;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{TempFile, static_resources, tool};
use envoy_operator_core::api::{Envoy, EnvoyRoute};
use envoy_operator_core::rules::defaulted;
use envoy_operator_core::translate::envoyroute::{Inputs, translate};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn typed<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a fixture object")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

/// A listener answering 200 with `body`, echoing the request's path, host and two headers.
fn echo_listener(name: &str, port: u16, body: &str) -> Value {
    json!({
        "name": name,
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        "filter_chains": [{"filters": [{
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": name,
                "route_config": {"virtual_hosts": [{"name": name, "domains": ["*"], "routes": [{
                    "match": {"prefix": "/"},
                    "direct_response": {"status": 200, "body": {"inline_string": body}},
                    "response_headers_to_add": [
                        {"header": {"key": "x-echo-path", "value": "%REQ(:PATH)%"}},
                        {"header": {"key": "x-echo-host", "value": "%REQ(:AUTHORITY)%"}},
                        {"header": {"key": "x-echo-added", "value": "%REQ(x-added)%"}},
                        {"header": {"key": "x-echo-removed", "value": "%REQ(x-removed)%"}}
                    ]
                }]}]},
                "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]
            }
        }]}]
    })
}

/// The Envoy process of a test, killed when the test ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An HTTP/1.1 answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One request, `Connection: close`; `None` when nothing answers on the port.
fn get(port: u16, host: &str, path: &str, headers: &[(&str, &str)]) -> Option<Answer> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    Some(Answer { status, headers, body: body.to_owned() })
}

#[test]
fn envoy_routes_as_translated() {
    let Some(envoy_bin) = tool("ENVOY_BIN", "envoy") else { return };
    let (listener_port, web_port, canary_port) = (free_port(), free_port(), free_port());

    let envoy: Envoy = typed(json!({"apiVersion": "example.com/v1", "kind": "Envoy",
        "metadata": {"name": "edge", "namespace": "shop"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": listener_port}]}}));
    let route: EnvoyRoute = typed(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
    "metadata": {"name": "shop", "namespace": "shop", "creationTimestamp": "2024-01-01T00:00:00Z"},
    "spec": {
        "parentRefs": [{"name": "edge"}],
        "hostnames": ["shop.example.com"],
        "rules": [
            {"matches": [{"path": {"value": "/api"}}],
             "filters": [
                {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-added", "value": "yes"}], "remove": ["x-removed"]}},
                {"type": "URLRewrite", "urlRewrite": {"hostname": "api.internal", "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}}],
             "backendRefs": [{"name": "web", "port": 80}]},
            {"matches": [{"path": {"type": "Exact", "value": "/canary"}, "headers": [{"name": "X-Canary", "value": "true"}]}],
             "backendRefs": [{"name": "canary", "port": 80}]},
            {"matches": [{"path": {"value": "/strip/"}}],
             "filters": [{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": ""}}}],
             "backendRefs": [{"name": "web", "port": 80}]},
            {"matches": [{"path": {"type": "Exact", "value": "/old"}}],
             "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301, "path": {"type": "ReplaceFullPath", "replaceFullPath": "/new"}}}]},
            {"matches": [{"path": {"value": "/broken"}}], "backendRefs": [{"name": "missing", "port": 80}]}
        ]
    }}));
    let service = |name: &str| -> Service {
        typed(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}))
    };
    let slice = |service: &str, port: u16| -> EndpointSlice {
        typed(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{service}-1"), "namespace": "shop", "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": port}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]}))
    };
    let envoy = defaulted(envoy);
    let translation = translate(&Inputs {
        envoy: &envoy,
        routes: &[Arc::new(route)],
        services: &[Arc::new(service("web")), Arc::new(service("canary"))],
        endpoint_slices: &[Arc::new(slice("web", web_port)), Arc::new(slice("canary", canary_port))],
        rejected: envoy_operator_core::fleet::isolate::Rejections::none(),
    });

    let mut resources =
        serde_json::to_value(static_resources(&translation.resources)).expect("resources serialize");
    let listeners = resources["listeners"].as_array_mut().expect("listeners");
    listeners.push(echo_listener("web", web_port, "web"));
    listeners.push(echo_listener("canary", canary_port, "canary"));
    let bootstrap = json!({
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "static_resources": resources,
    });
    let config = TempFile::with("live.json", &bootstrap.to_string());
    let log = TempFile::with("live.log", "");
    let stdout = std::fs::File::create(&log.0).expect("a log file");
    let _envoy = Running(
        Command::new(&envoy_bin)
            // Access logs are flushed every 10 s unless told otherwise.
            .args([
                "--disable-hot-restart",
                "--log-level",
                "error",
                "--file-flush-interval-msec",
                "100",
                "-c",
            ])
            .arg(&config.0)
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::null())
            .spawn()
            .expect("envoy starts"),
    );

    let host = "shop.example.com:8443";
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = loop {
        if let Some(answer) = get(listener_port, host, "/api/items?page=2", &[("x-removed", "gone")]) {
            break answer;
        }
        assert!(Instant::now() < deadline, "envoy did not listen on {listener_port} within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    };
    // The Host's port is ignored; the prefix is replaced; headers are set and removed.
    assert_eq!((first.status, first.body.as_str()), (200, "web"), "{first:?}");
    assert_eq!(first.header("x-echo-path"), Some("/v2/items?page=2"));
    assert_eq!(first.header("x-echo-host"), Some("api.internal"));
    assert_eq!(first.header("x-echo-added"), Some("yes"));
    assert_eq!(first.header("x-echo-removed"), None, "removed (an empty echo adds no header)");

    let answer =
        |path: &str, headers: &[(&str, &str)]| get(listener_port, host, path, headers).expect("an answer");
    assert_eq!(answer("/api", &[]).header("x-echo-path"), Some("/v2"));
    assert_eq!(answer("/apiary", &[]).status, 404, "whole segments only");
    let canary = answer("/canary", &[("x-canary", "true"), ("x-removed", "kept")]);
    assert_eq!(canary.body, "canary");
    assert_eq!(canary.header("x-echo-removed"), Some("kept"), "the echo does echo the header");
    assert_eq!(answer("/canary", &[("x-canary", "false")]).status, 404);
    assert_eq!(answer("/strip/a/b", &[]).header("x-echo-path"), Some("/a/b"));
    assert_eq!(answer("/strip", &[]).header("x-echo-path"), Some("/"));
    let redirect = answer("/old", &[]);
    assert_eq!(redirect.status, 301);
    // A new scheme without a port takes the scheme's own port, as Gateway API says it MUST
    // (Envoy would keep the request's 8443); Envoy writes it out, which Gateway API only
    // says it SHOULD NOT.
    assert_eq!(redirect.header("location"), Some("https://shop.example.com:443/new"));
    assert_eq!(answer("/broken/x", &[]).status, 500, "a backend that does not resolve");
    let elsewhere = get(listener_port, "other.example.org", "/api", &[]).expect("an answer");
    assert_eq!(elsewhere.status, 404, "no route for the host");

    // Each request is logged as one JSON object on standard output.
    let deadline = Instant::now() + Duration::from_secs(10);
    let logged = loop {
        let text = std::fs::read_to_string(&log.0).unwrap_or_default();
        if text.contains("/old") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let line = logged
        .lines()
        .find(|line| line.contains("\"/old\""))
        .unwrap_or_else(|| panic!("no access log line for /old in:\n{logged}"));
    let entry: Value = serde_json::from_str(line).expect("a JSON access log line");
    assert_eq!(entry["response_code"], 301);
    assert_eq!(entry["route_name"], "shop/shop/rule/3/match/0");
    assert_eq!(entry["authority"], host);
}
