//! The flags that say where fleets and sidecars reach the operator's own xDS server, shared by
//! the commands that build their bootstraps (`run`, `render`, `inject`, `webhook`).

use envoy_operator_core::bootstrap::ControlPlane;
use envoy_operator_core::inject::annotations::parse_xds;
use envoy_operator_core::names;

#[derive(clap::Args, Clone, Debug, Default)]
pub struct AdvertiseFlags {
    /// Where fleets and sidecars reach the operator's xDS server; the serving certificate must
    /// name the host. Bootstraps of fleets default to its Service,
    /// `envoy-operator-xds.<operator namespace>.svc:18000`; `inject` and `webhook` serve
    /// sidecars from the control plane only when it is set.
    #[arg(long, value_name = "HOST:PORT")]
    pub xds_advertise: Option<String>,
}

impl AdvertiseFlags {
    /// The control plane as bootstraps name it, for an operator in `operator_namespace`.
    pub fn control_plane(&self, operator_namespace: &str) -> Result<ControlPlane, String> {
        match &self.xds_advertise {
            Some(address) => advertised(address),
            None => Ok(default_control_plane(operator_namespace)),
        }
    }
}

fn advertised(address: &str) -> Result<ControlPlane, String> {
    parse_xds(address)
        .map(|target| ControlPlane { host: target.host, port: target.port })
        .map_err(|reason| format!("--xds-advertise {address:?}: {reason}"))
}

impl AdvertiseFlags {
    /// The control plane only where `--xds-advertise` names it: for the offline commands,
    /// which show what `run` does, and `run` serves sidecars no control plane yet.
    pub fn given(&self) -> Result<Option<ControlPlane>, String> {
        self.xds_advertise.as_deref().map(advertised).transpose()
    }
}

/// The operator's xDS Service in its namespace.
pub fn default_control_plane(operator_namespace: &str) -> ControlPlane {
    ControlPlane { host: format!("{}.{operator_namespace}.svc", names::XDS_SERVICE), port: names::XDS_PORT }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_xds_service_of_the_operators_namespace() {
        let control_plane = AdvertiseFlags::default().control_plane("ops").unwrap();
        assert_eq!((control_plane.host.as_str(), control_plane.port), ("envoy-operator-xds.ops.svc", 18000));
        let given = AdvertiseFlags { xds_advertise: Some("10.0.0.7:18001".into()) };
        assert_eq!(given.control_plane("ops").unwrap().port, 18001);
        assert_eq!(given.given().unwrap().unwrap().host, "10.0.0.7");
        assert_eq!(AdvertiseFlags::default().given(), Ok(None));
        let bad = AdvertiseFlags { xds_advertise: Some("nowhere".into()) };
        assert!(bad.control_plane("ops").unwrap_err().contains("--xds-advertise"));
        assert!(bad.given().is_err());
    }
}
