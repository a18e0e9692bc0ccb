//! Reading PEM text, the one place the project splits PEM into blocks (with x509-parser's
//! reader): the Gateway listeners' certificate Secrets here, and the binary's certificates,
//! Secrets and CA bundles (`envoy-operator`'s `certs::pem`, which turns blocks into rustls'
//! types).
//!
//! Callers say where the text came from (a file, a Secret's key) in their own errors; these
//! say what was wrong with the text: not PEM at all, or no block of the kind asked for.

pub use x509_parser::pem::Pem as Block;

/// The label of a certificate's block.
pub const CERTIFICATE: &str = "CERTIFICATE";

/// What is wrong with a PEM text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PemError {
    /// A block that does not decode (no end line, a body that is not base64...).
    #[error("not PEM: {0}")]
    Malformed(String),
    /// No block of the kind asked for.
    #[error("no {0} block")]
    Missing(&'static str),
}

/// Every block of `pem`, in order, whatever its label; [`Block::contents`] is the DER.
pub fn blocks(pem: &[u8]) -> impl Iterator<Item = Result<Block, PemError>> + '_ {
    Block::iter_from_buffer(pem).map(|block| block.map_err(|error| PemError::Malformed(error.to_string())))
}

/// The first block, whatever its label (the certificate, in a PEM text that holds one first).
pub fn first_block(pem: &[u8]) -> Result<Block, PemError> {
    blocks(pem).next().unwrap_or(Err(PemError::Missing("PEM")))
}

/// The labels of the blocks of `text` that decode and hold something, up to the first that
/// does not decode: whether a Secret holds a certificate or a key at all (whether the
/// certificate parses is the proxy's to judge).
pub fn labels(text: &str) -> Vec<String> {
    blocks(text.as_bytes())
        .map_while(Result::ok)
        .filter(|block| !block.contents.is_empty())
        .map(|block| block.label)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_told_from_anything_else() {
        let certificate =
            "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\nAAAA\n-----END CERTIFICATE-----\n";
        assert_eq!(labels(certificate), ["CERTIFICATE"]);
        assert!(labels("Hello world\n").is_empty());
        assert!(labels("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n").is_empty(), "no body");
        assert!(labels("-----BEGIN CERTIFICATE-----\nMIIB\n").is_empty(), "no end");
        assert!(labels("-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----").is_empty());
        let key = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----";
        assert_eq!(labels(&format!("{certificate}{key}")), ["CERTIFICATE", "EC PRIVATE KEY"]);
    }
}
