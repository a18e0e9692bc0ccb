//! The CA of the fleets' workload identities: it issues each fleet a client certificate naming
//! it ([`FleetIdentity`], a SPIFFE ID in the URI SAN), and the xDS server trusts what it
//! issued. Its own key must outlive a restart, so unlike the webhook's CA it is kept, in the
//! Secret [`XDS_IDENTITY_CA_SECRET`] of the operator's namespace (`tls.crt`/`tls.key`: the CA; `ca.crt`: the
//! bundle clients are checked against, the current CA first and, after a rotation, the one
//! before it while it is valid, so certificates it issued keep working until renewed).

use envoy_operator_core::identity::{FleetIdentity, IssuedIdentity, TRUST_DOMAIN};
use envoy_operator_core::names::{CA_KEY, CERT_KEY, KEY_KEY, XDS_IDENTITY_CA_SECRET};
use k8s_openapi::api::core::v1::Secret;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, PublicKeyData, SanType,
};
use sha2::{Digest, Sha256};
use time::{Duration, OffsetDateTime};

use crate::certs::pem;
use crate::certs::webhook_secret::{CertError, first_pem_block, rotated_bundle, tls_secret, validity};

/// How long the identity CA is valid; it is rotated when a third is left.
pub const CA_VALIDITY: Duration = Duration::days(365);
/// How long a fleet's client certificate is valid. Renewed at half of it
/// ([`IssuedIdentity::renew_after`]), so an operator down for days does not strand its proxies.
pub const CLIENT_VALIDITY: Duration = Duration::days(8);
/// Tolerated clock skew: certificates are valid from this long before they are made.
const BACKDATE: Duration = Duration::hours(1);

/// The identity CA: its certificate and key, and the bundle of CAs clients may chain to.
#[derive(Clone)]
pub struct IdentityCa {
    cert_pem: String,
    key_pem: String,
    bundle_pem: String,
    fingerprint: String,
}

impl std::fmt::Debug for IdentityCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityCa").field("fingerprint", &self.fingerprint).finish_non_exhaustive()
    }
}

/// A fleet's client certificate, its key, and the record of issuing it.
pub struct IssuedCertificate {
    pub cert_pem: String,
    pub key_pem: String,
    pub record: IssuedIdentity,
    pub not_after: OffsetDateTime,
}

impl std::fmt::Debug for IssuedCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedCertificate").field("record", &self.record).finish_non_exhaustive()
    }
}

impl IdentityCa {
    /// A new CA, valid from `now`.
    pub fn generate(now: OffsetDateTime) -> Result<Self, CertError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(generate_error)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(generate_error)?;
        let mut name = DistinguishedName::new();
        name.push(DnType::OrganizationName, "envoy-operator");
        name.push(DnType::CommonName, "envoy-operator xDS identity CA");
        params.distinguished_name = name;
        // Issues leaf certificates only.
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = now - BACKDATE;
        params.not_after = now + CA_VALIDITY;
        let cert = params.self_signed(&key).map_err(generate_error)?;
        let cert_pem = cert.pem();
        Self::new(cert_pem.clone(), key.serialize_pem(), cert_pem)
    }

    fn new(cert_pem: String, key_pem: String, bundle_pem: String) -> Result<Self, CertError> {
        let fingerprint = fingerprint(&cert_pem)?;
        Ok(Self { cert_pem, key_pem, bundle_pem, fingerprint })
    }

    /// The CA a Secret of [`Self::to_secret`]'s shape holds.
    pub fn from_secret(secret: &Secret) -> Result<Self, CertError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let data = secret.data.as_ref();
        let get = |key: &'static str| {
            data.and_then(|data| data.get(key))
                .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
                .filter(|text| !text.is_empty())
                .ok_or_else(|| CertError::MissingKey(name.clone(), key))
        };
        let cert_pem = get(CERT_KEY)?;
        pem::first_certificate(cert_pem.as_bytes()).map_err(|source| CertError::Pem {
            secret: name.clone(),
            key: CERT_KEY,
            source,
        })?;
        let ca = Self::new(cert_pem, get(KEY_KEY)?, get(CA_KEY)?)?;
        // A key that does not sign for this certificate would issue certificates nobody trusts.
        ca.issuer()?;
        Ok(ca)
    }

    /// The Secret (type `kubernetes.io/tls`) holding this CA in `namespace`.
    pub fn to_secret(&self, namespace: &str) -> Secret {
        tls_secret(XDS_IDENTITY_CA_SECRET, namespace, &self.bundle_pem, &self.cert_pem, &self.key_pem)
    }

    /// The current CA's certificate (PEM).
    pub fn certificate_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CAs a client certificate may chain to (PEM).
    pub fn trust_bundle(&self) -> &str {
        &self.bundle_pem
    }

    /// Identifies the current CA: a fleet whose certificate another CA issued gets a new one.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Whether less than a third of the CA's validity is left.
    pub fn needs_rotation(&self, now: OffsetDateTime) -> Result<bool, CertError> {
        Ok(validity(&self.cert_pem)?.needs_rotation(now))
    }

    /// A new CA, trusted next to this one while this one is valid.
    pub fn rotated(&self, now: OffsetDateTime) -> Result<Self, CertError> {
        let next = Self::generate(now)?;
        let bundle = rotated_bundle(&next.cert_pem, &self.bundle_pem, now);
        Self::new(next.cert_pem, next.key_pem, bundle)
    }

    /// A client certificate for the proxies of `fleet`, valid from `now` for
    /// [`CLIENT_VALIDITY`], renewed after half of that.
    pub fn issue(&self, fleet: &FleetIdentity, now: OffsetDateTime) -> Result<IssuedCertificate, CertError> {
        self.issue_valid_for(fleet, now, CLIENT_VALIDITY)
    }

    /// [`Self::issue`] with another validity (tests of expiry).
    pub fn issue_valid_for(
        &self,
        fleet: &FleetIdentity,
        now: OffsetDateTime,
        validity: Duration,
    ) -> Result<IssuedCertificate, CertError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(generate_error)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(generate_error)?;
        let spiffe_id = fleet.spiffe_id(TRUST_DOMAIN);
        params.subject_alt_names = vec![SanType::URI(spiffe_id.try_into().map_err(generate_error)?)];
        let mut name = DistinguishedName::new();
        name.push(DnType::OrganizationName, "envoy-operator");
        // `<namespace>/<envoy>`, or `<namespace>/sa/<serviceaccount>` for a mesh sidecar's.
        name.push(DnType::CommonName, fleet.to_string());
        params.distinguished_name = name;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        params.not_before = now - BACKDATE;
        let not_after = now + validity;
        params.not_after = not_after;
        let cert = params.signed_by(&key, &self.issuer()?).map_err(generate_error)?;
        let renew_after: OffsetDateTime = now + validity / 2;
        Ok(IssuedCertificate {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            record: IssuedIdentity {
                issuer: self.fingerprint.clone(),
                renew_after: renew_after.unix_timestamp(),
            },
            not_after,
        })
    }

    /// The CA as rcgen signs with it; refused when the key is not the certificate's.
    fn issuer(&self) -> Result<Issuer<'static, KeyPair>, CertError> {
        let key =
            KeyPair::from_pem(&self.key_pem).map_err(|e| CertError::Parse(format!("the CA key: {e}")))?;
        let block = first_pem_block(&self.cert_pem)?;
        let certificate = block.parse_x509().map_err(|e| CertError::Parse(e.to_string()))?;
        if certificate.public_key().raw != key.subject_public_key_info().as_slice() {
            return Err(CertError::Parse("the CA key is not the CA certificate's".into()));
        }
        Issuer::from_ca_cert_pem(&self.cert_pem, key)
            .map_err(|e| CertError::Parse(format!("the CA certificate: {e}")))
    }
}

fn generate_error(error: rcgen::Error) -> CertError {
    CertError::Generate(error.to_string())
}

/// The first 16 bytes of the SHA-256 of the first certificate's DER, in hex.
fn fingerprint(pem: &str) -> Result<String, CertError> {
    let block = first_pem_block(pem)?;
    let digest = Sha256::digest(&block.contents);
    Ok(digest[..16].iter().map(|byte| format!("{byte:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use x509_parser::extensions::GeneralName;

    use super::*;

    fn now() -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    #[test]
    fn a_fleet_certificate_names_the_fleet_and_only_serves_clients() {
        let ca = IdentityCa::generate(now()).unwrap();
        let fleet = FleetIdentity::new("shop", "edge");
        let issued = ca.issue(&fleet, now()).unwrap();
        let pem = crate::certs::pem::first_block(issued.cert_pem.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let sans = cert.subject_alternative_name().unwrap().unwrap();
        let uris: Vec<_> = sans
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::URI(uri) => Some(*uri),
                _ => None,
            })
            .collect();
        assert_eq!(uris, ["spiffe://cluster.local/ns/shop/envoy/edge"]);
        let usage = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(usage.client_auth && !usage.server_auth);
        assert_eq!(issued.record.issuer, ca.fingerprint());
        let life = issued.not_after.unix_timestamp() - now().unix_timestamp();
        let renew_in = issued.record.renew_after - now().unix_timestamp();
        assert!((renew_in - life / 2).abs() < 5, "renewed at half its life: {renew_in} of {life}");
    }

    #[test]
    fn the_secret_round_trips_and_a_mismatched_key_is_refused() {
        let ca = IdentityCa::generate(now()).unwrap();
        let secret = ca.to_secret("ops");
        let read = IdentityCa::from_secret(&secret).unwrap();
        assert_eq!(read.fingerprint(), ca.fingerprint());
        assert_eq!(read.trust_bundle(), ca.trust_bundle());

        let other = IdentityCa::generate(now()).unwrap();
        let mut mixed = secret.clone();
        mixed
            .data
            .as_mut()
            .unwrap()
            .insert(KEY_KEY.into(), k8s_openapi::ByteString(other.key_pem.clone().into_bytes()));
        // rcgen checks only that the key parses; the issued certificate would not verify.
        if let Ok(mixed) = IdentityCa::from_secret(&mixed) {
            let issued = mixed.issue(&FleetIdentity::new("shop", "edge"), now()).unwrap();
            assert!(crate::certs::client_auth::verifies(ca.trust_bundle(), &issued.cert_pem).is_err());
        }
        let mut empty = secret;
        empty.data.as_mut().unwrap().remove(KEY_KEY);
        assert!(matches!(IdentityCa::from_secret(&empty), Err(CertError::MissingKey(..))));
    }

    #[test]
    fn a_secret_without_a_certificate_says_which_secret_and_key() {
        let ca = IdentityCa::generate(now()).unwrap();
        let mut secret = ca.to_secret("ops");
        let key = k8s_openapi::ByteString(ca.key_pem.clone().into_bytes());
        secret.data.as_mut().unwrap().insert(CERT_KEY.into(), key);
        let Err(error) = IdentityCa::from_secret(&secret) else {
            panic!("a key where the certificate belongs")
        };
        assert_eq!(
            error.to_string(),
            format!("the Secret {XDS_IDENTITY_CA_SECRET}'s {CERT_KEY}: no CERTIFICATE block"),
        );
    }

    #[test]
    fn a_rotation_trusts_both_cas_and_reissues_under_the_new_one() {
        let start = now();
        let old = IdentityCa::generate(start).unwrap();
        assert!(!old.needs_rotation(start).unwrap());
        assert!(old.needs_rotation(start + Duration::days(250)).unwrap());
        let issued_before = old.issue(&FleetIdentity::new("shop", "edge"), start).unwrap();
        let new = old.rotated(start + Duration::days(250)).unwrap();
        assert_ne!(new.fingerprint(), old.fingerprint());
        assert!(IssuedIdentity::is_due(
            Some(&issued_before.record),
            new.fingerprint(),
            start.unix_timestamp()
        ));
        // The old CA's certificates still verify against the new bundle; so do the new CA's.
        let issued_after = new.issue(&FleetIdentity::new("shop", "edge"), start).unwrap();
        assert!(crate::certs::client_auth::verifies(new.trust_bundle(), &issued_before.cert_pem).is_ok());
        assert!(crate::certs::client_auth::verifies(new.trust_bundle(), &issued_after.cert_pem).is_ok());
        assert!(crate::certs::client_auth::verifies(old.trust_bundle(), &issued_after.cert_pem).is_err());
    }
}
