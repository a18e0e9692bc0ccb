//! Tiny HTTP/1.1 servers that answer every request with their own name.
//!
//! Two asks change the answer, for tests of what a proxy sends on and of its timeouts (as the
//! Gateway API conformance suite's echo server allows): a request carrying header
//! [`ECHO_HEADER`] is answered with a JSON account of what arrived ([`Echo`]) instead of the
//! name, and one with query parameter `delay` (`500ms`, `1s`; at most [`MAX_DELAY`]) is
//! answered that much later. Requests without either are answered as before.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The request header asking for an [`Echo`] rather than the backend's name (any value).
pub const ECHO_HEADER: &str = "x-echo-request";

/// The longest `delay` a request may ask for: a backend's connection is held no longer.
pub const MAX_DELAY: Duration = Duration::from_secs(10);

/// What a backend received, as it answers a request carrying [`ECHO_HEADER`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Echo {
    /// The backend's name.
    pub name: String,
    pub method: String,
    /// The request target: path and query.
    pub path: String,
    /// The `Host` header, if any.
    pub host: Option<String>,
    /// Each header's values (names in lower case), in the order they came.
    pub headers: BTreeMap<String, Vec<String>>,
}

impl Echo {
    /// The values of header `name` joined with `,`, as the conformance suite compares them; `None`
    /// when absent.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(&name.to_ascii_lowercase()).map(|values| values.join(","))
    }
}

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
        let own_name = name.to_string();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let name = own_name.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                        let name = name.clone();
                        async move { Ok::<_, Infallible>(answer(&name, request).await) }
                    });
                    // A client going away mid-request is no failure of the backend.
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Backend { name: name.to_string(), address, task }
    }
}

/// The answer of backend `name` to `request`, after the delay it asks for.
async fn answer<B>(name: &str, request: Request<B>) -> Response<Full<Bytes>> {
    match requested_delay(request.uri().query()) {
        Ok(Some(delay)) => tokio::time::sleep(delay).await,
        Ok(None) => {}
        Err(error) => {
            let mut response = Response::new(Full::new(Bytes::from(error)));
            *response.status_mut() = StatusCode::BAD_REQUEST;
            return response;
        }
    }
    if !request.headers().contains_key(ECHO_HEADER) {
        return Response::new(Full::new(Bytes::from(name.to_owned())));
    }
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (header, value) in request.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers.entry(header.as_str().to_owned()).or_default().push(value);
    }
    let echo = Echo {
        name: name.to_owned(),
        method: request.method().to_string(),
        path: request.uri().path_and_query().map_or_else(|| request.uri().to_string(), |p| p.to_string()),
        host: headers.get("host").and_then(|values| values.first().cloned()),
        headers,
    };
    let body = serde_json::to_vec(&echo).expect("an echo serializes");
    Response::new(Full::new(Bytes::from(body)))
}

/// The `delay` a request's `query` asks for: a whole number of `ms` or `s`, at most
/// [`MAX_DELAY`].
fn requested_delay(query: Option<&str>) -> Result<Option<Duration>, String> {
    let Some(value) = query.into_iter().flat_map(|q| q.split('&')).find_map(|p| p.strip_prefix("delay="))
    else {
        return Ok(None);
    };
    let invalid = || format!("delay {value:?}: expected a whole number of ms or s, at most {MAX_DELAY:?}");
    let delay = if let Some(millis) = value.strip_suffix("ms") {
        Duration::from_millis(millis.parse().map_err(|_| invalid())?)
    } else if let Some(seconds) = value.strip_suffix('s') {
        Duration::from_secs(seconds.parse().map_err(|_| invalid())?)
    } else {
        return Err(invalid());
    };
    if delay > MAX_DELAY { Err(invalid()) } else { Ok(Some(delay)) }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_is_read_from_the_query_and_bounded() {
        assert_eq!(requested_delay(None), Ok(None));
        assert_eq!(requested_delay(Some("animal=whale")), Ok(None));
        assert_eq!(requested_delay(Some("delay=1s")), Ok(Some(Duration::from_secs(1))));
        assert_eq!(requested_delay(Some("a=b&delay=250ms")), Ok(Some(Duration::from_millis(250))));
        for bad in ["delay=11s", "delay=1m", "delay=", "delay=-1s", "delay=1.5s"] {
            assert!(requested_delay(Some(bad)).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn an_echo_reports_the_request_and_a_plain_request_gets_the_name() {
        let plain = Request::builder().uri("/x?y=1").body(()).unwrap();
        let body = http_body_util::BodyExt::collect(answer("v1", plain).await.into_body()).await.unwrap();
        assert_eq!(body.to_bytes(), "v1");

        let echoed = Request::builder()
            .uri("/x?y=1")
            .header("host", "example.org")
            .header(ECHO_HEADER, "1")
            .header("x-a", "1")
            .header("x-a", "2")
            .body(())
            .unwrap();
        let body = http_body_util::BodyExt::collect(answer("v1", echoed).await.into_body()).await.unwrap();
        let echo: Echo = serde_json::from_slice(&body.to_bytes()).unwrap();
        assert_eq!((echo.name.as_str(), echo.method.as_str(), echo.path.as_str()), ("v1", "GET", "/x?y=1"));
        assert_eq!(echo.host.as_deref(), Some("example.org"));
        assert_eq!(echo.header("X-A").as_deref(), Some("1,2"));
        assert_eq!(echo.header("x-absent"), None);
    }
}
