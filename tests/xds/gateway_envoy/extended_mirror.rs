//! `HTTPRouteRequestPercentageMirror` (feature `HTTPRouteRequestPercentageMirror`): a mirror
//! copies about its share of the requests. The suite counts the mirror backends' log lines over
//! 500 requests (within 5% of the share, retried up to five times); here Envoy counts the
//! copies it sent each mirror's cluster (`upstream_rq_total`) over 1 000 requests, within 4.5
//! standard deviations of the share, so a share read wrong (every request, or none) fails and
//! chance alone almost never does. Route: golden case `httproute-request-percentage-mirror`.

use envoy_operator_testkit::fleet_world::{NS, free_port};

use super::client;
use super::extended::serving;
use super::suite::{Backends, golden_route};
use super::world::Proxy;
use crate::support::{CONVERGE, envoy, eventually};

const REQUESTS: u32 = 1_000;

/// The copies Envoy sent to Service `service`'s cluster so far.
async fn mirrored(proxy: &Proxy, service: &str) -> u64 {
    proxy.stat(&format!("cluster.{NS}/{service}/80.upstream_rq_total")).await
}

/// The counts of `services`' clusters once they stop moving (copies are sent beside the
/// requests, and may land after their answers).
async fn settled(proxy: &Proxy, services: &[&str]) -> Vec<u64> {
    let mut last = Vec::new();
    loop {
        let mut now = Vec::new();
        for service in services {
            now.push(mirrored(proxy, service).await);
        }
        if now == last {
            return now;
        }
        last = now;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_request_percentage_mirror() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let route = golden_route("httproute-request-percentage-mirror", "request-percentage-mirror");
    let (world, proxy) = serving(&backends.services(), port, route).await;
    let host = format!("127.0.0.1:{port}");

    // (path, [(mirror, share of the requests)]): 20%, the fraction 25/50, and two mirrors.
    let cases: [(&str, &[(&str, f64)]); 3] = [
        ("/percent-mirror", &[("infra-backend-v2", 0.20)]),
        ("/percent-mirror-fraction", &[("infra-backend-v2", 0.50)]),
        (
            "/percent-multi-mirror-and-modify-headers",
            &[("infra-backend-v2", 0.35), ("infra-backend-v3", 0.50)],
        ),
    ];
    for (path, mirrors) in cases {
        eventually(&format!("GET {path} answered by infra-backend-v1"), CONVERGE, || async {
            let answer = client::get(port, &host, path).await?;
            if answer.served_by() == Some("infra-backend-v1") { Ok(()) } else { Err(format!("{answer:?}")) }
        })
        .await;
        let services: Vec<&str> = mirrors.iter().map(|(service, _)| *service).collect();
        let before = settled(&proxy, &services).await;
        for i in 0..REQUESTS {
            let answer = client::get(port, &host, path).await.unwrap_or_else(|e| panic!("{path} #{i}: {e}"));
            assert_eq!(answer.served_by(), Some("infra-backend-v1"), "{path} #{i}: the primary answers");
        }
        let after = settled(&proxy, &services).await;
        for (((service, share), before), after) in mirrors.iter().zip(before).zip(after) {
            let copies = (after - before) as f64;
            let expected = f64::from(REQUESTS) * share;
            let deviation = (f64::from(REQUESTS) * share * (1.0 - share)).sqrt();
            println!(
                "{path}: {service} got {copies} copies of {REQUESTS} (expected {expected} ± {deviation:.1})"
            );
            assert!(
                (copies - expected).abs() <= 4.5 * deviation,
                "{path}: {service} got {copies} copies of {REQUESTS}, not about {share} of them"
            );
        }
    }
    drop(proxy);
    world.stop().await;
}
