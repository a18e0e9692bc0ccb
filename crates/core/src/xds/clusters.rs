//! Clusters: one EDS cluster per Service port that attached routes send requests to, its
//! endpoints served by EDS over the ADS stream under the cluster's own name.

use super::backends::ClusterKey;
use super::model::{Cluster, ConfigSource, DiscoveryType, Duration, EdsClusterConfig, LbPolicy};

/// How long Envoy waits for a connection to an endpoint.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The clusters of `keys`, sorted by name, without duplicates.
pub fn clusters(keys: &[ClusterKey]) -> Vec<Cluster> {
    let mut clusters: Vec<Cluster> = keys.iter().map(cluster).collect();
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    clusters.dedup_by(|a, b| a.name == b.name);
    clusters
}

/// The cluster of one Service port.
pub fn cluster(key: &ClusterKey) -> Cluster {
    let name = key.cluster_name();
    Cluster {
        name: name.clone(),
        discovery_type: DiscoveryType::Eds,
        connect_timeout: CONNECT_TIMEOUT,
        lb_policy: LbPolicy::RoundRobin,
        eds_cluster_config: Some(EdsClusterConfig { eds_config: ConfigSource::ads(), service_name: name }),
        load_assignment: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(service: &str, port: i32) -> ClusterKey {
        ClusterKey { namespace: "shop".into(), service: service.into(), port }
    }

    #[test]
    fn one_eds_cluster_per_service_port_sorted_by_name() {
        let clusters = clusters(&[key("web", 80), key("api", 8080), key("web", 443), key("web", 80)]);
        let names: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["shop/api/8080", "shop/web/443", "shop/web/80"]);
        assert_eq!(
            serde_json::to_value(&clusters[0]).unwrap(),
            json!({"name": "shop/api/8080", "type": "EDS", "connect_timeout": "5s", "lb_policy": "ROUND_ROBIN",
                   "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}, "service_name": "shop/api/8080"}})
        );
    }
}
