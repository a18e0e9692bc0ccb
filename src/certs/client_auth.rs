//! The xDS server's side of the proxies' identities: which client certificates it accepts at
//! the TLS handshake (those the identity CA's bundle vouches for, swapped at run time when the
//! CA rotates), and whom an accepted certificate names: a fleet, or a mesh sidecar's
//! ServiceAccount.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use envoy_operator_core::identity::{FleetIdentity, TRUST_DOMAIN};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use crate::certs::pem;

/// Why a client certificate names no fleet, or a bundle cannot be trusted.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("the client certificate cannot be parsed: {0}")]
    Parse(String),
    #[error(
        "the client certificate names no fleet and no mesh sidecar (one URI SAN spiffe://{TRUST_DOMAIN}/ns/<namespace>/envoy/<name> or …/sa/<serviceaccount>)"
    )]
    NoFleet,
    #[error("the CA bundle holds no usable certificate")]
    EmptyBundle,
    #[error("building the client verifier: {0}")]
    Verifier(String),
}

/// The fleet (or mesh ServiceAccount) a verified client certificate names, and until when it
/// may be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerIdentity {
    pub fleet: FleetIdentity,
    pub not_after: SystemTime,
}

/// The identity an accepted client certificate (the chain's first) carries.
pub fn peer_identity(end_entity: &CertificateDer<'_>) -> Result<PeerIdentity, IdentityError> {
    use x509_parser::extensions::GeneralName;
    let (_, certificate) =
        x509_parser::parse_x509_certificate(end_entity).map_err(|e| IdentityError::Parse(e.to_string()))?;
    let sans = certificate.subject_alternative_name().map_err(|e| IdentityError::Parse(e.to_string()))?;
    let mut fleets = sans.iter().flat_map(|sans| &sans.value.general_names).filter_map(|name| match name {
        GeneralName::URI(uri) => FleetIdentity::from_spiffe_id(uri, TRUST_DOMAIN),
        _ => None,
    });
    let fleet = fleets.next().ok_or(IdentityError::NoFleet)?;
    // A certificate naming two identities (two fleets, a fleet and a ServiceAccount) names
    // none: whose configuration would it get?
    if fleets.next().is_some() {
        return Err(IdentityError::NoFleet);
    }
    let not_after = u64::try_from(certificate.validity().not_after.timestamp()).unwrap_or(0);
    Ok(PeerIdentity { fleet, not_after: SystemTime::UNIX_EPOCH + Duration::from_secs(not_after) })
}

/// Which client certificates the xDS port accepts: those chaining to the identity CA's bundle,
/// which [`ClientTrust::trust`] replaces while the server runs (a CA rotation). Without
/// `required`, a client may also come without one (`--xds-insecure-node-identity`), but one
/// that presents a certificate must present a valid one.
#[derive(Debug)]
pub struct ClientTrust {
    current: RwLock<Arc<dyn ClientCertVerifier>>,
    required: bool,
}

impl ClientTrust {
    pub fn new(bundle_pem: &str, required: bool) -> Result<Arc<Self>, IdentityError> {
        let verifier = verifier(bundle_pem, required)?;
        Ok(Arc::new(Self { current: RwLock::new(verifier), required }))
    }

    /// Trusts `bundle_pem` from the next handshake on.
    pub fn trust(&self, bundle_pem: &str) -> Result<(), IdentityError> {
        let verifier = verifier(bundle_pem, self.required)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = verifier;
        Ok(())
    }

    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        self.current.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

fn verifier(bundle_pem: &str, required: bool) -> Result<Arc<dyn ClientCertVerifier>, IdentityError> {
    let mut roots = RootCertStore::empty();
    for certificate in
        pem::certificates(bundle_pem.as_bytes()).map_err(|e| IdentityError::Parse(e.to_string()))?
    {
        roots.add(certificate).map_err(|e| IdentityError::Verifier(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(IdentityError::EmptyBundle);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    let builder = if required { builder } else { builder.allow_unauthenticated() };
    builder.build().map_err(|e| IdentityError::Verifier(e.to_string()))
}

impl ClientCertVerifier for ClientTrust {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.required
    }

    /// No hints: the bundle changes under the handshake, and a client with one certificate
    /// (every proxy) sends it whatever the hints say.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current().verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current().supported_verify_schemes()
    }
}

/// Whether `bundle_pem` vouches for the certificate `cert_pem` now.
#[cfg(test)]
pub(crate) fn verifies(bundle_pem: &str, cert_pem: &str) -> Result<(), rustls::Error> {
    let certificate = pem::first_certificate(cert_pem.as_bytes()).unwrap();
    let trust = ClientTrust::new(bundle_pem, true).unwrap();
    trust.verify_client_cert(&certificate, &[], UnixTime::now()).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::identity_ca::IdentityCa;

    fn der(pem: &str) -> CertificateDer<'static> {
        pem::first_certificate(pem.as_bytes()).unwrap()
    }

    #[test]
    fn an_issued_certificate_names_its_fleet() {
        let ca = IdentityCa::generate(time::OffsetDateTime::now_utc()).unwrap();
        let issued = ca.issue(&FleetIdentity::new("shop", "edge"), time::OffsetDateTime::now_utc()).unwrap();
        let peer = peer_identity(&der(&issued.cert_pem)).unwrap();
        assert_eq!(peer.fleet, FleetIdentity::new("shop", "edge"));
        let left = peer.not_after.duration_since(SystemTime::now()).unwrap();
        assert!(left > Duration::from_secs(7 * 86_400), "{left:?}");
    }

    #[test]
    fn an_issued_mesh_certificate_names_its_service_account() {
        let ca = IdentityCa::generate(time::OffsetDateTime::now_utc()).unwrap();
        let mesh = FleetIdentity::mesh("shop", "web");
        let issued = ca.issue(&mesh, time::OffsetDateTime::now_utc()).unwrap();
        let peer = peer_identity(&der(&issued.cert_pem)).unwrap();
        assert_eq!(peer.fleet, mesh);
        assert!(peer.fleet.is_mesh());
        assert_ne!(peer.fleet, FleetIdentity::new("shop", "web"));
        assert_eq!(peer.fleet.fleet_key(), "shop/:mesh");
    }

    /// A certificate with a fleet's SPIFFE ID and a ServiceAccount's is no one's.
    #[test]
    fn a_certificate_naming_a_fleet_and_a_service_account_is_none() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names =
            ["spiffe://cluster.local/ns/shop/envoy/edge", "spiffe://cluster.local/ns/shop/sa/web"]
                .into_iter()
                .map(|uri| rcgen::SanType::URI(uri.try_into().unwrap()))
                .collect();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert!(matches!(peer_identity(cert.der()), Err(IdentityError::NoFleet)));
    }

    #[test]
    fn a_certificate_naming_no_fleet_is_none() {
        let other = rcgen::generate_simple_self_signed(vec!["xds.example".to_owned()]).unwrap();
        assert!(matches!(peer_identity(other.cert.der()), Err(IdentityError::NoFleet)));
        assert!(matches!(peer_identity(&CertificateDer::from(vec![1, 2, 3])), Err(IdentityError::Parse(_))));
    }

    #[test]
    fn the_trust_follows_the_bundle() {
        let now = time::OffsetDateTime::now_utc();
        let (first, second) = (IdentityCa::generate(now).unwrap(), IdentityCa::generate(now).unwrap());
        let fleet = FleetIdentity::new("shop", "edge");
        let by_second = der(&second.issue(&fleet, now).unwrap().cert_pem);
        let trust = ClientTrust::new(first.trust_bundle(), true).unwrap();
        assert!(trust.verify_client_cert(&by_second, &[], UnixTime::now()).is_err());
        trust.trust(second.trust_bundle()).unwrap();
        assert!(trust.verify_client_cert(&by_second, &[], UnixTime::now()).is_ok());
        assert!(matches!(trust.trust(""), Err(IdentityError::EmptyBundle)), "an empty bundle is refused");
        assert!(trust.verify_client_cert(&by_second, &[], UnixTime::now()).is_ok(), "and the last one kept");
        assert!(trust.client_auth_mandatory());
        assert!(!ClientTrust::new(first.trust_bundle(), false).unwrap().client_auth_mandatory());
    }
}
