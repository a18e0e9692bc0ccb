//! Every name, label, key, path and default that the generators, the CLI's defaults, the
//! servers and the tests share. One place, so a generated manifest and the flag that points at
//! it can never disagree.

/// The namespace the operator runs in unless told otherwise: its Secret, Lease and webhook
/// Service live there, and it is excluded from every webhook.
pub const OPERATOR_NAMESPACE: &str = "envoy-operator";
/// The Service the API server calls the webhooks through.
pub const WEBHOOK_SERVICE: &str = "envoy-operator-webhook";
/// The port of [`WEBHOOK_SERVICE`] (forwarding to the webhook's TLS port).
pub const WEBHOOK_SERVICE_PORT: i32 = 443;
/// Name of both the Mutating- and the ValidatingWebhookConfiguration.
pub const WEBHOOK_CONFIGURATION: &str = "envoy-operator";
/// The Secret holding the webhook's CA and serving certificate (self-managed mode).
pub const WEBHOOK_SECRET: &str = "envoy-operator-webhook-tls";
/// The leader-election Lease.
pub const LEADER_LEASE: &str = "envoy-operator-leader";

/// The Secret holding the xDS identity CA (`tls.crt`/`tls.key`: the CA; `ca.crt`: the bundle
/// proxies and the xDS server trust), in the operator's namespace.
pub const XDS_IDENTITY_CA_SECRET: &str = "envoy-operator-xds-identity-ca";
/// Suffix of the name of a fleet's identity Secret (`<envoy>-xds-identity`).
pub const XDS_IDENTITY_SECRET_SUFFIX: &str = "-xds-identity";
/// Suffix of the name of a mesh identity Secret (`<serviceaccount>-mesh-identity`,
/// [`crate::identity::mesh_secret_name`]).
pub const MESH_IDENTITY_SECRET_SUFFIX: &str = "-mesh-identity";
/// Label (`"true"`) on every mesh identity Secret (its ServiceAccount in the annotation of the
/// same key).
pub const MESH_IDENTITY_SECRET_LABEL: &str = "envoy-operator.example.com/mesh-identity";
/// Label (`"true"`) on every namespace's mesh CA ConfigMap: what the operator watches of them.
pub const MESH_CA_LABEL: &str = "envoy-operator.example.com/mesh-ca";
/// Label on every identity Secret, naming the Envoy it identifies: what the operator may write
/// among Secrets (the admission policy checks it).
pub const XDS_IDENTITY_SECRET_LABEL: &str = "envoy-operator.example.com/xds-identity";
/// Annotation on a fleet's Deployment recording the identity last issued to it
/// ([`crate::identity::IssuedIdentity`]): the reconciler decides renewals from it without
/// reading Secrets, which it may write but not read.
pub const XDS_IDENTITY_ISSUED_ANNOTATION: &str = "envoy-operator.example.com/xds-identity-issued";
/// The Secret type of TLS certificates: the only Secrets the Gateway API translation reads.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

/// Keys of [`WEBHOOK_SECRET`] (a `kubernetes.io/tls` Secret plus the CA), which are also the
/// file names in a certificate directory.
pub const CA_KEY: &str = "ca.crt";
pub const CERT_KEY: &str = "tls.crt";
pub const KEY_KEY: &str = "tls.key";

/// The label every object the operator writes carries, so its watches cache only its own.
pub const MANAGED_BY_KEY: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "envoy-operator";
/// Field manager of every server-side apply of the reconcilers, for children and status.
pub const FIELD_MANAGER: &str = "envoy-operator";
/// Field manager of `envoy-operator install`, distinct from the operator's own.
pub const INSTALL_FIELD_MANAGER: &str = "envoy-operator-install";
/// Field manager of the leader Lease.
pub const LEASE_FIELD_MANAGER: &str = "envoy-operator-leader";
/// Reporter of the events the reconcilers record.
pub const EVENT_REPORTER: &str = "envoy-operator";

/// Label the API server puts on every namespace (1.21+) with the namespace's own name: what
/// the webhooks' `namespaceSelector` excludes namespaces by.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// Label of the namespace the operator runs in: every webhook excludes namespaces carrying it,
/// so the exclusion follows the namespace wherever it is renamed (e.g. by a kustomization's
/// `namespace:`). `deploy/namespace.yaml` sets it.
pub const OPERATOR_NAMESPACE_LABEL: &str = "envoy-operator.example.com/operator-namespace";
/// The API server's wait for a webhook's answer. Short, since every Foo, Envoy and Pod write
/// waits on it (the API server's default is 10 s).
pub const WEBHOOK_TIMEOUT_SECONDS: i32 = 5;

/// Paths the webhook server serves admission reviews on.
pub const MUTATE_PATH: &str = "/mutate";
pub const VALIDATE_PATH: &str = "/validate";
pub const INJECT_PATH: &str = "/inject";
/// Pods that write the opt-in label as an annotation, in namespaces that do not inject every
/// pod: answered with a warning only (see [`crate::inject::decision::misplaced_opt_in`]).
pub const INJECT_ANNOTATION_PATH: &str = "/inject_annotation";

/// Pod label naming the Envoy whose configuration a pod's proxy takes: on a fleet's pods and on
/// pods whose injected sidecar names an Envoy. The fleets' status tells sidecars from the
/// fleet's own proxies by these pods.
pub const FLEET_LABEL: &str = "envoy-operator.example.com/fleet";
/// Label (`"true"`) the injector gives a pod with a mesh sidecar: the operator watches these
/// pods (by this key alone, whatever its value) to issue their ServiceAccounts' mesh identities.
pub const MESH_SIDECAR_LABEL: &str = "envoy-operator.example.com/mesh-sidecar";
/// Label of the Envoy that is a Gateway's fleet, naming the Gateway: its configuration comes
/// from the Gateway API translation, never from EnvoyRoutes.
pub const GATEWAY_LABEL: &str = "envoy-operator.example.com/gateway";

/// The operator's own label and annotation domain: every key of it is the operator's to set.
pub const OPERATOR_DOMAIN: &str = "envoy-operator.example.com";
/// Gateway API's label (GEP-1762) naming the Gateway on every object that runs it: the fleet's
/// Envoy, Deployment, pods, Service and ConfigMaps.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// The Service fleets reach the operator's xDS server through, and its port.
pub const XDS_SERVICE: &str = "envoy-operator-xds";
pub const XDS_PORT: u16 = 18000;
/// Every replica's xDS report (its connected proxies per fleet) is the ConfigMap
/// `<XDS_REPORT_PREFIX><identity>` in the operator's namespace, under [`XDS_REPORT_KEY`], labelled
/// [`MANAGED_BY_KEY`]`=`[`MANAGED_BY`] and [`COMPONENT_KEY`]`=`[`XDS_REPORT_COMPONENT`] so the
/// leader watches them all with one selector.
pub const XDS_REPORT_PREFIX: &str = "envoy-operator-xds-";
pub const XDS_REPORT_KEY: &str = "report.json";
pub const COMPONENT_KEY: &str = "app.kubernetes.io/component";
pub const XDS_REPORT_COMPONENT: &str = "xds-report";
/// Where `run` serves xDS unless told otherwise.
pub const XDS_LISTEN: &str = "0.0.0.0:18000";

/// Where `run` and `webhook` listen unless told otherwise: the webhooks' TLS port and the
/// plain-HTTP operations port.
pub const WEBHOOK_LISTEN: &str = "0.0.0.0:8443";
pub const OPERATIONS_LISTEN: &str = "0.0.0.0:8080";
/// The port of [`WEBHOOK_LISTEN`].
pub const WEBHOOK_PORT: u16 = 8443;
/// Where a webhook run outside the cluster is reached (`install --local`, `webhook-config
/// --mode local`), and the certificate directory and CA a local run uses.
pub const LOCAL_WEBHOOK_URL: &str = "https://127.0.0.1:8443";
pub const CERT_DIR: &str = "certs";
pub const LOCAL_CA_FILE: &str = "certs/ca.crt";

/// The operator's name as a Gateway API controller: what it writes as `controllerName` in the
/// `status.parents` entries of EnvoyRoutes.
pub const CONTROLLER_NAME: &str = "example.com/envoy-operator";
/// Reason of a condition that holds because the object was accepted: an Envoy's
/// `ConfigAccepted` (its proxies applied the configuration) and a route's `Accepted` per parent
/// (Gateway API's word).
pub const REASON_ACCEPTED: &str = "Accepted";
/// The label every EndpointSlice carries with the name of its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Namespaces never injected, whatever their labels: the control plane's own.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// The Envoy release fleets and sidecars run unless told otherwise. Pinned: never `latest`.
pub const DEFAULT_ENVOY_IMAGE: &str = "envoyproxy/envoy:v1.34.1";
/// Default image of a mesh sidecar's capture init container: the operator's own, as
/// `deploy/kustomization.yaml` names it (`envoy-operator mesh-init` is one of its commands).
pub const DEFAULT_MESH_INIT_IMAGE: &str = "envoy-operator:0.1.0";
/// The nginx image a Foo's Deployment runs unless `--nginx-image` says otherwise. Pinned.
pub const DEFAULT_NGINX_IMAGE: &str = "nginx:1.27.3";

/// Replicas of a Foo or an Envoy whose spec does not say.
pub const DEFAULT_REPLICAS: i32 = 1;

/// Requests and limits of every Envoy container (fleet and sidecar) unless told otherwise.
/// No CPU limit: throttling a proxy adds latency to every request behind it.
pub const DEFAULT_PROXY_CPU_REQUEST: &str = "100m";
pub const DEFAULT_PROXY_MEMORY_REQUEST: &str = "64Mi";
pub const DEFAULT_PROXY_MEMORY_LIMIT: &str = "256Mi";

/// Annotation on every child naming the operator install that manages it
/// ([`crate::children::install`]): an install leaves alone the children another one marked.
pub const INSTALL_ANNOTATION: &str = "envoy-operator.example.com/install";
/// Field manager of the one status condition an install writes about a parent whose children
/// another install manages (`ManagedElsewhere`); every install shares it, so the install that
/// manages the children never owns that condition and its own status writes leave it alone.
pub const STANDBY_FIELD_MANAGER: &str = "envoy-operator-standby";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_agree_with_their_ports() {
        assert!(WEBHOOK_LISTEN.ends_with(&format!(":{WEBHOOK_PORT}")));
        assert!(XDS_LISTEN.ends_with(&format!(":{XDS_PORT}")));
        assert!(LOCAL_WEBHOOK_URL.ends_with(&format!(":{WEBHOOK_PORT}")));
        assert!(LOCAL_CA_FILE.starts_with(&format!("{CERT_DIR}/")) && LOCAL_CA_FILE.ends_with(CA_KEY));
    }
}
