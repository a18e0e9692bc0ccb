//! HTTPS: a listener's TLS servers as Envoy's filter chains are chosen (by SNI), the
//! certificates each presents (SDS over the ADS stream, by name) and the secrets themselves.
//!
//! Envoy refuses a whole listener whose chains have identical match criteria, and keeps
//! warming one whose certificate never comes; the IR promises neither happens, but a broken
//! promise here would cost the fleet every update, so both are made impossible: of servers with
//! the same name to serve (or the same name), the first (in the IR's order, by name) is kept;
//! certificates the fleet does not have are left out, and a server left without any is dropped.

use std::borrow::Cow;
use std::collections::BTreeSet;

use crate::envoy::{
    CommonTlsContext, DownstreamTlsContext, FilterChainMatch, SdsSecretConfig, Secret, TransportSocket,
};
use crate::ir;

/// What a TLS server offers by ALPN: HTTP/2, else HTTP/1.1 (the connection manager speaks
/// whichever the client chose).
pub const ALPN_PROTOCOLS: [&str; 2] = ["h2", "http/1.1"];

/// The route configuration of a listener's TLS server. Listener and server names are DNS
/// labels (no `/`), so it cannot be another listener's.
pub fn route_configuration_name(listener: &str, server: &str) -> String {
    format!("{listener}/{server}")
}

/// The listener's TLS servers that get a filter chain: each server name to serve once, and each
/// server's name (its chain's, and its route configuration's) once.
pub fn distinct_servers(listener: &ir::Listener) -> impl Iterator<Item = &ir::TlsServer> {
    let (mut names, mut server_names) = (BTreeSet::new(), BTreeSet::new());
    listener.tls_servers.iter().filter(move |server| {
        let unseen = !names.contains(&server.name) && !server_names.contains(&server.server_name);
        if unseen {
            names.insert(&server.name);
            server_names.insert(&server.server_name);
        }
        unseen
    })
}

/// Which connections a server's chain takes: those asking for its name; for
/// [`ir::Domain::Any`], every other one (no criteria: the chain Envoy falls back to).
pub fn filter_chain_match(server: &ir::TlsServer) -> Option<FilterChainMatch> {
    match &server.server_name {
        ir::Domain::Any => None,
        name => {
            Some(FilterChainMatch { server_names: vec![name.to_string()], ..FilterChainMatch::default() })
        }
    }
}

/// TLS terminated with the server's certificates, delivered by SDS over the ADS stream.
pub fn downstream_tls(server: &ir::TlsServer) -> TransportSocket<DownstreamTlsContext> {
    TransportSocket::downstream_tls(DownstreamTlsContext {
        common_tls_context: CommonTlsContext {
            alpn_protocols: ALPN_PROTOCOLS.iter().map(|protocol| (*protocol).to_owned()).collect(),
            tls_certificate_sds_secret_configs: server
                .certificates
                .iter()
                .map(|name| SdsSecretConfig::ads(name.clone()))
                .collect(),
            validation_context_sds_secret_config: None,
        },
    })
}

/// A certificate and its key, as the SDS resource its name refers to.
pub fn secret(secret: &ir::TlsSecret) -> Secret {
    Secret::tls_certificate(secret.name.clone(), &secret.certificate_chain, &secret.private_key)
}

/// The listener as it can be served with the fleet's `secrets` (names): unchanged (borrowed)
/// when every certificate its servers name is there; else without the missing ones, and
/// without servers left with none. `None`: a TLS listener none of whose servers can be served
/// (left out rather than turned into plain HTTP).
pub fn servable<'a>(listener: &'a ir::Listener, secrets: &BTreeSet<&str>) -> Option<Cow<'a, ir::Listener>> {
    let known =
        |server: &ir::TlsServer| server.certificates.iter().all(|name| secrets.contains(name.as_str()));
    if listener.tls_servers.iter().all(known) {
        return Some(Cow::Borrowed(listener));
    }
    let tls_servers: Vec<ir::TlsServer> = listener
        .tls_servers
        .iter()
        .filter_map(|server| {
            let certificates: Vec<String> =
                server.certificates.iter().filter(|name| secrets.contains(name.as_str())).cloned().collect();
            (!certificates.is_empty()).then(|| ir::TlsServer { certificates, ..server.clone() })
        })
        .collect();
    (!tls_servers.is_empty()).then(|| Cow::Owned(ir::Listener { tls_servers, ..listener.clone() }))
}
