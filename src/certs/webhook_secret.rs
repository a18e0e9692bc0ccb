//! Webhook certificates in a cluster, without cert-manager ("self-managed" mode).
//!
//! - Every replica makes sure the Secret exists: it creates it if absent (create-only, so
//!   replicas racing at first start converge on the one that won), then mirrors it into its
//!   certificate directory, where the server's file poller hot-reloads it. One reload path
//!   serves both this mode and a mounted Secret (`--cert-dir`).
//! - The leader keeps `caBundle` of the operator's webhook configurations equal to the Secret's
//!   `ca.crt` (re-patching it when someone resets it, e.g. `kubectl apply -k deploy/`) and
//!   rotates before expiry: when less than a third of the validity is left it makes a new CA and
//!   serving certificate, first adds the new CA to the webhook configurations (which then trust
//!   both), then stores the new pair with the old CA still in `ca.crt`, so no request fails
//!   while replicas pick the new certificate up.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::json;
use time::OffsetDateTime;
use tracing::info;

use envoy_operator_core::names::{
    CA_KEY, CERT_KEY, KEY_KEY, MANAGED_BY, MANAGED_BY_KEY, WEBHOOK_CONFIGURATION, WEBHOOK_SECRET,
};

use crate::certs::pem::{self, PemError};
use crate::certs::serving::{CertOptions, GeneratedCerts};

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("Kubernetes API: {}", crate::ops::logging::KubeError(.0))]
    Api(#[from] kube::Error),
    #[error("the Secret {0} lacks {1}")]
    MissingKey(String, &'static str),
    #[error("parsing the certificate: {0}")]
    Parse(String),
    /// A key of a Secret whose PEM text is not what it should hold.
    #[error("the Secret {secret}'s {key}: {source}")]
    Pem { secret: String, key: &'static str, source: PemError },
    #[error("generating certificates: {0}")]
    Generate(String),
}

impl From<PemError> for CertError {
    fn from(error: PemError) -> Self {
        Self::Parse(error.to_string())
    }
}

impl CertError {
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Api(_) => "api",
            Self::MissingKey(..) => "missing_key",
            Self::Parse(_) | Self::Pem { .. } => "parse",
            Self::Generate(_) => "generate",
        }
    }
}

/// The certificate material a Secret holds. `ca_bundle` may hold more than one CA during a
/// rotation.
#[derive(Clone, PartialEq, Eq)]
pub struct CertMaterial {
    pub ca_bundle: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for CertMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertMaterial").field("key_pem", &"<redacted>").finish_non_exhaustive()
    }
}

impl CertMaterial {
    pub fn from_generated(generated: GeneratedCerts) -> Self {
        Self { ca_bundle: generated.ca_pem, cert_pem: generated.cert_pem, key_pem: generated.key_pem }
    }

    pub fn from_secret(secret: &Secret) -> Result<Self, CertError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let data = secret.data.clone().unwrap_or_default();
        let get = |key: &'static str| {
            data.get(key)
                .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
                .filter(|s| !s.is_empty())
                .ok_or_else(|| CertError::MissingKey(name.clone(), key))
        };
        Ok(Self { ca_bundle: get(CA_KEY)?, cert_pem: get(CERT_KEY)?, key_pem: get(KEY_KEY)? })
    }

    /// The Secret (type `kubernetes.io/tls`) holding this material.
    pub fn to_secret(&self, namespace: &str) -> Secret {
        tls_secret(WEBHOOK_SECRET, namespace, &self.ca_bundle, &self.cert_pem, &self.key_pem)
    }

    /// Validity of the serving certificate.
    pub fn validity(&self) -> Result<Validity, CertError> {
        validity(&self.cert_pem)
    }

    /// Those of `names` the serving certificate does not name (DNS names and IP addresses).
    pub fn missing_names(&self, names: &[String]) -> Result<Vec<String>, CertError> {
        let named = subject_alt_names(&self.cert_pem)?;
        Ok(names.iter().filter(|name| !named.contains(*name)).cloned().collect())
    }
}

/// A Secret of the operator's own (type `kubernetes.io/tls`, labelled as managed by it) named
/// `name` in `namespace`: `ca.crt`, `tls.crt` and `tls.key`.
pub fn tls_secret(name: &str, namespace: &str, ca_bundle: &str, cert_pem: &str, key_pem: &str) -> Secret {
    let data = [(CA_KEY, ca_bundle), (CERT_KEY, cert_pem), (KEY_KEY, key_pem)]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), ByteString(value.as_bytes().to_vec())))
        .collect::<BTreeMap<_, _>>();
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some([(MANAGED_BY_KEY.to_owned(), MANAGED_BY.to_owned())].into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(data),
        ..Default::default()
    }
}

/// The first PEM block of a PEM text (its `contents` are the DER).
pub fn first_pem_block(pem: &str) -> Result<pem::Block, CertError> {
    Ok(pem::first_block(pem.as_bytes())?)
}

/// The DNS names and IP addresses the first certificate of a PEM text names.
fn subject_alt_names(pem: &str) -> Result<Vec<String>, CertError> {
    use x509_parser::extensions::GeneralName;
    let block = first_pem_block(pem)?;
    let certificate = block.parse_x509().map_err(|e| CertError::Parse(e.to_string()))?;
    let extension = certificate.subject_alternative_name().map_err(|e| CertError::Parse(e.to_string()))?;
    let names = extension.map(|extension| extension.value.general_names.as_slice()).unwrap_or_default();
    Ok(names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some((*dns).to_owned()),
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => <[u8; 4]>::try_from(*bytes).ok().map(|ip| std::net::IpAddr::from(ip).to_string()),
                16 => <[u8; 16]>::try_from(*bytes).ok().map(|ip| std::net::IpAddr::from(ip).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect())
}

/// When a certificate is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

impl Validity {
    /// Rotate once less than a third of the validity is left (or it is already over).
    pub fn needs_rotation(&self, now: OffsetDateTime) -> bool {
        let total = self.not_after - self.not_before;
        self.not_after - now < total / 3
    }

    pub fn seconds_left(&self, now: OffsetDateTime) -> i64 {
        (self.not_after - now).whole_seconds()
    }
}

/// Validity of the first certificate in a PEM text.
pub fn validity(pem: &str) -> Result<Validity, CertError> {
    let certificates = certificates(pem)?;
    let first =
        certificates.first().ok_or_else(|| CertError::Parse("no certificate in the PEM text".into()))?;
    Ok(*first)
}

/// Validity of every certificate in a PEM text, in order.
fn certificates(pem: &str) -> Result<Vec<Validity>, CertError> {
    let mut found = Vec::new();
    for block in pem::blocks(pem.as_bytes()) {
        let block = block?;
        let certificate = block.parse_x509().map_err(|e| CertError::Parse(e.to_string()))?;
        let validity = certificate.validity();
        found.push(Validity {
            not_before: validity.not_before.to_datetime(),
            not_after: validity.not_after.to_datetime(),
        });
    }
    Ok(found)
}

/// The PEM blocks of a bundle, each with its validity.
fn bundle_blocks(bundle: &str) -> Vec<(String, Option<Validity>)> {
    let mut blocks = Vec::new();
    let mut current = String::new();
    for line in bundle.lines() {
        current.push_str(line);
        current.push('\n');
        if line.starts_with("-----END ") {
            let validity = validity(&current).ok();
            blocks.push((std::mem::take(&mut current), validity));
        }
    }
    blocks
}

/// The CA bundle after a rotation to `new_ca`: the new CA first, then the CA the current
/// serving certificate was issued by (the first of `current_bundle`) while it is still valid.
/// Older CAs are dropped: nothing they signed is served any more.
pub fn rotated_bundle(new_ca: &str, current_bundle: &str, now: OffsetDateTime) -> String {
    let mut bundle = new_ca.trim_end().to_owned();
    bundle.push('\n');
    if let Some((previous, Some(validity))) = bundle_blocks(current_bundle).into_iter().next()
        && validity.not_after > now
    {
        bundle.push_str(&previous);
    }
    bundle
}

/// Gets the Secret, creating it with fresh certificates when it does not exist. When another
/// replica creates it first, adopts theirs.
pub async fn ensure_secret(
    client: &Client,
    namespace: &str,
    options: &CertOptions,
) -> Result<CertMaterial, CertError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    if let Some(secret) = secrets.get_opt(WEBHOOK_SECRET).await? {
        return CertMaterial::from_secret(&secret);
    }
    let material = generate(options)?;
    match secrets.create(&PostParams::default(), &material.to_secret(namespace)).await {
        Ok(_) => {
            info!(secret = WEBHOOK_SECRET, %namespace, "created the webhook certificate Secret");
            Ok(material)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            info!(secret = WEBHOOK_SECRET, %namespace, "another replica created the Secret first; using theirs");
            CertMaterial::from_secret(&secrets.get(WEBHOOK_SECRET).await?)
        }
        Err(error) => Err(error.into()),
    }
}

fn generate(options: &CertOptions) -> Result<CertMaterial, CertError> {
    crate::certs::serving::generate_for_service(options)
        .map(CertMaterial::from_generated)
        .map_err(|e| CertError::Generate(e.to_string()))
}

/// Makes every webhook of the operator's Mutating- and ValidatingWebhookConfiguration trust
/// `ca_bundle`. Returns how many configurations were patched; configurations that already
/// match are not written.
pub async fn ensure_ca_bundle(client: &Client, ca_bundle: &str) -> Result<usize, CertError> {
    let mutating =
        patch_ca_bundle::<MutatingWebhookConfiguration>(client, ca_bundle, |c| webhook_bundles(&c.webhooks))
            .await?;
    let validating = patch_ca_bundle::<ValidatingWebhookConfiguration>(client, ca_bundle, |c| {
        webhook_bundles(&c.webhooks)
    })
    .await?;
    Ok(usize::from(mutating) + usize::from(validating))
}

trait HasClientConfig {
    fn ca_bundle(&self) -> Option<&ByteString>;
}

impl HasClientConfig for k8s_openapi::api::admissionregistration::v1::MutatingWebhook {
    fn ca_bundle(&self) -> Option<&ByteString> {
        self.client_config.ca_bundle.as_ref()
    }
}

impl HasClientConfig for k8s_openapi::api::admissionregistration::v1::ValidatingWebhook {
    fn ca_bundle(&self) -> Option<&ByteString> {
        self.client_config.ca_bundle.as_ref()
    }
}

fn webhook_bundles<W: HasClientConfig>(webhooks: &Option<Vec<W>>) -> Vec<Option<Vec<u8>>> {
    webhooks.iter().flatten().map(|w| w.ca_bundle().map(|b| b.0.clone())).collect()
}

/// Patches `caBundle` of every webhook of configuration `WEBHOOK_CONFIGURATION` of kind `K`
/// when any differs. A JSON Patch guarded by a `test` of the resourceVersion: a concurrent
/// change makes it fail (and the next pass retries) rather than overwrite the other writer.
async fn patch_ca_bundle<K>(
    client: &Client,
    ca_bundle: &str,
    bundles: impl Fn(&K) -> Vec<Option<Vec<u8>>>,
) -> Result<bool, CertError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let Some(configuration) = api.get_opt(WEBHOOK_CONFIGURATION).await? else {
        return Ok(false); // Not installed (yet): nothing to keep current.
    };
    let current = bundles(&configuration);
    if current.iter().all(|b| b.as_deref() == Some(ca_bundle.as_bytes())) {
        return Ok(false);
    }
    let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, ca_bundle);
    let mut operations = vec![json!({"op": "test", "path": "/metadata/resourceVersion",
                                     "value": configuration.meta().resource_version})];
    operations.extend((0..current.len()).map(
        |i| json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": encoded}),
    ));
    let patch: json_patch::Patch =
        serde_json::from_value(json!(operations)).map_err(|e| CertError::Parse(e.to_string()))?;
    api.patch(WEBHOOK_CONFIGURATION, &PatchParams::default(), &Patch::<()>::Json(patch)).await?;
    info!(kind = %K::kind(&()), name = WEBHOOK_CONFIGURATION, "patched caBundle");
    Ok(true)
}

/// Rotates the certificates when due: new CA and serving certificate, webhook configurations
/// trusting old and new CAs first, then the Secret updated (guarded by its resourceVersion).
/// A Secret that is gone is recreated the same way ([`recreate_secret`]). Returns the new
/// material when it rotated or recreated.
pub async fn rotate_if_due(
    client: &Client,
    namespace: &str,
    options: &CertOptions,
    now: OffsetDateTime,
) -> Result<Option<CertMaterial>, CertError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let Some(secret) = secrets.get_opt(WEBHOOK_SECRET).await? else {
        return recreate_secret(client, namespace, options, now).await.map(Some);
    };
    let current = CertMaterial::from_secret(&secret)?;
    // A certificate that lacks a name it must serve (the xDS Service, added by an upgrade)
    // is replaced the way an expiring one is.
    let missing = current.missing_names(&options.service_names())?;
    if !current.validity()?.needs_rotation(now) && missing.is_empty() {
        return Ok(None);
    }
    if !missing.is_empty() {
        info!(missing = %missing.join(","), "the serving certificate lacks names it must have; rotating");
    }
    let fresh = generate(options)?;
    let rotated = CertMaterial {
        ca_bundle: rotated_bundle(&fresh.ca_bundle, &current.ca_bundle, now),
        cert_pem: fresh.cert_pem,
        key_pem: fresh.key_pem,
    };
    // Trust the new CA before anyone serves a certificate it signed.
    ensure_ca_bundle(client, &union_bundle(&current.ca_bundle, &rotated.ca_bundle)).await?;
    let mut updated = rotated.to_secret(namespace);
    updated.metadata.resource_version = secret.metadata.resource_version.clone();
    secrets.replace(WEBHOOK_SECRET, &PostParams::default(), &updated).await?;
    info!(secret = WEBHOOK_SECRET, %namespace, "rotated the webhook certificates");
    Ok(Some(rotated))
}

/// The leader, when the Secret is gone (deleted by hand, say): new certificates, trusted next
/// to the CA the webhook configurations trust now, as a rotation does, before the Secret that
/// replicas will serve them from is created. Meanwhile the replicas keep serving the
/// certificate they have, which the old CA still vouches for. If another replica creates the
/// Secret first, theirs is used.
pub async fn recreate_secret(
    client: &Client,
    namespace: &str,
    options: &CertOptions,
    now: OffsetDateTime,
) -> Result<CertMaterial, CertError> {
    tracing::warn!(secret = WEBHOOK_SECRET, %namespace, "the certificate Secret is missing: recreating it");
    let fresh = generate(options)?;
    let trusted = trusted_bundle(client).await?;
    let material = CertMaterial { ca_bundle: rotated_bundle(&fresh.ca_bundle, &trusted, now), ..fresh };
    ensure_ca_bundle(client, &union_bundle(&trusted, &material.ca_bundle)).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    match secrets.create(&PostParams::default(), &material.to_secret(namespace)).await {
        Ok(_) => {
            info!(secret = WEBHOOK_SECRET, %namespace, "recreated the webhook certificate Secret");
            Ok(material)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            CertMaterial::from_secret(&secrets.get(WEBHOOK_SECRET).await?)
        }
        Err(error) => Err(error.into()),
    }
}

/// The CA bundle the mutating webhook configuration trusts now (empty when it is not
/// installed or trusts nothing yet).
async fn trusted_bundle(client: &Client) -> Result<String, CertError> {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let configuration = api.get_opt(WEBHOOK_CONFIGURATION).await?;
    let bundle = configuration
        .iter()
        .flat_map(|c| webhook_bundles(&c.webhooks))
        .flatten()
        .next()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    Ok(bundle.unwrap_or_default())
}

/// Every distinct PEM block of `a` then `b`.
fn union_bundle(a: &str, b: &str) -> String {
    let mut seen = Vec::new();
    for (block, _) in bundle_blocks(a).into_iter().chain(bundle_blocks(b)) {
        if !seen.contains(&block) {
            seen.push(block);
        }
    }
    seen.concat()
}

/// Every replica: ensures the Secret exists (creating it when absent) and writes it into
/// `dir`, where the webhook server's file poller loads it. Returns what was written.
pub async fn bootstrap_files(
    client: &Client,
    namespace: &str,
    options: &CertOptions,
    dir: &std::path::Path,
) -> Result<CertMaterial, CertError> {
    let material = ensure_secret(client, namespace, options).await?;
    write_material(dir, &material)?;
    Ok(material)
}

/// The serving certificate the Secret holds, as the mirror last saw it, and since when: what
/// the readiness check compares the served certificate with.
#[derive(Clone, Debug, Default)]
pub struct SecretCertificate(Arc<Mutex<Option<Seen>>>);

#[derive(Debug)]
struct Seen {
    cert_der: Vec<u8>,
    since: Instant,
}

impl SecretCertificate {
    fn observe(&self, material: &CertMaterial) {
        let Some(cert_der) = first_certificate_der(&material.cert_pem) else { return };
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.as_ref().is_none_or(|seen| seen.cert_der != cert_der) {
            *seen = Some(Seen { cert_der, since: Instant::now() });
        }
    }

    /// `Some(age)` when the Secret holds a certificate other than `served`, seen `age` ago.
    fn differs_from(&self, served: &[u8]) -> Option<Duration> {
        let seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.as_ref().filter(|seen| seen.cert_der != served).map(|seen| seen.since.elapsed())
    }
}

fn first_certificate_der(pem: &str) -> Option<Vec<u8>> {
    pem::first_certificate(pem.as_bytes()).ok().map(|der| der.to_vec())
}

/// How long a replica may serve another certificate than the Secret's before it stops being
/// ready: the files are reloaded every few seconds, so only a replica that missed the change
/// (a stuck mirror, an unwritable directory) stays behind that long. Rotation keeps the old CA
/// trusted far longer, so requests never fail in between.
pub const STALE_GRACE: Duration = Duration::from_secs(30);
/// A certificate expiring within this is not served by a ready replica: the leader rotates
/// with a third of the validity left, so only a broken rotation (or files nobody renews)
/// gets here, and traffic should go to a replica that does better.
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(3600);

/// The readiness check of the serving certificate: not expiring within [`EXPIRY_MARGIN`], and
/// (self-managed, when `secret` is given) the Secret's current one, give or take
/// [`STALE_GRACE`].
pub fn serving_check(
    served: Arc<crate::certs::serving::ReloadingCert>,
    secret: Option<SecretCertificate>,
) -> impl Fn() -> bool + Send + Sync + 'static {
    serving_check_with(served, secret, STALE_GRACE)
}

fn serving_check_with(
    served: Arc<crate::certs::serving::ReloadingCert>,
    secret: Option<SecretCertificate>,
    grace: Duration,
) -> impl Fn() -> bool + Send + Sync + 'static {
    move || {
        let current = served.current();
        let Some(der) = current.cert.first() else { return false };
        let fresh = x509_parser::parse_x509_certificate(der).is_ok_and(|(_, certificate)| {
            let not_after = certificate.validity().not_after.to_datetime();
            not_after - OffsetDateTime::now_utc() > EXPIRY_MARGIN
        });
        let current_in_secret = secret
            .as_ref()
            .and_then(|secret| secret.differs_from(der))
            .is_none_or(|behind_for| behind_for < grace);
        fresh && current_in_secret
    }
}

/// Every replica, after [`bootstrap_files`]: rewrites the files in `dir` whenever the Secret
/// changes (e.g. after the leader rotated it), and records what it holds in `seen`. Runs until
/// dropped: watch errors are retried with backoff, a failed write is retried, a deleted Secret
/// leaves the last certificate in place until the leader recreates it.
pub async fn mirror_secret(
    client: Client,
    namespace: String,
    dir: std::path::PathBuf,
    mut written: CertMaterial,
    seen: SecretCertificate,
) {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};

    /// Between attempts to write files that could not be written.
    const WRITE_RETRY: Duration = Duration::from_secs(5);

    seen.observe(&written);
    let secrets: Api<Secret> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={WEBHOOK_SECRET}"));
    let watch = || watcher(secrets.clone(), config.clone()).default_backoff();
    let mut events = std::pin::pin!(watch());
    let mut unwritten: Option<CertMaterial> = None;
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            () = tokio::time::sleep(WRITE_RETRY), if unwritten.is_some() => {
                if let Some(material) = unwritten.take() {
                    unwritten = mirror_one(&dir, material, &mut written);
                }
                continue;
            }
        };
        match event {
            Some(Ok(watcher::Event::Apply(secret) | watcher::Event::InitApply(secret))) => {
                match CertMaterial::from_secret(&secret).and_then(usable) {
                    Ok(material) => {
                        seen.observe(&material);
                        unwritten = mirror_one(&dir, material, &mut written);
                    }
                    Err(error) => tracing::error!(%error, "ignoring an unusable webhook certificate Secret"),
                }
            }
            Some(Ok(watcher::Event::Delete(_))) => tracing::warn!(
                secret = WEBHOOK_SECRET,
                "the certificate Secret was deleted: serving the last certificate until the leader recreates it"
            ),
            Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => {}
            // The watcher backs off before its next attempt; this loop never gives up.
            Some(Err(error)) => {
                tracing::warn!(error = %crate::ops::logging::readable(&error), secret = WEBHOOK_SECRET, "watching the certificate Secret failed; retrying")
            }
            None => {
                tracing::warn!(
                    secret = WEBHOOK_SECRET,
                    "the watch of the certificate Secret ended; watching again"
                );
                events.set(watch());
            }
        }
    }
}

/// Writes `material` unless it is what was written last; returns it when writing failed, to be
/// tried again.
fn mirror_one(
    dir: &std::path::Path,
    material: CertMaterial,
    written: &mut CertMaterial,
) -> Option<CertMaterial> {
    if material == *written {
        return None;
    }
    match write_material(dir, &material) {
        Ok(()) => {
            info!(secret = WEBHOOK_SECRET, dir = %dir.display(), "the webhook certificate Secret changed; wrote the new files");
            *written = material;
            None
        }
        Err(error) => {
            tracing::error!(%error, dir = %dir.display(), "writing the webhook certificate failed; retrying");
            Some(material)
        }
    }
}

/// `material` when its certificate and key form a pair rustls can serve.
fn usable(material: CertMaterial) -> Result<CertMaterial, CertError> {
    let paths = crate::certs::serving::CertPaths::in_dir(std::path::Path::new(WEBHOOK_SECRET));
    crate::certs::serving::certified_key(material.cert_pem.as_bytes(), material.key_pem.as_bytes(), &paths)
        .map_err(|e| CertError::Parse(e.to_string()))?;
    Ok(material)
}

fn write_material(dir: &std::path::Path, material: &CertMaterial) -> Result<(), CertError> {
    let files = GeneratedCerts {
        ca_pem: material.ca_bundle.clone(),
        cert_pem: material.cert_pem.clone(),
        key_pem: material.key_pem.clone(),
    };
    crate::certs::serving::write(dir, &files, true)
        .map(|_| ())
        .map_err(|e| CertError::Generate(e.to_string()))
}

/// The leader: every `interval`, keeps the webhook configurations' `caBundle` equal to the
/// Secret's and rotates the certificates when due. Errors are logged and retried next round.
pub async fn maintain(
    client: Client,
    namespace: String,
    options: CertOptions,
    interval: std::time::Duration,
) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    loop {
        let round = async {
            rotate_if_due(&client, &namespace, &options, OffsetDateTime::now_utc()).await?;
            let material = CertMaterial::from_secret(&secrets.get(WEBHOOK_SECRET).await?)?;
            ensure_ca_bundle(&client, &material.ca_bundle).await
        };
        if let Err(error) = round.await {
            tracing::warn!(%error, kind = error.metric_label(), "webhook certificate maintenance failed; retrying");
        }
        tokio::time::sleep(interval).await;
    }
}

/// Keeps the expiry metric current from the serving certificate file, in any mode.
pub async fn report_expiry(
    cert_file: std::path::PathBuf,
    metrics: crate::ops::metrics::Metrics,
    interval: std::time::Duration,
) {
    loop {
        match std::fs::read_to_string(&cert_file)
            .map_err(|e| CertError::Parse(e.to_string()))
            .and_then(|pem| validity(&pem))
        {
            Ok(validity) => metrics.set_certificate_expiry(validity.seconds_left(OffsetDateTime::now_utc())),
            Err(error) => {
                tracing::debug!(%error, file = %cert_file.display(), "no certificate to report the expiry of yet")
            }
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use http::{Method, StatusCode};
    use serde_json::Value;

    use super::*;
    use envoy_operator_testkit::mock::{expect, mock, not_found};

    fn options(days: u32) -> CertOptions {
        CertOptions {
            service_name: "envoy-operator-webhook".into(),
            namespace: "envoy-operator".into(),
            days,
            extra_names: Vec::new(),
        }
    }

    fn conflict() -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "AlreadyExists", "code": 409, "message": "already exists"})
    }

    const SECRET_PATH: &str = "/api/v1/namespaces/envoy-operator/secrets/envoy-operator-webhook-tls";
    const SECRETS_PATH: &str = "/api/v1/namespaces/envoy-operator/secrets";
    const MUTATING_PATH: &str =
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/envoy-operator";
    const VALIDATING_PATH: &str =
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/envoy-operator";

    fn secret_json(material: &CertMaterial) -> Value {
        let mut secret = serde_json::to_value(material.to_secret("envoy-operator")).unwrap();
        secret["metadata"]["resourceVersion"] = json!("41");
        secret
    }

    #[test]
    fn a_certificate_is_checked_for_the_names_it_must_serve() {
        let old = generate(&options(30)).unwrap();
        let mut upgraded = options(30);
        upgraded.extra_names = vec!["envoy-operator-xds.envoy-operator.svc".to_owned()];
        assert_eq!(
            old.missing_names(&upgraded.service_names()).unwrap(),
            ["envoy-operator-xds.envoy-operator.svc"]
        );
        let fresh = generate(&upgraded).unwrap();
        assert_eq!(fresh.missing_names(&upgraded.service_names()).unwrap(), Vec::<String>::new());
        let local = crate::certs::serving::generate(&options(30)).unwrap();
        let local = CertMaterial::from_generated(local);
        assert_eq!(
            local.missing_names(&["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap(),
            Vec::<String>::new()
        );
    }

    #[tokio::test]
    async fn creates_the_secret_when_absent() {
        let (client, mut handle) = mock();
        let task = tokio::spawn(async move { ensure_secret(&client, "envoy-operator", &options(365)).await });
        expect(&mut handle, Method::GET, SECRET_PATH, StatusCode::NOT_FOUND, not_found()).await;
        let created = expect(&mut handle, Method::POST, SECRETS_PATH, StatusCode::CREATED, json!({})).await;
        assert_eq!(created["type"], "kubernetes.io/tls");
        assert_eq!(created["metadata"]["name"], WEBHOOK_SECRET);
        let material = task.await.unwrap().expect("the secret is ensured");
        let stored: Secret = serde_json::from_value(created).unwrap();
        assert_eq!(
            CertMaterial::from_secret(&stored).unwrap(),
            material,
            "what was created is what is served"
        );
    }

    #[tokio::test]
    async fn losing_the_creation_race_adopts_the_winner() {
        let winner = CertMaterial::from_generated(crate::certs::serving::generate(&options(365)).unwrap());
        let (client, mut handle) = mock();
        let task = tokio::spawn(async move { ensure_secret(&client, "envoy-operator", &options(365)).await });
        expect(&mut handle, Method::GET, SECRET_PATH, StatusCode::NOT_FOUND, not_found()).await;
        expect(&mut handle, Method::POST, SECRETS_PATH, StatusCode::CONFLICT, conflict()).await;
        expect(&mut handle, Method::GET, SECRET_PATH, StatusCode::OK, secret_json(&winner)).await;
        assert_eq!(task.await.unwrap().unwrap(), winner);
    }

    #[tokio::test]
    async fn an_existing_secret_is_used_without_writes() {
        let existing = CertMaterial::from_generated(crate::certs::serving::generate(&options(365)).unwrap());
        let (client, mut handle) = mock();
        let task = tokio::spawn(async move { ensure_secret(&client, "envoy-operator", &options(365)).await });
        expect(&mut handle, Method::GET, SECRET_PATH, StatusCode::OK, secret_json(&existing)).await;
        assert_eq!(task.await.unwrap().unwrap(), existing);
        assert!(handle.next_request().await.is_none(), "no further request");
    }

    fn configuration(kind: &str, bundles: &[&str]) -> Value {
        let webhooks: Vec<Value> = bundles
            .iter()
            .enumerate()
            .map(|(i, bundle)| {
                let mut client_config =
                    json!({"service": {"namespace": "envoy-operator", "name": "envoy-operator-webhook"}});
                if !bundle.is_empty() {
                    client_config["caBundle"] =
                        json!(base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bundle));
                }
                json!({"name": format!("w{i}.example.com"), "clientConfig": client_config,
                       "admissionReviewVersions": ["v1"], "sideEffects": "None"})
            })
            .collect();
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
               "metadata": {"name": "envoy-operator", "resourceVersion": "7"}, "webhooks": webhooks})
    }

    #[tokio::test]
    async fn ca_bundle_is_patched_only_where_it_differs() {
        let bundle = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let (client, mut handle) = mock();
        let task = tokio::spawn(async move { ensure_ca_bundle(&client, bundle).await });
        expect(
            &mut handle,
            Method::GET,
            MUTATING_PATH,
            StatusCode::OK,
            configuration("MutatingWebhookConfiguration", &["", bundle]),
        )
        .await;
        let patch = expect(
            &mut handle,
            Method::PATCH,
            MUTATING_PATH,
            StatusCode::OK,
            configuration("MutatingWebhookConfiguration", &[bundle, bundle]),
        )
        .await;
        let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bundle);
        assert_eq!(
            patch,
            json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                   {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": encoded},
                   {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": encoded}])
        );
        expect(
            &mut handle,
            Method::GET,
            VALIDATING_PATH,
            StatusCode::OK,
            configuration("ValidatingWebhookConfiguration", &[bundle]),
        )
        .await;
        assert_eq!(task.await.unwrap().unwrap(), 1, "only the mutating configuration needed a patch");
    }

    #[tokio::test]
    async fn rotation_trusts_the_new_ca_before_serving_it() {
        // Three days of validity, looked at two and a half days later: under a third is left.
        let old = CertMaterial::from_generated(crate::certs::serving::generate(&options(3)).unwrap());
        let later = OffsetDateTime::now_utc() + time::Duration::hours(60);
        let (client, mut handle) = mock();
        let task =
            tokio::spawn(async move { rotate_if_due(&client, "envoy-operator", &options(365), later).await });
        expect(&mut handle, Method::GET, SECRET_PATH, StatusCode::OK, secret_json(&old)).await;
        expect(
            &mut handle,
            Method::GET,
            MUTATING_PATH,
            StatusCode::OK,
            configuration("MutatingWebhookConfiguration", &[&old.ca_bundle]),
        )
        .await;
        let patch = expect(&mut handle, Method::PATCH, MUTATING_PATH, StatusCode::OK, json!({})).await;
        let trusted = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            patch[1]["value"].as_str().unwrap(),
        )
        .unwrap();
        let trusted = String::from_utf8(trusted).unwrap();
        assert_eq!(bundle_blocks(&trusted).len(), 2, "old and new CA are trusted during the overlap");
        assert!(trusted.contains(old.ca_bundle.trim()));
        expect(&mut handle, Method::GET, VALIDATING_PATH, StatusCode::NOT_FOUND, not_found()).await;
        let replaced = expect(&mut handle, Method::PUT, SECRET_PATH, StatusCode::OK, json!({})).await;
        assert_eq!(
            replaced["metadata"]["resourceVersion"], "41",
            "the update is guarded by the version read"
        );

        let rotated = task.await.unwrap().unwrap().expect("rotated");
        assert_ne!(rotated.cert_pem, old.cert_pem);
        let blocks = bundle_blocks(&rotated.ca_bundle);
        assert_eq!(blocks.len(), 2, "the new CA, then the old one while it is valid");
        assert_eq!(blocks[1].0.trim(), old.ca_bundle.trim());
        assert!(!rotated.validity().unwrap().needs_rotation(OffsetDateTime::now_utc()));
    }

    #[tokio::test]
    async fn a_fresh_certificate_is_not_rotated() {
        let current = CertMaterial::from_generated(crate::certs::serving::generate(&options(365)).unwrap());
        let (client, mut handle) = mock();
        let task = tokio::spawn(async move {
            rotate_if_due(&client, "envoy-operator", &options(365), OffsetDateTime::now_utc()).await
        });
        expect(&mut handle, Method::GET, SECRET_PATH, StatusCode::OK, secret_json(&current)).await;
        assert_eq!(task.await.unwrap().unwrap(), None);
    }

    #[test]
    fn mirrored_material_is_what_the_server_loads() {
        let dir = tempfile::tempdir().unwrap();
        let first = CertMaterial::from_generated(crate::certs::serving::generate(&options(30)).unwrap());
        write_material(dir.path(), &first).unwrap();
        let served =
            crate::certs::serving::ReloadingCert::load(crate::certs::serving::CertPaths::in_dir(dir.path()))
                .unwrap();
        let second = CertMaterial::from_generated(crate::certs::serving::generate(&options(30)).unwrap());
        write_material(dir.path(), &second).unwrap();
        assert!(served.reload_if_changed().unwrap(), "a rewritten Secret is picked up by the file poller");
        assert_eq!(std::fs::read_to_string(dir.path().join("ca.crt")).unwrap(), second.ca_bundle);
    }

    #[tokio::test]
    async fn a_missing_secret_is_recreated_trusting_the_old_ca_too() {
        let old = CertMaterial::from_generated(crate::certs::serving::generate(&options(30)).unwrap());
        let old_ca = old.ca_bundle.clone();
        let (client, mut handle) = mock();
        let now = OffsetDateTime::now_utc();
        let task =
            tokio::spawn(async move { rotate_if_due(&client, "envoy-operator", &options(365), now).await });
        expect(&mut handle, Method::GET, SECRET_PATH, StatusCode::NOT_FOUND, not_found()).await;
        let trusting_old = configuration("MutatingWebhookConfiguration", &[&old_ca]);
        expect(&mut handle, Method::GET, MUTATING_PATH, StatusCode::OK, trusting_old.clone()).await;
        expect(&mut handle, Method::GET, MUTATING_PATH, StatusCode::OK, trusting_old).await;
        let patch = expect(&mut handle, Method::PATCH, MUTATING_PATH, StatusCode::OK, json!({})).await;
        expect(&mut handle, Method::GET, VALIDATING_PATH, StatusCode::NOT_FOUND, not_found()).await;
        let created = expect(&mut handle, Method::POST, SECRETS_PATH, StatusCode::CREATED, json!({})).await;
        let recreated = task.await.unwrap().unwrap().expect("recreated");

        let trusted = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            patch[1]["value"].as_str().unwrap(),
        )
        .unwrap();
        let trusted = String::from_utf8(trusted).unwrap();
        assert!(trusted.contains(old_ca.trim()), "the CA replicas serve under now stays trusted");
        assert_eq!(bundle_blocks(&trusted).len(), 2);
        let stored = CertMaterial::from_secret(&serde_json::from_value(created).unwrap()).unwrap();
        assert_eq!(stored, recreated);
        let blocks = bundle_blocks(&stored.ca_bundle);
        assert_eq!(blocks.len(), 2, "the new CA, then the old one");
        assert_eq!(blocks[1].0.trim(), old_ca.trim());
        assert_ne!(stored.cert_pem, old.cert_pem);
    }

    #[tokio::test]
    async fn the_mirror_keeps_watching_after_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let first = CertMaterial::from_generated(crate::certs::serving::generate(&options(30)).unwrap());
        write_material(dir.path(), &first).unwrap();
        let served =
            crate::certs::serving::ReloadingCert::load(crate::certs::serving::CertPaths::in_dir(dir.path()))
                .unwrap();
        let seen = SecretCertificate::default();
        let ready = serving_check_with(served.clone(), Some(seen.clone()), Duration::ZERO);

        let (client, mut handle) = mock();
        let mirror = tokio::spawn(mirror_secret(
            client,
            "envoy-operator".to_owned(),
            dir.path().to_owned(),
            first.clone(),
            seen.clone(),
        ));
        assert!(ready(), "serving what the Secret holds");
        // The first list fails; the old mirror stopped here for good.
        let failure = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500, "reason": "InternalError", "message": "etcd is down"});
        expect(&mut handle, Method::GET, SECRETS_PATH, StatusCode::INTERNAL_SERVER_ERROR, failure).await;
        // After its backoff, the watcher lists again and finds a rotated Secret.
        let rotated = CertMaterial::from_generated(crate::certs::serving::generate(&options(30)).unwrap());
        let list = json!({"apiVersion": "v1", "kind": "SecretList", "metadata": {"resourceVersion": "42"},
                          "items": [secret_json(&rotated)]});
        expect(&mut handle, Method::GET, SECRETS_PATH, StatusCode::OK, list).await;
        // The watch that follows stays open, answering nothing.
        let (_watch, _pending) = tokio::time::timeout(Duration::from_secs(10), handle.next_request())
            .await
            .expect("the watch starts")
            .expect("the client is alive");

        assert_eq!(std::fs::read_to_string(dir.path().join("tls.crt")).unwrap(), rotated.cert_pem);
        assert!(!ready(), "serving an older certificate than the Secret's");
        assert!(served.reload_if_changed().unwrap());
        assert!(ready(), "serving the Secret's again");
        mirror.abort();
    }

    /// A self-signed certificate and key valid until `not_after`.
    fn self_signed(not_after: OffsetDateTime) -> (String, String) {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["hook.ops.svc".to_owned()]).unwrap();
        params.not_before = OffsetDateTime::now_utc() - time::Duration::hours(1);
        params.not_after = not_after;
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    #[test]
    fn a_certificate_near_its_expiry_is_not_ready() {
        let check = |not_after| {
            let dir = tempfile::tempdir().unwrap();
            let (cert_pem, key_pem) = self_signed(not_after);
            write_material(dir.path(), &CertMaterial { ca_bundle: cert_pem.clone(), cert_pem, key_pem })
                .unwrap();
            let served = crate::certs::serving::ReloadingCert::load(
                crate::certs::serving::CertPaths::in_dir(dir.path()),
            )
            .unwrap();
            serving_check(served, None)()
        };
        let now = OffsetDateTime::now_utc();
        assert!(check(now + time::Duration::days(1)));
        assert!(!check(now + time::Duration::minutes(30)), "expires within the margin");
        assert!(!check(now - time::Duration::minutes(1)), "expired");
    }

    #[test]
    fn rotation_starts_with_a_third_of_the_validity_left() {
        let start = OffsetDateTime::UNIX_EPOCH;
        let validity = Validity { not_before: start, not_after: start + time::Duration::days(90) };
        assert!(!validity.needs_rotation(start + time::Duration::days(59)));
        assert!(validity.needs_rotation(start + time::Duration::days(61)));
        assert!(validity.needs_rotation(start + time::Duration::days(100)), "expired certificates rotate");
        assert_eq!(validity.seconds_left(start + time::Duration::days(89)), 86_400);
    }

    #[test]
    fn rotated_bundles_drop_expired_and_older_cas() {
        let first = crate::certs::serving::generate(&options(1)).unwrap().ca_pem;
        let second = crate::certs::serving::generate(&options(30)).unwrap().ca_pem;
        let third = crate::certs::serving::generate(&options(30)).unwrap().ca_pem;
        let now = OffsetDateTime::now_utc();
        let after_one = rotated_bundle(&second, &first, now);
        assert_eq!(bundle_blocks(&after_one).len(), 2);
        let after_two = rotated_bundle(&third, &after_one, now);
        let blocks = bundle_blocks(&after_two);
        assert_eq!(blocks.len(), 2, "only the previous CA is kept");
        assert_eq!(blocks[1].0.trim(), second.trim());
        let much_later = now + time::Duration::days(3);
        assert_eq!(
            bundle_blocks(&rotated_bundle(&second, &first, much_later)).len(),
            1,
            "an expired CA is dropped"
        );
    }
}
