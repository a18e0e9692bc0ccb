//! What a TLS connection (`vendor/rustls`) holds to read its peer's records while the peer
//! sends nothing: no buffer. Unpatched, rustls keeps a 4 KiB read buffer for the connection's
//! life, empty whenever the peer is quiet, and an xDS connection is quiet nearly all its life.
//! Measured with dhat's heap statistics around the read that finds nothing to read; and what
//! was read of a record in part is kept across such reads.
//!
//! Its own test binary: dhat counts every allocation of the process, and one test at a time.

use std::io::{self, Read, Write};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// A socket with nothing to read yet.
struct WouldBlock;

impl Read for WouldBlock {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
}

#[test]
fn a_connection_whose_peer_is_quiet_holds_no_read_buffer_and_keeps_a_record_in_part() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let (mut client, mut server) = connected_pair();

    // A record read whole, then a read that finds nothing: what the server holds at rest.
    send(&mut client, &mut server, b"first request");
    assert_eq!(plaintext(&mut server), b"first request");
    let before = dhat::HeapStats::get().curr_bytes;
    let quiet = server.read_tls(&mut WouldBlock).expect_err("nothing to read");
    assert_eq!(quiet.kind(), io::ErrorKind::WouldBlock);
    let after = dhat::HeapStats::get().curr_bytes;
    println!("a quiet peer's connection: {before} -> {after} bytes of heap");
    assert!(
        before >= after + 4096,
        "the server still holds its read buffer while its peer is quiet: {before} bytes of heap before the read that found nothing, {after} after"
    );

    // A record in part: its first bytes wait, buffered, through a read that finds nothing.
    let mut record = Vec::new();
    client.writer().write_all(b"second request").expect("plaintext");
    client.write_tls(&mut record).expect("a record");
    let (head, tail) = record.split_at(record.len() / 2);
    assert_eq!(server.read_tls(&mut &head[..]).expect("half a record"), head.len());
    server.process_new_packets().expect("half a record is no error");
    let quiet = server.read_tls(&mut WouldBlock).expect_err("nothing to read");
    assert_eq!(quiet.kind(), io::ErrorKind::WouldBlock);
    assert_eq!(server.read_tls(&mut &tail[..]).expect("the rest"), tail.len());
    server.process_new_packets().expect("the whole record");
    assert_eq!(plaintext(&mut server), b"second request", "the record's first half was kept");

    // And the connection reads on after being quiet.
    send(&mut client, &mut server, b"third request");
    assert_eq!(plaintext(&mut server), b"third request");
}

/// A client and a server connection that completed their handshake over in-memory pipes.
fn connected_pair() -> (ClientConnection, ServerConnection) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["xds.example".to_owned()]).expect("a certificate");
    let certificate = CertificateDer::from(certified.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server_config = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![certificate.clone()], key)
        .expect("the server's certificate");
    let mut roots = RootCertStore::empty();
    roots.add(certificate).expect("a root");
    let client_config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut client =
        ClientConnection::new(Arc::new(client_config), "xds.example".try_into().expect("a name"))
            .expect("a client");
    let mut server = ServerConnection::new(Arc::new(server_config)).expect("a server");
    for _ in 0..10 {
        if !client.is_handshaking() && !server.is_handshaking() {
            return (client, server);
        }
        let mut to_server = Vec::new();
        client.write_tls(&mut to_server).expect("client records");
        server.read_tls(&mut &to_server[..]).expect("read by the server");
        server.process_new_packets().expect("the server's handshake");
        let mut to_client = Vec::new();
        server.write_tls(&mut to_client).expect("server records");
        client.read_tls(&mut &to_client[..]).expect("read by the client");
        client.process_new_packets().expect("the client's handshake");
    }
    panic!("the handshake did not complete in 10 round trips");
}

/// Sends `bytes` from the client to the server in one record, read whole.
fn send(client: &mut ClientConnection, server: &mut ServerConnection, bytes: &[u8]) {
    client.writer().write_all(bytes).expect("plaintext");
    let mut record = Vec::new();
    client.write_tls(&mut record).expect("a record");
    assert_eq!(server.read_tls(&mut &record[..]).expect("the record"), record.len());
    server.process_new_packets().expect("the record");
}

/// What the server has received and not read.
fn plaintext(server: &mut ServerConnection) -> Vec<u8> {
    let mut read = Vec::new();
    match server.reader().read_to_end(&mut read) {
        Ok(_) => {}
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
        Err(error) => panic!("reading the plaintext: {error}"),
    }
    read
}
