//! ONE model of Envoy's configuration, shared by the bootstrap a proxy starts with and the
//! xDS resources the control plane serves it: typed structs that serialize to Envoy's own JSON
//! (the proto3 JSON mapping with the protos' field names, `"@type"` on typed configs), so a
//! golden file, a ConfigMap or `envoy --mode validate` reads them as Envoy would.
//!
//! Only the fields the operator sets are here, one struct per Envoy message, named after it
//! and documented with its full proto name, so converting them to protobuf messages is a
//! field-by-field copy. A proto `oneof` is an enum (flattened into its message, as proto3 JSON
//! writes oneof members as fields of the message); unset scalar and message fields are skipped,
//! as proto3 JSON omits defaults. Type URLs are written once, in [`type_urls`].

mod any;
mod bootstrap;
mod cluster;
mod core;
pub mod extension_names;
mod listener;
mod route;
mod tls;
pub mod type_urls;

pub use self::any::{Packable, Packed, packed};
pub use self::bootstrap::*;
pub use self::cluster::*;
pub use self::core::*;
pub use self::listener::*;
pub use self::route::*;
pub use self::tls::*;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn durations_serialize_as_proto3_json() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(5), "5s"),
            (Duration::from_millis(1500), "1.500s"),
            (Duration::from_millis(250), "0.250s"),
            (Duration { seconds: 1, nanos: 1_000 }, "1.000001s"),
            (Duration { seconds: 0, nanos: 1 }, "0.000000001s"),
            (std::time::Duration::from_millis(90_500).into(), "90.500s"),
        ];
        for (duration, text) in cases {
            assert_eq!(serde_json::to_value(duration).unwrap(), json!(text), "{duration:?}");
        }
    }

    #[test]
    fn oneofs_are_fields_of_their_message() {
        let route = Route {
            name: "r".into(),
            route_match: RouteMatch {
                path_specifier: PathSpecifier::PathSeparatedPrefix("/api".into()),
                headers: vec![HeaderMatcher {
                    name: "x-env".into(),
                    string_match: StringMatcher::Exact("canary".into()),
                }],
                query_parameters: Vec::new(),
            },
            action: Action::Route(RouteAction {
                cluster_specifier: ClusterSpecifier::Cluster("shop/web/80".into()),
                cluster_not_found_response_code: None,
                timeout: Some(Duration::ZERO),
                prefix_rewrite: None,
                regex_rewrite: None,
                host_rewrite_literal: None,
                request_mirror_policies: Vec::new(),
                retry_policy: None,
            }),
            request_headers_to_add: Vec::new(),
            request_headers_to_remove: Vec::new(),
            response_headers_to_add: Vec::new(),
            response_headers_to_remove: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(&route).unwrap(),
            json!({
                "name": "r",
                "match": {"path_separated_prefix": "/api", "headers": [{"name": "x-env", "string_match": {"exact": "canary"}}]},
                "route": {"cluster": "shop/web/80", "timeout": "0s"}
            })
        );
        let redirect = RedirectAction {
            scheme_redirect: Some("https".into()),
            host_redirect: None,
            port_redirect: None,
            path_rewrite_specifier: Some(RedirectPathRewrite::PathRedirect("/new".into())),
            response_code: RedirectResponseCode::MovedPermanently,
        };
        assert_eq!(
            serde_json::to_value(&redirect).unwrap(),
            json!({"scheme_redirect": "https", "path_redirect": "/new", "response_code": "MOVED_PERMANENTLY"})
        );
    }

    #[test]
    fn typed_configs_carry_their_type_url() {
        let filter = HttpFilter {
            name: "envoy.filters.http.router".into(),
            typed_config: HttpFilterConfig::Router(Router {}),
        };
        assert_eq!(
            serde_json::to_value(&filter).unwrap(),
            json!({"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}})
        );
        let manager = NetworkFilterConfig::HttpConnectionManager(HttpConnectionManager {
            stat_prefix: "http".into(),
            route_specifier: RouteSpecifier::Rds(Rds {
                config_source: ConfigSource::ads(),
                route_config_name: "http".into(),
            }),
            http_filters: Vec::new(),
            access_log: Vec::new(),
            normalize_path: None,
            merge_slashes: false,
            upgrade_configs: Vec::new(),
        });
        assert_eq!(
            serde_json::to_value(&manager).unwrap(),
            json!({
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "http",
                "rds": {"config_source": {"ads": {}, "resource_api_version": "V3"}, "route_config_name": "http"},
                "http_filters": []
            })
        );
    }

    #[test]
    fn enums_serialize_as_proto_enum_names() {
        let cluster = Cluster {
            name: "shop/web/80".into(),
            discovery_type: DiscoveryType::Eds,
            connect_timeout: Duration::from_secs(5),
            lb_policy: Some(LbPolicy::RoundRobin),
            typed_extension_protocol_options: None,
            eds_cluster_config: Some(EdsClusterConfig {
                eds_config: ConfigSource::ads(),
                service_name: "shop/web/80".into(),
            }),
            load_assignment: None,
            transport_socket: None,
        };
        assert_eq!(
            serde_json::to_value(&cluster).unwrap(),
            json!({
                "name": "shop/web/80", "type": "EDS", "connect_timeout": "5s", "lb_policy": "ROUND_ROBIN",
                "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}, "service_name": "shop/web/80"}
            })
        );
        let option = HeaderValueOption {
            header: HeaderValue { key: "x-a".into(), value: "1".into() },
            append_action: HeaderAppendAction::OverwriteIfExistsOrAdd,
        };
        assert_eq!(serde_json::to_value(&option).unwrap()["append_action"], "OVERWRITE_IF_EXISTS_OR_ADD");
    }
}
