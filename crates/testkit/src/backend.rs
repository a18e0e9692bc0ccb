//! Tiny HTTP/1.1 servers that answer every request with their own name.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub struct Backend {
    pub name: String,
    pub address: SocketAddr,
    task: JoinHandle<()>,
}

impl Backend {
    pub async fn start(name: &str) -> Backend {
        Self::start_on(name, std::net::IpAddr::from([127, 0, 0, 1])).await
    }

    /// A backend on `host` (any free port): an address an EndpointSlice may name must not be
    /// loopback.
    pub async fn start_on(name: &str, host: std::net::IpAddr) -> Backend {
        let listener = TcpListener::bind((host, 0)).await.expect("a port for a backend");
        let address = listener.local_addr().expect("the backend's address");
        let body = Bytes::from(name.to_string());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let body = body.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |_: Request<hyper::body::Incoming>| {
                        let body = body.clone();
                        async move { Ok::<_, Infallible>(Response::new(Full::new(body))) }
                    });
                    // A client going away mid-request is no failure of the backend.
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Backend { name: name.to_string(), address, task }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}
