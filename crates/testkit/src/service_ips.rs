//! The API server's judgement of a Service's cluster IP, as the in-memory API server gives it:
//! one asked for must be inside the Service range (kube-apiserver's default
//! `--service-cluster-ip-range`, [`SERVICE_RANGE`]) and held by no other Service, and once set
//! it never changes. The refusals read as the API server's (Kubernetes 1.32). A Service that
//! asks for none is given none: tests that need one write it.

use std::net::{IpAddr, Ipv4Addr};

use serde_json::Value;

/// kube-apiserver's default Service range.
pub const SERVICE_RANGE: &str = "10.96.0.0/12";
const RANGE_START: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 0);
const RANGE_PREFIX: u32 = 12;

fn cluster_ip(service: &Value) -> Option<&str> {
    service["spec"]["clusterIP"].as_str().filter(|ip| !ip.is_empty() && *ip != "None")
}

fn in_range(ip: &str) -> bool {
    let mask = u32::MAX << (32 - RANGE_PREFIX);
    matches!(ip.parse::<IpAddr>(), Ok(IpAddr::V4(ip)) if u32::from(ip) & mask == u32::from(RANGE_START))
}

/// Why the Service `name` may not be stored as `service` (its cluster IP), given what is stored
/// of it (`before`) and the other Services of the cluster.
pub fn refusal<'a>(
    name: &str,
    service: &Value,
    before: Option<&Value>,
    mut others: impl Iterator<Item = &'a Value>,
) -> Option<String> {
    let wanted = cluster_ip(service)?;
    let invalid = |field: &str, why: String| {
        Some(format!("Service {name:?} is invalid: {field}: Invalid value: []string{{{wanted:?}}}: {why}"))
    };
    match before.and_then(cluster_ip) {
        Some(held) if held == wanted => None,
        Some(_) => invalid("spec.clusterIPs[0]", "may not change once set".to_owned()),
        None if !in_range(wanted) => invalid(
            "spec.clusterIPs",
            format!(
                "failed to allocate IP {wanted}: the provided IP ({wanted}) is not in the valid range. The range of valid IPs is {SERVICE_RANGE}"
            ),
        ),
        None if others.any(|other| cluster_ip(other) == Some(wanted)) => invalid(
            "spec.clusterIPs",
            format!("failed to allocate IP {wanted}: provided IP is already allocated"),
        ),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(ip: &str) -> Value {
        json!({"spec": {"clusterIP": ip}})
    }

    #[test]
    fn an_ip_of_the_range_no_other_service_holds_is_granted_and_kept() {
        assert_eq!(refusal("a", &service("10.96.0.200"), None, [&service("10.96.0.10")].into_iter()), None);
        assert_eq!(refusal("a", &service("10.111.255.255"), None, std::iter::empty()), None);
        let held = service("10.96.0.200");
        assert_eq!(refusal("a", &held, Some(&held), std::iter::empty()), None);
        assert_eq!(refusal("a", &json!({"spec": {}}), None, std::iter::empty()), None, "none asked for");
    }

    #[test]
    fn outside_the_range_taken_or_changed_is_refused_in_the_api_servers_words() {
        let outside = refusal("a", &service("192.0.2.1"), None, std::iter::empty()).unwrap();
        assert_eq!(
            outside,
            "Service \"a\" is invalid: spec.clusterIPs: Invalid value: []string{\"192.0.2.1\"}: failed to allocate IP 192.0.2.1: the provided IP (192.0.2.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
        );
        assert!(refusal("a", &service("10.112.0.1"), None, std::iter::empty()).is_some(), "past a /12");
        assert!(refusal("a", &service("fd00::1"), None, std::iter::empty()).is_some(), "no IPv6 range");
        let taken = refusal("a", &service("10.96.0.10"), None, [&service("10.96.0.10")].into_iter()).unwrap();
        assert!(
            taken.ends_with("failed to allocate IP 10.96.0.10: provided IP is already allocated"),
            "{taken}"
        );
        let changed =
            refusal("a", &service("10.96.0.201"), Some(&service("10.96.0.200")), std::iter::empty());
        assert!(changed.unwrap().ends_with("may not change once set"));
    }
}
