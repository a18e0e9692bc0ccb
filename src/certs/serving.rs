//! Certificates for the admission webhook: generating a CA and a serving certificate with
//! rcgen, writing them as PEM (the key readable by its owner only), and serving them through a
//! rustls certificate resolver that picks up new files without a restart.
//!
//! Reloading polls the files' content hash rather than watching for events: Kubernetes
//! Secret volumes swap a `..data` symlink, which inotify-style watchers easily miss, and
//! polling a few small files every few seconds costs nothing.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use envoy_operator_core::names;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};

use crate::certs::pem::{self, PemError};

/// File names inside a certificate directory: the keys of the `kubernetes.io/tls` Secret (plus
/// the CA) that self-managed mode mirrors into it.
pub const CA_FILE: &str = names::CA_KEY;
pub const CERT_FILE: &str = names::CERT_KEY;
pub const KEY_FILE: &str = names::KEY_KEY;

/// Errors of certificate generation, writing and loading.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),

    #[error("{path} already exists; pass --force to overwrite")]
    Exists { path: PathBuf },

    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },

    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },

    #[error("{path}: {detail}")]
    Pem { path: PathBuf, detail: String },

    #[error("{cert} and {key} do not form a usable certificate: {source}")]
    Key { cert: PathBuf, key: PathBuf, source: rustls::Error },

    #[error("building the TLS configuration: {0}")]
    Config(rustls::Error),
}

impl TlsError {
    /// A short, fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Generate(_) => "generate",
            Self::Exists { .. } => "exists",
            Self::Write { .. } => "write",
            Self::Read { .. } => "read",
            Self::Pem { .. } => "pem",
            Self::Key { .. } => "key",
            Self::Config(_) => "config",
        }
    }
}

/// Who the serving certificate is for.
#[derive(Clone, Debug)]
pub struct CertOptions {
    /// The webhook Service's name.
    pub service_name: String,
    /// The namespace the Service lives in.
    pub namespace: String,
    /// Validity of both certificates, in days.
    pub days: u32,
    /// Further subject names (DNS names or IP addresses), e.g. the host address an API server
    /// dials for a webhook run outside the cluster.
    pub extra_names: Vec<String>,
}

impl CertOptions {
    /// Subject alternative names: loopback for local runs, and every name the API server may
    /// use for the Service (it dials `<service>.<namespace>.svc`).
    pub fn subject_alt_names(&self) -> Vec<String> {
        let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        for name in self.service_names() {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// Only the names the API server uses for the Service (and the extra names): what a
    /// certificate served in the cluster needs. Without loopback, so a key that leaks from the
    /// cluster cannot impersonate a webhook someone runs on their own machine.
    pub fn service_names(&self) -> Vec<String> {
        let (service, namespace) = (&self.service_name, &self.namespace);
        let mut names =
            vec![format!("{service}.{namespace}.svc"), format!("{service}.{namespace}.svc.cluster.local")];
        for extra in &self.extra_names {
            if !names.contains(extra) {
                names.push(extra.clone());
            }
        }
        names
    }
}

/// A freshly generated CA certificate and serving certificate with its key, all PEM.
pub struct GeneratedCerts {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for GeneratedCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedCerts").field("key_pem", &"<redacted>").finish_non_exhaustive()
    }
}

/// Generates a CA and a serving certificate it signs, both ECDSA P-256, for local use: valid
/// for loopback and the Service's names ([`CertOptions::subject_alt_names`]). The CA's key is
/// dropped: nothing else is ever signed with it, and a rotation makes a new pair.
pub fn generate(options: &CertOptions) -> Result<GeneratedCerts, TlsError> {
    generate_for(options, options.subject_alt_names())
}

/// [`generate`] for the certificate served in the cluster: the Service's names only
/// ([`CertOptions::service_names`]).
pub fn generate_for_service(options: &CertOptions) -> Result<GeneratedCerts, TlsError> {
    generate_for(options, options.service_names())
}

fn generate_for(options: &CertOptions, names: Vec<String>) -> Result<GeneratedCerts, TlsError> {
    let now = time::OffsetDateTime::now_utc();
    // Tolerate clocks a little behind ours.
    let not_before = now - time::Duration::hours(1);
    let not_after = now + time::Duration::days(i64::from(options.days.max(1)));

    let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name = name(&format!("{}-ca", options.service_name));
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name = name(&format!("{}.{}.svc", options.service_name, options.namespace));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = not_before;
    params.not_after = not_after;
    let cert = params.signed_by(&key, &issuer)?;

    Ok(GeneratedCerts { ca_pem: ca_cert.pem(), cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

fn name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "envoy-operator");
    name.push(DnType::CommonName, common_name);
    name
}

/// Writes `ca.crt`, `tls.crt` and `tls.key` into `dir` (created if missing), the key with
/// mode 0600. Refuses to replace any existing file unless `force`. Each file is written to a
/// temporary name and renamed, so a server polling the directory never reads half a file.
pub fn write(dir: &Path, certs: &GeneratedCerts, force: bool) -> Result<Vec<PathBuf>, TlsError> {
    let files = [
        (CA_FILE, &certs.ca_pem, false),
        (CERT_FILE, &certs.cert_pem, false),
        (KEY_FILE, &certs.key_pem, true),
    ];
    if !force {
        for (file, _, _) in &files {
            let path = dir.join(file);
            if path.exists() {
                return Err(TlsError::Exists { path });
            }
        }
    }
    fs::create_dir_all(dir).map_err(|source| TlsError::Write { path: dir.to_owned(), source })?;
    // The key first, then the certificate: a poller that sees the new certificate also finds
    // its key (and one that sees a mismatched pair keeps the old one and retries).
    let mut written = Vec::new();
    for (file, contents, private) in [&files[2], &files[1], &files[0]] {
        let path = dir.join(file);
        write_atomically(&path, contents.as_bytes(), *private)?;
        written.push(path);
    }
    written.reverse();
    Ok(written)
}

/// Writes `contents` to a new temporary file in the same directory (a unique name, created
/// exclusively and readable by its owner only, so nobody can plant or read it in between), then
/// renames it over `path`.
fn write_atomically(path: &Path, contents: &[u8], private: bool) -> Result<(), TlsError> {
    let error = |source| TlsError::Write { path: path.to_owned(), source };
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut file = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir).map_err(error)?;
    file.write_all(contents).and_then(|()| file.as_file().sync_all()).map_err(error)?;
    #[cfg(unix)]
    if !private {
        use std::os::unix::fs::PermissionsExt;
        file.as_file().set_permissions(fs::Permissions::from_mode(0o644)).map_err(error)?;
    }
    #[cfg(not(unix))]
    let _ = private;
    file.persist(path).map_err(|persist| error(persist.error))?;
    Ok(())
}

/// The crypto provider the webhook uses (ring, as the rest of the binary).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parses a PEM certificate chain and private key into a key rustls can serve, checking that
/// the key belongs to the first certificate.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8], paths: &CertPaths) -> Result<CertifiedKey, TlsError> {
    let pem_error = |path: &Path, detail: String| TlsError::Pem { path: path.to_owned(), detail };
    let chain = pem::certificates(cert_pem).map_err(|e| pem_error(&paths.cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(pem_error(&paths.cert, PemError::Missing(pem::CERTIFICATE).to_string()));
    }
    let key = pem::private_key(key_pem).map_err(|e| pem_error(&paths.key, e.to_string()))?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(|source| TlsError::Key {
        cert: paths.cert.clone(),
        key: paths.key.clone(),
        source,
    })
}

/// Where the serving certificate and key live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertPaths {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertPaths {
    /// `tls.crt` and `tls.key` in `dir` (the layout of a mounted `kubernetes.io/tls` Secret).
    pub fn in_dir(dir: &Path) -> Self {
        Self { cert: dir.join(CERT_FILE), key: dir.join(KEY_FILE) }
    }
}

/// The serving certificate, reloaded from its files when their content changes. New TLS
/// handshakes get the current certificate; established connections are not touched.
///
/// Our own resolver rather than axum-server's `RustlsConfig::reload_*`: a pair is swapped in
/// only after rustls has checked that the key belongs to the certificate, a failed reload
/// keeps serving the previous pair, and the same resolver serves every listener (webhook and,
/// later, xDS) without rebuilding their TLS configurations.
#[derive(Debug)]
pub struct ReloadingCert {
    paths: CertPaths,
    current: RwLock<Arc<CertifiedKey>>,
    digest: Mutex<[u8; 32]>,
}

impl ReloadingCert {
    /// Loads the certificate now; fails if the files are missing or unusable.
    pub fn load(paths: CertPaths) -> Result<Arc<Self>, TlsError> {
        let (cert_pem, key_pem) = read_pair(&paths)?;
        let key = certified_key(&cert_pem, &key_pem, &paths)?;
        Ok(Arc::new(Self {
            current: RwLock::new(Arc::new(key)),
            digest: Mutex::new(digest(&cert_pem, &key_pem)),
            paths,
        }))
    }

    pub fn paths(&self) -> &CertPaths {
        &self.paths
    }

    /// The certificate new handshakes are given.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Re-reads the files; swaps in the certificate if their content changed. `Ok(true)` when
    /// swapped. On error the current certificate stays in use.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let (cert_pem, key_pem) = read_pair(&self.paths)?;
        let new_digest = digest(&cert_pem, &key_pem);
        let mut seen = self.digest.lock().unwrap_or_else(PoisonError::into_inner);
        if *seen == new_digest {
            return Ok(false);
        }
        let key = certified_key(&cert_pem, &key_pem, &self.paths)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(key);
        *seen = new_digest;
        Ok(true)
    }

    /// Polls the files every `interval` until the future is dropped, logging swaps and
    /// failures (a failed reload keeps serving the previous certificate).
    pub async fn watch(self: Arc<Self>, interval: Duration) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        let mut last_error = None::<String>;
        loop {
            ticker.tick().await;
            let this = self.clone();
            let result = tokio::task::spawn_blocking(move || this.reload_if_changed()).await;
            match result {
                Ok(Ok(true)) => {
                    last_error = None;
                    tracing::info!(cert = %self.paths.cert.display(), "reloaded the serving certificate");
                }
                Ok(Ok(false)) => last_error = None,
                Ok(Err(error)) => {
                    // Log a persistent failure once, not every few seconds.
                    let message = error.to_string();
                    if last_error.as_ref() != Some(&message) {
                        tracing::error!(%error, kind = error.metric_label(), "reloading the serving certificate failed; keeping the previous one");
                    }
                    last_error = Some(message);
                }
                Err(error) => tracing::error!(%error, "certificate reload task failed"),
            }
        }
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn read_pair(paths: &CertPaths) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let read =
        |path: &Path| fs::read(path).map_err(|source| TlsError::Read { path: path.to_owned(), source });
    Ok((read(&paths.cert)?, read(&paths.key)?))
}

fn digest(cert_pem: &[u8], key_pem: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(cert_pem);
    hasher.update([0]);
    hasher.update(key_pem);
    hasher.finalize().into()
}

/// The server's TLS configuration: TLS 1.2 and 1.3 only, ALPN h2 then http/1.1, the
/// certificate from `resolver`.
pub fn server_config(resolver: Arc<dyn ResolvesServerCert>) -> Result<Arc<ServerConfig>, TlsError> {
    crate::net::tls::server_config(resolver, None, &[b"h2", b"http/1.1"]).map_err(TlsError::Config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> CertOptions {
        CertOptions {
            service_name: "hook".into(),
            namespace: "ops".into(),
            days: 30,
            extra_names: Vec::new(),
        }
    }

    #[test]
    fn sans_cover_loopback_and_the_service() {
        assert_eq!(
            options().subject_alt_names(),
            ["localhost", "127.0.0.1", "hook.ops.svc", "hook.ops.svc.cluster.local"]
        );
    }

    #[test]
    fn the_in_cluster_certificate_names_only_the_service() {
        let certs = generate_for_service(&options()).unwrap();
        let der = pem::first_certificate(certs.cert_pem.as_bytes()).unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
        let san = parsed.subject_alternative_name().unwrap().unwrap().value;
        let rendered: Vec<String> = san.general_names.iter().map(|n| n.to_string()).collect();
        assert_eq!(rendered, ["DNSName(hook.ops.svc)", "DNSName(hook.ops.svc.cluster.local)"]);
    }

    #[test]
    fn files_are_written_through_unique_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        // A file planted where a fixed temporary name would be is neither used nor followed.
        #[cfg(unix)]
        std::os::unix::fs::symlink("/dev/null", dir.path().join("tls.tmp")).unwrap();
        write(dir.path(), &generate(&options()).unwrap(), false).unwrap();
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        #[cfg(unix)]
        assert_eq!(left, ["ca.crt", "tls.crt", "tls.key", "tls.tmp"], "no temporary file left behind");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |file: &str| fs::metadata(dir.path().join(file)).unwrap().permissions().mode() & 0o777;
            assert_eq!((mode("tls.key"), mode("tls.crt"), mode("ca.crt")), (0o600, 0o644, 0o644));
        }
    }

    #[test]
    fn extra_names_are_added_once_and_signed() {
        let options = CertOptions {
            extra_names: vec!["172.18.0.1".into(), "host.minikube.internal".into(), "localhost".into()],
            ..options()
        };
        let names = options.subject_alt_names();
        assert_eq!(names[4..], ["172.18.0.1", "host.minikube.internal"]);
        assert_eq!(names.iter().filter(|n| *n == "localhost").count(), 1);
        let certs = generate(&options).unwrap();
        let der = pem::first_certificate(certs.cert_pem.as_bytes()).unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
        let san = parsed.subject_alternative_name().unwrap().unwrap().value;
        let rendered: Vec<String> = san.general_names.iter().map(|n| n.to_string()).collect();
        assert!(rendered.contains(&"IPAddress(ac:12:00:01)".to_owned()), "an IP SAN: {rendered:?}");
        assert!(rendered.contains(&"DNSName(host.minikube.internal)".to_owned()), "{rendered:?}");
    }

    #[test]
    fn writes_files_with_a_private_key_and_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let certs = generate(&options()).unwrap();
        let written = write(dir.path(), &certs, false).unwrap();
        assert_eq!(
            written,
            [dir.path().join(CA_FILE), dir.path().join(CERT_FILE), dir.path().join(KEY_FILE)]
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let again = generate(&options()).unwrap();
        assert!(matches!(write(dir.path(), &again, false), Err(TlsError::Exists { .. })));
        assert_eq!(fs::read_to_string(dir.path().join(CERT_FILE)).unwrap(), certs.cert_pem);
        write(dir.path(), &again, true).unwrap();
        assert_eq!(fs::read_to_string(dir.path().join(CERT_FILE)).unwrap(), again.cert_pem);
    }

    #[test]
    fn reload_swaps_only_on_change_and_keeps_the_old_key_on_error() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &generate(&options()).unwrap(), false).unwrap();
        let source = ReloadingCert::load(CertPaths::in_dir(dir.path())).unwrap();
        let first = source.current();
        assert!(!source.reload_if_changed().unwrap());

        let second = generate(&options()).unwrap();
        write(dir.path(), &second, true).unwrap();
        assert!(source.reload_if_changed().unwrap());
        assert_ne!(source.current().cert, first.cert);

        // A key that does not match the certificate is refused; the current one stays.
        let served = source.current();
        fs::write(dir.path().join(KEY_FILE), generate(&options()).unwrap().key_pem).unwrap();
        assert!(matches!(source.reload_if_changed(), Err(TlsError::Key { .. })));
        assert_eq!(source.current().cert, served.cert);
        fs::write(dir.path().join(CERT_FILE), "garbage").unwrap();
        assert!(source.reload_if_changed().is_err());
        assert_eq!(source.current().cert, served.cert);
    }

    #[test]
    fn missing_files_fail_to_load() {
        let dir = tempfile::tempdir().unwrap();
        let error = ReloadingCert::load(CertPaths::in_dir(dir.path())).unwrap_err();
        assert_eq!(error.metric_label(), "read");
    }
}
