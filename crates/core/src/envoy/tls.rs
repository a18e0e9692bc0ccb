//! TLS: the transport socket of a cluster spoken to over TLS, and the secrets (certificates,
//! trusted CAs) Envoy reads over SDS.

use serde::Serialize;

use super::any::{Packable, packed};
use super::core::{ConfigSource, DataSource, StringMatcher};
use super::type_urls;

/// `envoy.config.core.v3.TransportSocket` with an `UpstreamTlsContext`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TransportSocket {
    pub name: String,
    #[serde(serialize_with = "packed")]
    pub typed_config: UpstreamTlsContext,
}

/// `envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UpstreamTlsContext {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
    pub common_tls_context: CommonTlsContext,
}

impl Packable for UpstreamTlsContext {
    const TYPE_URL: &'static str = type_urls::UPSTREAM_TLS_CONTEXT;
}

/// `envoy.extensions.transport_sockets.tls.v3.CommonTlsContext`, its certificates and
/// trusted CA from SDS (the oneof `validation_context_type` set to
/// `validation_context_sds_secret_config`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommonTlsContext {
    pub alpn_protocols: Vec<String>,
    pub tls_certificate_sds_secret_configs: Vec<SdsSecretConfig>,
    pub validation_context_sds_secret_config: SdsSecretConfig,
}

/// `envoy.extensions.transport_sockets.tls.v3.SdsSecretConfig`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SdsSecretConfig {
    pub name: String,
    pub sds_config: ConfigSource,
}

/// `envoy.extensions.transport_sockets.tls.v3.Secret`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Secret {
    pub name: String,
    #[serde(flatten)]
    pub kind: SecretKind,
}

impl Packable for Secret {
    const TYPE_URL: &'static str = type_urls::SECRET;
}

/// The oneof `type` of [`Secret`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretKind {
    /// A certificate chain and its private key.
    TlsCertificate(TlsCertificate),
    /// What a peer's certificate must chain to and name.
    ValidationContext(CertificateValidationContext),
}

/// `envoy.extensions.transport_sockets.tls.v3.TlsCertificate`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TlsCertificate {
    pub certificate_chain: DataSource,
    pub private_key: DataSource,
}

/// `envoy.extensions.transport_sockets.tls.v3.CertificateValidationContext`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CertificateValidationContext {
    pub trusted_ca: DataSource,
    pub match_typed_subject_alt_names: Vec<SubjectAltNameMatcher>,
}

/// `envoy.extensions.transport_sockets.tls.v3.SubjectAltNameMatcher`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SubjectAltNameMatcher {
    pub san_type: SanType,
    pub matcher: StringMatcher,
}

/// `envoy.extensions.transport_sockets.tls.v3.SubjectAltNameMatcher.SanType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SanType {
    Dns,
    IpAddress,
}
