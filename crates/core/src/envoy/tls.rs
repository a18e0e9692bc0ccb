//! TLS: the transport socket of a cluster spoken to over TLS (upstream) or of a listener's
//! filter chain terminating it (downstream), and the secrets (certificates, trusted CAs) Envoy
//! reads over SDS.

use std::fmt;

use serde::Serialize;

use super::any::{Packable, packed};
use super::core::{ConfigSource, DataSource, StringMatcher};
use super::{extension_names, type_urls};

/// `envoy.config.core.v3.TransportSocket` with a TLS context: an [`UpstreamTlsContext`] (a
/// cluster's) or a [`DownstreamTlsContext`] (a filter chain's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(bound(serialize = "C: Packable"))]
pub struct TransportSocket<C = UpstreamTlsContext> {
    pub name: String,
    #[serde(serialize_with = "packed")]
    pub typed_config: C,
}

impl TransportSocket<DownstreamTlsContext> {
    /// Envoy's TLS transport socket, terminating TLS with `context`.
    pub fn downstream_tls(context: DownstreamTlsContext) -> Self {
        Self { name: extension_names::TLS_TRANSPORT_SOCKET.to_owned(), typed_config: context }
    }
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

/// `envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext`: what a listener's filter
/// chain presents to its clients.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DownstreamTlsContext {
    pub common_tls_context: CommonTlsContext,
}

impl Packable for DownstreamTlsContext {
    const TYPE_URL: &'static str = type_urls::DOWNSTREAM_TLS_CONTEXT;
}

/// `envoy.extensions.transport_sockets.tls.v3.CommonTlsContext`, its certificates and
/// trusted CA from SDS (the oneof `validation_context_type` set to
/// `validation_context_sds_secret_config`, or unset: a server that asks for no client
/// certificate).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommonTlsContext {
    pub alpn_protocols: Vec<String>,
    pub tls_certificate_sds_secret_configs: Vec<SdsSecretConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation_context_sds_secret_config: Option<SdsSecretConfig>,
}

/// `envoy.extensions.transport_sockets.tls.v3.SdsSecretConfig`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SdsSecretConfig {
    pub name: String,
    pub sds_config: ConfigSource,
}

impl SdsSecretConfig {
    /// The secret `name`, delivered over the ADS stream.
    pub fn ads(name: impl Into<String>) -> Self {
        Self { name: name.into(), sds_config: ConfigSource::ads() }
    }

    /// Whether Envoy requests the secret over the ADS stream.
    pub fn is_ads(&self) -> bool {
        self.sds_config.is_ads()
    }
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

impl Secret {
    /// A certificate chain and its private key (PEM), inline.
    pub fn tls_certificate(name: impl Into<String>, certificate_chain: &str, private_key: &str) -> Self {
        Self {
            name: name.into(),
            kind: SecretKind::TlsCertificate(TlsCertificate {
                certificate_chain: DataSource { inline_string: certificate_chain.to_owned() },
                private_key: DataSource { inline_string: private_key.to_owned() },
            }),
        }
    }
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

/// `envoy.extensions.transport_sockets.tls.v3.TlsCertificate`. `Debug` never prints the key.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct TlsCertificate {
    pub certificate_chain: DataSource,
    pub private_key: DataSource,
}

impl fmt::Debug for TlsCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsCertificate")
            .field("certificate_chain", &format_args!("{} bytes", self.certificate_chain.inline_string.len()))
            .field("private_key", &format_args!("<redacted>"))
            .finish()
    }
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
