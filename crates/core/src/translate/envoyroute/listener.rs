//! Listeners: one per port of the fleet, on the port it targets, logging requests unless the
//! Envoy turns it off. Routes are attached to them afterwards.

use crate::api::{Envoy, ServicePort};
use crate::ir;
use crate::rules::Defaulted;

/// The fleet's listeners, sorted by name, without virtual hosts yet. A port out of range
/// (possible only for an Envoy the webhook never saw; its status says so) has no listener.
pub fn listeners(envoy: &Defaulted<Envoy>) -> Vec<ir::Listener> {
    let access_log = envoy.effective().access_log;
    let mut listeners: Vec<ir::Listener> =
        envoy.effective().ports.iter().filter_map(|port| listener(port, access_log)).collect();
    listeners.sort_by(|a, b| a.name.cmp(&b.name));
    listeners
}

/// The listener of one port: `<targetPort>` on every address, named after the port.
pub fn listener(port: &ServicePort, access_log: bool) -> Option<ir::Listener> {
    Some(ir::Listener {
        name: port.name.clone(),
        port: port.bound_port()?,
        access_log,
        virtual_hosts: Vec::new(),
        tls_servers: Vec::new(),
        passthrough: Vec::new(),
        outbound: None,
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    use super::*;
    use crate::api::EnvoySpec;
    use crate::envoy::extension_names::{ROUTER, STDOUT_ACCESS_LOG};
    use crate::envoy::{Address, Listener};
    use crate::rules::defaulted;
    use crate::xds::listener::{ACCESS_LOG_FIELDS, listener as rendered};

    fn envoy(ports: Vec<ServicePort>, access_log: Option<bool>) -> Defaulted<Envoy> {
        defaulted(Envoy {
            metadata: ObjectMeta {
                name: Some("edge".into()),
                namespace: Some("shop".into()),
                ..Default::default()
            },
            spec: EnvoySpec { ports, access_log, ..Default::default() },
            status: None,
        })
    }

    /// The fleet's listeners as Envoy gets them.
    fn listeners(envoy: &Defaulted<Envoy>) -> Vec<Listener> {
        super::listeners(envoy).iter().map(rendered).collect()
    }

    fn port(name: &str, port: i32, target_port: Option<i32>) -> ServicePort {
        ServicePort { name: name.into(), port, target_port }
    }

    #[test]
    fn one_listener_per_port_on_its_target_port_routed_by_rds() {
        let listeners =
            listeners(&envoy(vec![port("web", 80, Some(8080)), port("admin-api", 9000, None)], None));
        let names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["admin-api", "web"], "sorted by name");
        let web = serde_json::to_value(&listeners[1]).unwrap();
        assert_eq!(web["address"], json!({"socket_address": {"address": "0.0.0.0", "port_value": 8080}}));
        let manager = &web["filter_chains"][0]["filters"][0]["typed_config"];
        assert_eq!(manager["stat_prefix"], "web");
        assert_eq!(
            manager["rds"],
            json!({"config_source": {"ads": {}, "resource_api_version": "V3"}, "route_config_name": "web"})
        );
        assert_eq!(manager["http_filters"][0]["name"], ROUTER);
        assert_eq!(manager["access_log"][0]["name"], STDOUT_ACCESS_LOG);
        let fields = &manager["access_log"][0]["typed_config"]["log_format"]["json_format"];
        assert_eq!(fields["response_code"], "%RESPONSE_CODE%");
        assert_eq!(fields.as_object().map(|f| f.len()), Some(ACCESS_LOG_FIELDS.len()));
    }

    #[test]
    fn the_default_port_and_no_access_log() {
        let listeners = listeners(&envoy(Vec::new(), Some(false)));
        assert_eq!(listeners.len(), 1);
        assert_eq!(listeners[0].name, "http");
        let manager =
            serde_json::to_value(&listeners[0]).unwrap()["filter_chains"][0]["filters"][0]["typed_config"]
                .clone();
        assert!(manager.get("access_log").is_none());
        assert_eq!(listeners[0].address, Address::socket("0.0.0.0", 8080));
    }

    #[test]
    fn ports_out_of_range_have_no_listener() {
        assert!(listener(&port("bad", 80, Some(70000)), true).is_none());
        assert!(listener(&port("bad", 0, None), true).is_none());
    }
}
