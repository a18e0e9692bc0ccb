//! A Gateway's `spec.addresses` (Gateway API's static addresses): an `IPAddress` is the cluster
//! IP its fleet's Service asks for. Whether that address can be had is the API server's call
//! (inside the cluster's Service range, held by no other Service): the fleet's reconciler says
//! when it refuses ([`fleet::blocked`](super::fleet::blocked)). Other address types are not
//! supported: the Gateway is not accepted.

use std::net::IpAddr;

use crate::api::gateway::{Gateway, GatewayStatusAddress};

use super::fleet::IP_ADDRESS;

/// What the operator makes of a Gateway's `spec.addresses`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requested {
    /// Why the Gateway cannot be accepted: an address of a type, or a value, the operator does
    /// not support (`UnsupportedAddress`).
    pub unsupported: Option<String>,
    /// Why the addresses asked for cannot all be had, whatever the API server says
    /// (`AddressNotUsable`): a fleet's Service holds one cluster IP.
    pub unusable: Option<String>,
    /// The one IP address asked for: the fleet's Service's cluster IP.
    pub cluster_ip: Option<String>,
}

impl Requested {
    /// Whether the Gateway names any address (then its status lists only those it holds).
    pub fn any(&self) -> bool {
        self.cluster_ip.is_some() || self.unusable.is_some()
    }

    /// The addresses of the status of a Gateway that asked for some: the cluster IP asked for,
    /// once the fleet's Service holds it; nothing else its Service has (a load balancer's).
    pub fn held(&self, service_cluster_ip: Option<&str>) -> Vec<GatewayStatusAddress> {
        match (&self.cluster_ip, service_cluster_ip) {
            (Some(wanted), Some(held)) if same_ip(wanted, held) => {
                vec![GatewayStatusAddress { address_type: IP_ADDRESS.to_owned(), value: wanted.clone() }]
            }
            _ => Vec::new(),
        }
    }
}

/// Judges `gateway`'s `spec.addresses`. A `type` left out is `IPAddress` (the API's default);
/// an `IPAddress` without a value asks for nothing in particular.
pub fn requested(gateway: &Gateway) -> Requested {
    let mut unsupported = Vec::new();
    let mut ips = Vec::new();
    for (index, address) in gateway.spec.addresses.iter().enumerate() {
        let address_type = address.address_type.as_deref().unwrap_or(IP_ADDRESS);
        let value = address.value.as_deref().unwrap_or_default();
        if address_type != IP_ADDRESS {
            unsupported.push(format!(
                "spec.addresses[{index}]: type {address_type:?} is not supported: only {IP_ADDRESS}, the cluster IP of the Gateway's Service"
            ));
        } else if value.parse::<IpAddr>().is_ok() {
            ips.push(value.to_owned());
        } else if !value.is_empty() {
            unsupported.push(format!("spec.addresses[{index}]: {value:?} is not an IP address"));
        }
    }
    let unsupported = (!unsupported.is_empty()).then(|| unsupported.join("; "));
    match ips.as_slice() {
        [] => Requested { unsupported, ..Requested::default() },
        [ip] => Requested { unsupported, unusable: None, cluster_ip: Some(ip.clone()) },
        several => Requested {
            unsupported,
            unusable: Some(format!(
                "spec.addresses asks for {} IP addresses ({}): the Gateway's Service holds one cluster IP",
                several.len(),
                several.join(", ")
            )),
            cluster_ip: None,
        },
    }
}

/// Whether two spellings name one IP address (`::1` and `0:0::1`).
fn same_ip(one: &str, other: &str) -> bool {
    match (one.parse::<IpAddr>(), other.parse::<IpAddr>()) {
        (Ok(one), Ok(other)) => one == other,
        _ => one == other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::gateway::GatewaySpecAddress;

    fn gateway(addresses: &[(Option<&str>, &str)]) -> Gateway {
        let mut gateway = Gateway::new("edge", Default::default());
        gateway.spec.addresses = addresses
            .iter()
            .map(|(address_type, value)| GatewaySpecAddress {
                address_type: address_type.map(str::to_owned),
                value: Some((*value).to_owned()),
            })
            .collect();
        gateway
    }

    #[test]
    fn one_ip_address_is_the_services_cluster_ip_and_a_type_left_out_is_ip_address() {
        for address_type in [Some("IPAddress"), None] {
            let judged = requested(&gateway(&[(address_type, "10.96.0.200")]));
            assert_eq!(judged.cluster_ip.as_deref(), Some("10.96.0.200"));
            assert_eq!((judged.unsupported, judged.unusable), (None, None));
        }
        assert_eq!(requested(&gateway(&[])), Requested::default());
        assert!(!requested(&gateway(&[(None, "")])).any(), "an empty value asks for nothing");
    }

    #[test]
    fn other_types_and_values_that_are_no_ip_are_unsupported_and_named() {
        let judged = requested(&gateway(&[
            (Some("test/fake-invalid-type"), "fake address teehee!"),
            (Some("Hostname"), "edge.example.com"),
            (None, "not-an-ip"),
        ]));
        let why = judged.unsupported.unwrap();
        assert!(why.contains("spec.addresses[0]: type \"test/fake-invalid-type\" is not supported"), "{why}");
        assert!(why.contains("spec.addresses[1]: type \"Hostname\""), "{why}");
        assert!(why.contains("spec.addresses[2]: \"not-an-ip\" is not an IP address"), "{why}");
    }

    #[test]
    fn two_ip_addresses_cannot_both_be_had() {
        let judged = requested(&gateway(&[(None, "192.0.2.1"), (Some("IPAddress"), "10.96.0.200")]));
        assert_eq!((judged.unsupported, judged.cluster_ip), (None, None));
        let why = judged.unusable.unwrap();
        assert!(why.contains("2 IP addresses (192.0.2.1, 10.96.0.200)"), "{why}");
    }

    #[test]
    fn the_status_lists_the_address_asked_for_once_the_service_holds_it() {
        let judged = requested(&gateway(&[(None, "fd00::c8")]));
        assert!(judged.held(None).is_empty(), "no Service yet");
        assert!(judged.held(Some("10.96.12.7")).is_empty(), "another address");
        let held = judged.held(Some("fd00:0::c8"));
        assert_eq!(held.len(), 1);
        assert_eq!((held[0].address_type.as_str(), held[0].value.as_str()), ("IPAddress", "fd00::c8"));
    }
}
