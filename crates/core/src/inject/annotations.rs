//! The labels and annotations users put on pods and namespaces, and the parsing of the
//! per-pod overrides. Every invalid value is an error naming the key, never a silent default:
//! a pod that asks for something specific must get it or be told why not.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Map, Value};

use super::InjectError;
use crate::bootstrap::XdsTarget;
use crate::bounded;
use crate::rules::envoy::DEFAULT_XDS_CLUSTER_NAME;
use crate::rules::{format, quantity};

/// Namespace label that turns injection on for every pod of the namespace.
pub const NAMESPACE_LABEL: &str = "envoy-injection";
/// Value of [`NAMESPACE_LABEL`] that turns injection on.
pub const NAMESPACE_LABEL_ENABLED: &str = "enabled";
/// Value of [`NAMESPACE_LABEL`] that keeps every pod of the namespace without a sidecar, even
/// pods labelled to opt in.
pub const NAMESPACE_LABEL_DISABLED: &str = "disabled";
/// Pod label: `"false"` opts a pod out, `"true"` opts it in where the namespace is not labelled.
/// A label rather than an annotation so the webhook's `objectSelector` can skip the call.
pub const INJECT_LABEL: &str = "sidecar.example.com/inject";
/// Pod annotation recording what was injected (JSON, see [`super::status::InjectionStatus`]).
pub const STATUS: &str = "sidecar.example.com/status";
/// Pod annotation `host:port` of the xDS server; wins over every other source.
pub const XDS: &str = "sidecar.example.com/xds";
/// Pod annotation naming an `Envoy` of the pod's namespace whose `spec.xds` to use.
pub const ENVOY: &str = "sidecar.example.com/envoy";
/// Pod annotations overriding the sidecar's requests and limits.
pub const PROXY_CPU_ANNOTATION: &str = "sidecar.example.com/proxy-cpu";
pub const PROXY_MEMORY_ANNOTATION: &str = "sidecar.example.com/proxy-memory";
pub const PROXY_CPU_LIMIT_ANNOTATION: &str = "sidecar.example.com/proxy-cpu-limit";
pub const PROXY_MEMORY_LIMIT_ANNOTATION: &str = "sidecar.example.com/proxy-memory-limit";
/// Pod annotation `"true"`/`"false"`: inject as a native sidecar (init container with
/// `restartPolicy: Always`) or as a regular container, overriding the operator's default.
pub const NATIVE_SIDECAR: &str = "sidecar.example.com/native-sidecar";
/// Pod annotation `"false"`: a mesh sidecar without outbound capture (no init container, no
/// `NET_ADMIN`): the application's traffic goes where it goes, as without a mesh.
pub const MESH_CAPTURE: &str = "sidecar.example.com/mesh-capture";
/// Pod annotation: outbound destination ports the capture leaves alone (`5432,6379`).
pub const MESH_EXCLUDE_PORTS: &str = "sidecar.example.com/mesh-exclude-outbound-ports";
/// Pod annotation: outbound destination networks the capture leaves alone
/// (`10.0.0.0/8,fd00::/8`).
pub const MESH_EXCLUDE_CIDRS: &str = "sidecar.example.com/mesh-exclude-outbound-cidrs";
/// Prefix of Prometheus' conventional scrape annotations. A pod with none of its own gets
/// those pointing at the sidecar's statistics ([`crate::children::envoy::scrape_annotations`]);
/// a pod with any keeps its own, untouched.
pub const SCRAPE_PREFIX: &str = "prometheus.io/";

/// What a pod's annotations ask for. Absent fields fall back to the configuration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    pub xds: Option<XdsTarget>,
    pub envoy: Option<String>,
    pub cpu_request: Option<Quantity>,
    pub memory_request: Option<Quantity>,
    pub cpu_limit: Option<Quantity>,
    pub memory_limit: Option<Quantity>,
    pub native_sidecar: Option<bool>,
    /// `Some(false)`: a mesh sidecar without outbound capture.
    pub mesh_capture: Option<bool>,
    pub mesh_exclude_ports: Vec<u16>,
    pub mesh_exclude_cidrs: Vec<crate::capture::Cidr>,
}

impl Overrides {
    /// Reads and checks the overrides among a pod's annotations (`None`: the pod has none).
    pub fn parse(annotations: Option<&Map<String, Value>>) -> Result<Self, InjectError> {
        let Some(annotations) = annotations else { return Ok(Self::default()) };
        let get = |key: &'static str| -> Result<Option<&str>, InjectError> {
            match annotations.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(value)) => Ok(Some(value.as_str())),
                Some(other) => Err(invalid(key, &other.to_string(), "must be a string")),
            }
        };
        let quantity = |key: &'static str| -> Result<Option<Quantity>, InjectError> {
            let Some(value) = get(key)? else { return Ok(None) };
            let value = Quantity(value.to_owned());
            quantity::check(&value).map_err(|reason| invalid(key, &value.0, &reason))?;
            Ok(Some(value))
        };
        let xds = get(XDS)?
            .map(|value| parse_xds(value).map_err(|reason| invalid(XDS, value, &reason)))
            .transpose()?;
        let envoy = get(ENVOY)?
            .map(|name| {
                let reasons = format::dns1123_subdomain(name);
                if reasons.is_empty() {
                    Ok(name.to_owned())
                } else {
                    Err(invalid(ENVOY, name, &reasons.join(", ")))
                }
            })
            .transpose()?;
        let boolean = |key: &'static str| -> Result<Option<bool>, InjectError> {
            get(key)?
                .map(|value| match value {
                    "true" => Ok(true),
                    "false" => Ok(false),
                    other => Err(invalid(key, other, "must be \"true\" or \"false\"")),
                })
                .transpose()
        };
        let native_sidecar = boolean(NATIVE_SIDECAR)?;
        let mesh_capture = boolean(MESH_CAPTURE)?;
        let mesh_exclude_ports = get(MESH_EXCLUDE_PORTS)?
            .map(|list| {
                crate::capture::parse_ports(list).map_err(|reason| {
                    invalid(MESH_EXCLUDE_PORTS, list, &format!("{reason} (a comma-separated list of ports)"))
                })
            })
            .transpose()?
            .unwrap_or_default();
        let mesh_exclude_cidrs = get(MESH_EXCLUDE_CIDRS)?
            .map(|list| {
                crate::capture::parse_cidrs(list).map_err(|reason| {
                    invalid(MESH_EXCLUDE_CIDRS, list, &format!("{reason} (a comma-separated list of CIDRs)"))
                })
            })
            .transpose()?
            .unwrap_or_default();
        Ok(Self {
            xds,
            envoy,
            cpu_request: quantity(PROXY_CPU_ANNOTATION)?,
            memory_request: quantity(PROXY_MEMORY_ANNOTATION)?,
            cpu_limit: quantity(PROXY_CPU_LIMIT_ANNOTATION)?,
            memory_limit: quantity(PROXY_MEMORY_LIMIT_ANNOTATION)?,
            native_sidecar,
            mesh_capture,
            mesh_exclude_ports,
            mesh_exclude_cidrs,
        })
    }
}

impl Overrides {
    /// Whether the pod sets any of the mesh sidecar's annotations.
    pub fn has_mesh_settings(&self) -> bool {
        self.mesh_capture.is_some()
            || !self.mesh_exclude_ports.is_empty()
            || !self.mesh_exclude_cidrs.is_empty()
    }

    /// Whether the pod sets any of the sidecar's requests or limits.
    pub fn has_resources(&self) -> bool {
        self.cpu_request.is_some()
            || self.memory_request.is_some()
            || self.cpu_limit.is_some()
            || self.memory_limit.is_some()
    }
}

/// Prefix of every key this operator reads on pods.
pub const PREFIX: &str = "sidecar.example.com/";
/// Every annotation this operator reads on pods.
pub const POD_ANNOTATIONS: [&str; 11] = [
    STATUS,
    XDS,
    ENVOY,
    PROXY_CPU_ANNOTATION,
    PROXY_MEMORY_ANNOTATION,
    PROXY_CPU_LIMIT_ANNOTATION,
    PROXY_MEMORY_LIMIT_ANNOTATION,
    NATIVE_SIDECAR,
    MESH_CAPTURE,
    MESH_EXCLUDE_PORTS,
    MESH_EXCLUDE_CIDRS,
];

/// Warnings for annotations with [`PREFIX`] that this operator does not read: most likely
/// typos (`proxy-mem`) or the opt-out label written as an annotation, which would otherwise
/// be silently ignored.
/// At most [`MAX_NOTES`](super::MAX_NOTES) of them, the last counting the rest, each
/// quoting at most a cut key.
pub fn warnings(annotations: Option<&Map<String, Value>>) -> Vec<String> {
    let unknown: Vec<&String> = annotations
        .into_iter()
        .flat_map(|a| a.keys())
        .filter(|key| key.starts_with(PREFIX) && !POD_ANNOTATIONS.contains(&key.as_str()))
        .collect();
    let max = super::MAX_NOTES;
    let shown = if unknown.len() > max { max - 1 } else { unknown.len() };
    let mut notes: Vec<String> = unknown[..shown]
        .iter()
        .map(|key| {
            if *key == INJECT_LABEL {
                format!("{INJECT_LABEL} is a label: as an annotation only \"false\" (opting out) is honoured")
            } else {
                let key = bounded::echo(key);
                format!("unknown annotation {key} ignored (known: {})", POD_ANNOTATIONS.join(", "))
            }
        })
        .collect();
    if unknown.len() > shown {
        notes.push(format!("and {} more unknown {PREFIX} annotations ignored", unknown.len() - shown));
    }
    notes
}

/// The error for an invalid value, quoting at most a cut value: an annotation may be as
/// long as the API server's 256 KiB.
fn invalid(key: &'static str, value: &str, reason: &str) -> InjectError {
    InjectError::InvalidAnnotation {
        key,
        value: bounded::echo(value).into_owned(),
        reason: bounded::echo(reason).into_owned(),
    }
}

/// Parses `host:port` (`[v6-address]:port` for IPv6) into an xDS target with the default
/// cluster name. Used for the pod annotation and the operator's `--xds` flag alike.
pub fn parse_xds(value: &str) -> Result<XdsTarget, String> {
    const SHAPE: &str = "must be host:port, e.g. xds.mesh.svc:18000 or [fd00::1]:18000";
    let (host, port) = value.rsplit_once(':').ok_or_else(|| SHAPE.to_owned())?;
    let host = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) if v6.parse::<std::net::Ipv6Addr>().is_ok() => v6,
        Some(_) => return Err(format!("{SHAPE}: {host} is not an IPv6 address")),
        None if host.contains(':') => return Err(format!("{SHAPE}: put IPv6 addresses in brackets")),
        None => host,
    };
    let reasons = format::host(host);
    if !reasons.is_empty() {
        return Err(format!("host {host:?} {}", reasons.join(", ")));
    }
    let port = port
        .parse::<i32>()
        .ok()
        .filter(|p| format::port(*p).is_empty())
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| format!("port {port:?} must be a number between 1 and 65535"))?;
    Ok(XdsTarget { cluster_name: DEFAULT_XDS_CLUSTER_NAME.to_owned(), host: host.to_owned(), port })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn xds_values() {
        let target = parse_xds("xds.mesh.svc:18000").unwrap();
        assert_eq!((target.host.as_str(), target.port), ("xds.mesh.svc", 18000));
        assert_eq!(parse_xds("[fd00::1]:15010").unwrap().host, "fd00::1");
        assert_eq!(parse_xds("10.0.0.7:1").unwrap().port, 1);
        for bad in [
            "xds.mesh.svc",
            "xds:0",
            "xds:65536",
            "xds:http",
            "fd00::1:80",
            "[nope]:80",
            "bad_host:80",
            ":80",
        ] {
            assert!(parse_xds(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn overrides_are_read_and_checked() {
        let annotations = json!({
            XDS: "xds.mesh:18000", ENVOY: "edge", PROXY_CPU_ANNOTATION: "250m", PROXY_MEMORY_LIMIT_ANNOTATION: "1Gi",
            NATIVE_SIDECAR: "true", "unrelated/key": "x"
        });
        let overrides = Overrides::parse(annotations.as_object()).unwrap();
        assert_eq!(overrides.xds.unwrap().port, 18000);
        assert_eq!(overrides.envoy.as_deref(), Some("edge"));
        assert_eq!(overrides.cpu_request.as_ref().map(|q| q.0.as_str()), Some("250m"));
        assert_eq!(overrides.memory_limit.as_ref().map(|q| q.0.as_str()), Some("1Gi"));
        assert_eq!(overrides.native_sidecar, Some(true));
        assert_eq!(Overrides::parse(None).unwrap(), Overrides::default());
        assert!(warnings(annotations.as_object()).is_empty());
        let typo = json!({"sidecar.example.com/proxy-mem": "1Gi", "other.example.com/proxy-mem": "x", INJECT_LABEL: "false"});
        let warnings = warnings(typo.as_object());
        assert_eq!(warnings.len(), 2);
        assert!(warnings[0].starts_with("unknown annotation sidecar.example.com/proxy-mem ignored"));
        assert!(warnings[1].contains("is a label: as an annotation only \"false\""));
    }

    #[test]
    fn warnings_are_capped_and_keys_cut() {
        let mut annotations = Map::new();
        for i in 0..10_000 {
            annotations.insert(format!("{PREFIX}typo-{i}"), json!("x"));
        }
        annotations.insert(format!("{PREFIX}{}", "k".repeat(100_000)), json!("x"));
        let warnings = warnings(Some(&annotations));
        assert_eq!(warnings.len(), super::super::MAX_NOTES);
        assert!(warnings.iter().all(|w| w.len() < 600), "{warnings:?}");
        assert_eq!(
            warnings.last().unwrap(),
            &format!("and {} more unknown {PREFIX} annotations ignored", 10_001 - 7)
        );
        let error = Overrides::parse(json!({XDS: "y".repeat(1 << 20)}).as_object()).unwrap_err();
        assert!(error.to_string().len() < 1000, "a huge value is not echoed whole");
    }

    #[test]
    fn invalid_overrides_name_the_annotation() {
        for (key, value) in [
            (XDS, json!("nowhere")),
            (ENVOY, json!("Not_A_Name")),
            (PROXY_CPU_ANNOTATION, json!("fast")),
            (PROXY_MEMORY_ANNOTATION, json!("-1Gi")),
            (NATIVE_SIDECAR, json!("yes")),
            (PROXY_CPU_LIMIT_ANNOTATION, json!(2)),
        ] {
            let annotations = json!({ key: value });
            let error = Overrides::parse(annotations.as_object()).unwrap_err();
            assert!(matches!(&error, InjectError::InvalidAnnotation { key: k, .. } if *k == key), "{error}");
            assert!(error.to_string().contains(key), "{error}");
        }
    }
}
