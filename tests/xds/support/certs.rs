//! The test PKI: testkit's CA and serving certificate for 127.0.0.1 and localhost, and the
//! fleets' identity CA, with what the server accepts of it and the files proxies read.

use std::sync::Arc;

use envoy_operator::certs::client_auth::ClientTrust;
use envoy_operator::certs::identity_ca::IdentityCa;
use envoy_operator::xds::server::Transport;
use envoy_operator_core::bootstrap::identity_sds_file;
use envoy_operator_core::identity::FleetIdentity;
use rustls::server::ResolvesServerCert;

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
    let serving = envoy_operator_testkit::certs::serving();
    let identities = IdentityCa::generate(time::OffsetDateTime::now_utc()).expect("an identity CA");
    let clients = ClientTrust::new(identities.trust_bundle(), true).expect("a client verifier");
    TestPki { ca_pem: serving.ca_pem, resolver: serving.resolver, identities, clients }
}
