//! The clients of a Gateway's proxy: one HTTP/1.1 request with the method and Host header a
//! test names (a hyper client takes the Host from the URL), over plain TCP or over TLS with an
//! SNI name of the test's choosing, never following redirects, and what the proxy answered:
//! its status, its `Location`, its body (the backend's name) and, over TLS, the certificate it
//! presented.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, PKCS_ECDSA_P256_SHA256};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// How long one connection, handshake or exchange may take.
const PATIENCE: Duration = Duration::from_secs(5);

/// What the proxy answered one request with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// The `Location` header, if any (a redirect's).
    pub location: Option<String>,
    pub body: String,
}

impl Answer {
    /// The backend that answered, when one did (200).
    pub fn served_by(&self) -> Option<&str> {
        (self.status == 200).then_some(self.body.as_str())
    }
}

/// A GET of `path` with `Host: host` to the proxy's port `port` on loopback.
pub async fn get(port: u16, host: &str, path: &str) -> Result<Answer, String> {
    get_with(port, host, path, &[]).await
}

/// [`get`] with more request `headers`.
pub async fn get_with(port: u16, host: &str, path: &str, headers: &[(&str, &str)]) -> Result<Answer, String> {
    request(port, "GET", host, path, headers).await
}

/// A request of `method` for `path` with `Host: host` and more `headers` to the proxy's port
/// `port` on loopback.
pub async fn request(
    port: u16,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Answer, String> {
    let tcp = connect(port).await?;
    exchange(tcp, method, host, path, headers).await
}

/// A CA the TLS client trusts, and the serving certificates it issues, each as a
/// `kubernetes.io/tls` Secret holds it.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    client: TlsConnector,
}

/// A certificate (DER, for comparing with what was presented) with its chain and key in PEM.
#[derive(Clone)]
pub struct Issued {
    pub der: CertificateDer<'static>,
    pub chain_pem: String,
    pub key_pem: String,
}

impl Authority {
    pub fn new() -> Self {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.distinguished_name.push(DnType::CommonName, "gateway test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        let ca = params.self_signed(&key).expect("a CA certificate");
        let mut roots = RootCertStore::empty();
        roots.add(ca.der().clone()).expect("the CA");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Self { issuer: Issuer::new(params, key), client: TlsConnector::from(Arc::new(config)) }
    }

    /// A serving certificate for `names` (wildcards allowed).
    pub fn issue(&self, names: &[&str]) -> Issued {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("a key");
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let mut params = CertificateParams::new(names.clone()).expect("parameters");
        params.distinguished_name.push(DnType::CommonName, names.join(" "));
        let cert = params.signed_by(&key, &self.issuer).expect("a certificate");
        Issued { der: cert.der().clone(), chain_pem: cert.pem(), key_pem: key.serialize_pem() }
    }

    /// A GET of `path` with `Host: host` over TLS asking for `sni`, checked against this CA:
    /// the certificate presented and the answer.
    pub async fn get(
        &self,
        port: u16,
        sni: &str,
        host: &str,
        path: &str,
    ) -> Result<(CertificateDer<'static>, Answer), String> {
        let tcp = connect(port).await?;
        let name = ServerName::try_from(sni.to_owned()).map_err(|e| format!("SNI {sni}: {e}"))?;
        let stream = tokio::time::timeout(PATIENCE, self.client.connect(name, tcp))
            .await
            .map_err(|_| format!("TLS handshake for {sni}: no answer in {PATIENCE:?}"))?
            .map_err(|error| format!("TLS handshake for {sni}: {error}"))?;
        let leaf = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .ok_or_else(|| format!("TLS for {sni}: no server certificate"))?
            .clone();
        Ok((leaf, exchange(stream, "GET", host, path, &[]).await?))
    }
}

async fn connect(port: u16) -> Result<TcpStream, String> {
    let address = SocketAddr::from((IpAddr::from([127, 0, 0, 1]), port));
    tokio::time::timeout(PATIENCE, TcpStream::connect(address))
        .await
        .map_err(|_| format!("connecting to {address}: no answer in {PATIENCE:?}"))?
        .map_err(|error| format!("connecting to {address}: {error}"))
}

/// One request on its own connection (`connection: close`). The response is read up to its
/// `content-length`, not to the connection's end: Envoy closes the connection of a reply of its
/// own (404, 500) only after its delayed-close timeout (1 s) unless the client closes first.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Answer, String> {
    let what = format!("{method} {host}{path} {headers:?}");
    let extra: String = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {host}\r\n{extra}content-length: 0\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.map_err(|e| format!("{what}: {e}"))?;
    // The reply to a HEAD has a head only, whatever its `content-length` says.
    let head_only = method == "HEAD";
    match tokio::time::timeout(PATIENCE, read_response(&mut stream, head_only)).await {
        Ok(Ok(response)) => parse(&response).map_err(|error| format!("{what}: {error}")),
        Ok(Err(error)) => Err(format!("{what}: {error}")),
        Err(_) => Err(format!("{what}: no answer in {PATIENCE:?}")),
    }
}

/// The response's bytes: up to the end of its head (all of it when `head_only`) plus
/// `content-length`, or to the end of the connection when it has none.
async fn read_response<S: AsyncRead + Unpin>(stream: &mut S, head_only: bool) -> std::io::Result<Vec<u8>> {
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(length) = complete_length(&response, head_only) {
            response.truncate(length);
            return Ok(response);
        }
        match stream.read(&mut chunk).await {
            Ok(0) => return Ok(response),
            Ok(read) => response.extend_from_slice(&chunk[..read]),
            // Envoy closes TLS without close_notify after `connection: close`; what came is enough.
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(response),
            Err(error) => return Err(error),
        }
    }
}

/// The length of the whole response in `bytes`, once its head is in and (unless `head_only`)
/// it has a `content-length`.
fn complete_length(bytes: &[u8], head_only: bool) -> Option<usize> {
    let head_end = bytes.windows(4).position(|window| window == b"\r\n\r\n")? + 4;
    if head_only {
        return Some(head_end);
    }
    let head = String::from_utf8_lossy(&bytes[..head_end]);
    let length: usize = header_value(&head, "content-length")?.parse().ok()?;
    (bytes.len() >= head_end + length).then_some(head_end + length)
}

/// The value of header `name` in a response's `head`, if there.
fn header_value(head: &str, name: &str) -> Option<String> {
    head.lines().skip(1).find_map(|line| {
        let (found, value) = line.split_once(':')?;
        found.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_owned())
    })
}

fn parse(response: &[u8]) -> Result<Answer, String> {
    let text = String::from_utf8_lossy(response);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("no HTTP response: {text:?}"))?;
    let status = head
        .lines()
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no status line: {head:?}"))?;
    Ok(Answer { status, location: header_value(head, "location"), body: body.to_owned() })
}
