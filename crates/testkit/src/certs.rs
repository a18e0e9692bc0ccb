//! A CA and a serving certificate for 127.0.0.1 and localhost, made with rcgen: what a test's
//! server presents and what its clients (Envoy, a gRPC client) trust.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::ResolvesServerCert;
use rustls::sign::{CertifiedKey, SingleCertAndKey};

pub struct ServingPki {
    /// The CA clients trust, as PEM.
    pub ca_pem: String,
    /// The server's certificate for 127.0.0.1 and localhost, signed by the CA.
    pub resolver: Arc<dyn ResolvesServerCert>,
}

pub fn serving() -> ServingPki {
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
    ServingPki { ca_pem: ca.pem(), resolver: Arc::new(SingleCertAndKey::from(certified)) }
}

fn common_name(name: &str) -> DistinguishedName {
    let mut distinguished_name = DistinguishedName::new();
    distinguished_name.push(DnType::CommonName, name);
    distinguished_name
}
