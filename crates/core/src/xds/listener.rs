//! Listeners: one per port of the fleet, each an HTTP connection manager that takes its routes
//! by RDS over the ADS stream and, unless the Envoy turns it off, writes a JSON access log.

use std::collections::BTreeMap;

use super::model::{
    AccessLog, AccessLogConfig, Address, ConfigSource, Filter, FilterChain, HttpConnectionManager,
    HttpFilter, HttpFilterConfig, Listener, NetworkFilterConfig, Rds, RouteSpecifier, Router,
    StdoutAccessLog, SubstitutionFormatString,
};
use crate::api::{Envoy, ServicePort};
use crate::rules::Defaulted;

pub const HTTP_CONNECTION_MANAGER: &str = "envoy.filters.network.http_connection_manager";
pub const ROUTER: &str = "envoy.filters.http.router";
pub const STDOUT_ACCESS_LOG: &str = "envoy.access_loggers.stdout";

/// Fields of each access log line, as commonly logged by Envoy-based gateways: one JSON
/// object per request on the proxy's standard output.
const ACCESS_LOG_FIELDS: [(&str, &str); 18] = [
    ("start_time", "%START_TIME%"),
    ("method", "%REQ(:METHOD)%"),
    ("path", "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"),
    ("protocol", "%PROTOCOL%"),
    ("response_code", "%RESPONSE_CODE%"),
    ("response_flags", "%RESPONSE_FLAGS%"),
    ("response_code_details", "%RESPONSE_CODE_DETAILS%"),
    ("bytes_received", "%BYTES_RECEIVED%"),
    ("bytes_sent", "%BYTES_SENT%"),
    ("duration", "%DURATION%"),
    ("upstream_service_time", "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%"),
    ("upstream_host", "%UPSTREAM_HOST%"),
    ("upstream_cluster", "%UPSTREAM_CLUSTER%"),
    ("x_forwarded_for", "%REQ(X-FORWARDED-FOR)%"),
    ("user_agent", "%REQ(USER-AGENT)%"),
    ("request_id", "%REQ(X-REQUEST-ID)%"),
    ("authority", "%REQ(:AUTHORITY)%"),
    ("route_name", "%ROUTE_NAME%"),
];

/// The fleet's listeners, sorted by name. A port out of range (possible only for an Envoy the
/// webhook never saw; its status says so) has no listener.
pub fn listeners(envoy: &Defaulted<Envoy>) -> Vec<Listener> {
    let access_log = envoy.effective().access_log;
    let mut listeners: Vec<Listener> =
        envoy.effective().ports.iter().filter_map(|port| listener(port, access_log)).collect();
    listeners.sort_by(|a, b| a.name.cmp(&b.name));
    listeners
}

/// The listener of one port: `0.0.0.0:<targetPort>`, named after the port, routed by the
/// route configuration of the same name.
pub fn listener(port: &ServicePort, access_log: bool) -> Option<Listener> {
    let bound = u32::from(port.bound_port()?);
    let manager = HttpConnectionManager {
        stat_prefix: port.name.clone(),
        route_specifier: RouteSpecifier::Rds(Rds {
            config_source: ConfigSource::ads(),
            route_config_name: port.name.clone(),
        }),
        http_filters: vec![HttpFilter {
            name: ROUTER.to_owned(),
            typed_config: HttpFilterConfig::Router(Router {}),
        }],
        access_log: if access_log { vec![json_access_log()] } else { Vec::new() },
        // Route on the normalized path, as Gateway API implementations do: `/a/../admin` and
        // `//admin` must not slip past a match on `/admin`.
        normalize_path: Some(true),
        merge_slashes: true,
    };
    Some(Listener {
        name: port.name.clone(),
        address: Address::socket("0.0.0.0", bound),
        filter_chains: vec![FilterChain {
            filters: vec![Filter {
                name: HTTP_CONNECTION_MANAGER.to_owned(),
                typed_config: NetworkFilterConfig::HttpConnectionManager(manager),
            }],
        }],
    })
}

fn json_access_log() -> AccessLog {
    let json_format: BTreeMap<String, String> =
        ACCESS_LOG_FIELDS.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())).collect();
    AccessLog {
        name: STDOUT_ACCESS_LOG.to_owned(),
        typed_config: AccessLogConfig::Stdout(StdoutAccessLog {
            log_format: SubstitutionFormatString { json_format },
        }),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    use super::*;
    use crate::api::EnvoySpec;
    use crate::rules::defaulted;

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
