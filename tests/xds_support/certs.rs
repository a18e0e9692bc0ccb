//! A CA and a serving certificate for 127.0.0.1 and localhost, made with rcgen; and the
//! fleets' identity CA, with what the server accepts of it and the files proxies read.

use std::sync::Arc;

use envoy_operator::certs::client_auth::ClientTrust;
use envoy_operator::certs::identity_ca::IdentityCa;
use envoy_operator::xds_server::Transport;
use envoy_operator_core::bootstrap::identity_sds_file;
use envoy_operator_core::identity::FleetIdentity;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::ResolvesServerCert;
use rustls::sign::{CertifiedKey, SingleCertAndKey};

pub struct TestPki {
    /// The CA Envoy trusts, as PEM.
    pub ca_pem: String,
    pub resolver: Arc<dyn ResolvesServerCert>,
    /// The CA of the fleets' client certificates, and the server's trust in it.
    pub identities: IdentityCa,
    pub clients: Arc<ClientTrust>,
}

impl TestPki {
    /// The transport the operator serves xDS with: TLS, client certificates of `identities`.
    pub fn mutual_tls(&self) -> Transport {
        Transport::MutualTls { certificate: self.resolver.clone(), clients: self.clients.clone() }
    }

    /// The SDS file of the identity Secret of the fleet `namespace/name`, as proxies read it.
    pub fn identity_file(&self, namespace: &str, name: &str) -> String {
        identity_file(&self.identities, namespace, name)
    }
}

/// The SDS file of a certificate `ca` issues the fleet `namespace/name`.
pub fn identity_file(ca: &IdentityCa, namespace: &str, name: &str) -> String {
    let issued = ca
        .issue(&FleetIdentity::new(namespace, name), time::OffsetDateTime::now_utc())
        .expect("a client certificate");
    identity_sds_file(&issued.cert_pem, &issued.key_pem)
}

pub fn pki() -> TestPki {
    let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("a CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca_params.distinguished_name = common_name("xds-server test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca = ca_params.self_signed(&ca_key).expect("a CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("a key");
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).expect("parameters");
    // Distinct from the CA's, or the certificate looks self-signed.
    params.distinguished_name = common_name("xds-server test");
    let cert = params.signed_by(&key, &issuer).expect("a certificate");

    let provider = rustls::crypto::ring::default_provider();
    let certified = CertifiedKey::from_der(
        vec![CertificateDer::from(cert.der().to_vec())],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        &provider,
    )
    .expect("a usable certificate and key");
    let identities = IdentityCa::generate(time::OffsetDateTime::now_utc()).expect("an identity CA");
    let clients = ClientTrust::new(identities.trust_bundle(), true).expect("a client verifier");
    TestPki { ca_pem: ca.pem(), resolver: Arc::new(SingleCertAndKey::from(certified)), identities, clients }
}

fn common_name(name: &str) -> DistinguishedName {
    let mut distinguished_name = DistinguishedName::new();
    distinguished_name.push(DnType::CommonName, name);
    distinguished_name
}
