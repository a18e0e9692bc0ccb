//! The admission webhook, tested in tiers: the pure handlers on golden AdmissionReviews
//! captured from kube-apiserver, the router in-process, and a real TLS server on loopback.

mod cli;
mod common;
mod config;
mod connections;
mod handler;
mod inject;
mod props;
mod router;
mod run;
mod tls;
