//! PEM text as rustls' types, for the serving certificate's files, the Secrets' certificates
//! and CA bundles, and `--ca-file`: the blocks come from the one PEM reader,
//! [`envoy_operator_core::pem`].
//!
//! Callers say where the text came from (a file, a Secret's key) in their own errors; these
//! say what was wrong with the text: not PEM at all, or no block of the kind asked for.

pub use envoy_operator_core::pem::{Block, CERTIFICATE, PemError, blocks, first_block};
use rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, PrivateSec1KeyDer,
};

/// The certificates (`CERTIFICATE` blocks) in order; blocks of other labels are skipped, so a
/// file holding a certificate and its key reads as the certificate. None is an empty list: a
/// caller that needs one says so in its own terms.
pub fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let mut found = Vec::new();
    for block in blocks(pem) {
        let block = block?;
        if block.label == CERTIFICATE {
            found.push(CertificateDer::from(block.contents));
        }
    }
    Ok(found)
}

/// The first certificate's DER.
pub fn first_certificate(pem: &[u8]) -> Result<CertificateDer<'static>, PemError> {
    certificates(pem)?.into_iter().next().ok_or(PemError::Missing(CERTIFICATE))
}

/// The first private key: PKCS#8 (`PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`) or SEC1 (`EC
/// PRIVATE KEY`), the forms rustls serves with.
pub fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, PemError> {
    for block in blocks(pem) {
        let block = block?;
        let key = match block.label.as_str() {
            "PRIVATE KEY" => PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(block.contents)),
            "RSA PRIVATE KEY" => PrivateKeyDer::Pkcs1(PrivatePkcs1KeyDer::from(block.contents)),
            "EC PRIVATE KEY" => PrivateKeyDer::Sec1(PrivateSec1KeyDer::from(block.contents)),
            _ => continue,
        };
        return Ok(key);
    }
    Err(PemError::Missing("PRIVATE KEY"))
}

/// Whether `text` has the opening line of a certificate block: a cheap look at a file before
/// handing it on whole, without decoding it.
pub fn mentions_certificate(text: &str) -> bool {
    text.contains("-----BEGIN CERTIFICATE-----")
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n";

    #[test]
    fn certificates_skip_other_blocks() {
        let text = format!("{KEY}{CERT}{CERT}");
        assert_eq!(certificates(text.as_bytes()).unwrap().len(), 2);
        assert_eq!(first_certificate(text.as_bytes()).unwrap().as_ref(), [0x30, 0x82, 0x01]);
        assert_eq!(first_block(text.as_bytes()).unwrap().label, "PRIVATE KEY");
        assert_eq!(certificates(b"").unwrap(), Vec::<CertificateDer<'_>>::new());
        assert_eq!(first_certificate(KEY.as_bytes()), Err(PemError::Missing(CERTIFICATE)));
    }

    #[test]
    fn the_first_key_of_any_served_form() {
        let text = format!("{CERT}{KEY}");
        assert!(matches!(private_key(text.as_bytes()), Ok(PrivateKeyDer::Pkcs8(_))));
        let rsa = KEY.replace("PRIVATE KEY", "RSA PRIVATE KEY");
        assert!(matches!(private_key(rsa.as_bytes()), Ok(PrivateKeyDer::Pkcs1(_))));
        assert_eq!(private_key(CERT.as_bytes()).unwrap_err().to_string(), "no PRIVATE KEY block");
    }

    #[test]
    fn a_broken_block_is_not_pem() {
        let broken = "-----BEGIN CERTIFICATE-----\nMIIB\n";
        assert!(matches!(certificates(broken.as_bytes()), Err(PemError::Malformed(_))));
        assert_eq!(first_block(b"").unwrap_err(), PemError::Missing("PEM"));
    }
}
