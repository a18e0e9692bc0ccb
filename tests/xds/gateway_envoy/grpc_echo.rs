//! The gRPC side of the GRPCRoute tests: an echo backend and a client, after the conformance
//! suite's (`conformance/echo-basic/grpcecho.proto`, package
//! `gateway_api_conformance.echo_basic.grpcecho`): `GrpcEcho` with `Echo` and `EchoTwo`, which
//! answer with the backend's name (`context.pod`), the method called, the `:authority` and the
//! request's headers, and `EchoThree`, unimplemented. The messages are the proto's, derived
//! (no code generation); the backend speaks HTTP/2 only (prior knowledge, no upgrade), so an
//! answer from it proves the proxy spoke h2c to it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::metadata::{AsciiMetadataValue, MetadataKey};
use tonic::server::{Grpc, UnaryService};
use tonic::transport::{Endpoint, Uri};
use tonic::{Code, Status};
use tonic_prost::ProstCodec;

use envoy_operator_testkit::fleet_world::{NS, at};

/// The service of the suite's echo server.
pub const SERVICE: &str = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho";

/// How long one call may take.
const PATIENCE: Duration = Duration::from_secs(5);

#[derive(Clone, PartialEq, prost::Message)]
pub struct EchoRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Header {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Context {
    #[prost(string, tag = "1")]
    pub namespace: String,
    #[prost(string, tag = "2")]
    pub ingress: String,
    #[prost(string, tag = "3")]
    pub service_name: String,
    #[prost(string, tag = "4")]
    pub pod: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Assertions {
    #[prost(string, tag = "1")]
    pub fully_qualified_method: String,
    #[prost(message, repeated, tag = "2")]
    pub headers: Vec<Header>,
    #[prost(string, tag = "3")]
    pub authority: String,
    #[prost(message, optional, tag = "4")]
    pub context: Option<Context>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct EchoResponse {
    #[prost(message, optional, tag = "1")]
    pub assertions: Option<Assertions>,
    #[prost(message, optional, tag = "2")]
    pub request: Option<EchoRequest>,
}

/// A running echo backend: its name (its "pod") and address.
pub struct GrpcBackend {
    pub name: String,
    pub address: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for GrpcBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl GrpcBackend {
    pub async fn start(name: &str) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("a port for a gRPC backend");
        let address = listener.local_addr().expect("the backend's address");
        let own_name = name.to_owned();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let name = own_name.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let name = name.clone();
                        async move { Ok::<_, Infallible>(serve(&name, request).await) }
                    });
                    // A client going away mid-call is no failure of the backend.
                    let _ = http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        GrpcBackend { name: name.to_owned(), address, task }
    }

    /// Its Service (port 80, `appProtocol` not set: the route kind says gRPC) and EndpointSlice
    /// in [`NS`], as objects for `GatewayWorld::start`.
    pub fn objects(&self) -> [(String, Value); 2] {
        let name = &self.name;
        [
            (
                at("v1", "services", name),
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
                       "spec": {"ports": [{"name": "grpc", "port": 80, "targetPort": "grpc"}]}}),
            ),
            (
                at("discovery.k8s.io/v1", "endpointslices", &format!("{name}-1")),
                json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                       "metadata": {"name": format!("{name}-1"), "namespace": NS,
                                    "labels": {"kubernetes.io/service-name": name}},
                       "addressType": "IPv4",
                       "ports": [{"name": "grpc", "port": self.address.port(), "protocol": "TCP"}],
                       "endpoints": [{"addresses": [self.address.ip().to_string()], "conditions": {"ready": true}}]}),
            ),
        ]
    }
}

/// One call: `Echo` and `EchoTwo` echo, anything else is `UNIMPLEMENTED` (as `EchoThree`).
async fn serve(
    name: &str,
    request: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<tonic::body::Body> {
    let path = request.uri().path().to_owned();
    let implemented = [format!("/{SERVICE}/Echo"), format!("/{SERVICE}/EchoTwo")];
    if !implemented.contains(&path) {
        return Status::unimplemented(format!("{path} is not implemented")).into_http();
    }
    let echo = Echo {
        name: name.to_owned(),
        method: path,
        authority: request.uri().authority().map(ToString::to_string).unwrap_or_default(),
    };
    Grpc::new(ProstCodec::<EchoResponse, EchoRequest>::default()).unary(echo, request).await
}

struct Echo {
    name: String,
    method: String,
    authority: String,
}

impl UnaryService<EchoRequest> for Echo {
    type Response = EchoResponse;
    type Future = std::future::Ready<Result<tonic::Response<EchoResponse>, Status>>;

    fn call(&mut self, request: tonic::Request<EchoRequest>) -> Self::Future {
        let headers = request
            .metadata()
            .clone()
            .into_headers()
            .iter()
            .map(|(key, value)| Header {
                key: key.as_str().to_owned(),
                value: value.to_str().unwrap_or_default().to_owned(),
            })
            .collect();
        let response = EchoResponse {
            assertions: Some(Assertions {
                fully_qualified_method: self.method.clone(),
                headers,
                authority: self.authority.clone(),
                context: Some(Context {
                    namespace: NS.to_owned(),
                    ingress: String::new(),
                    service_name: self.name.clone(),
                    pod: self.name.clone(),
                }),
            }),
            request: Some(EchoRequest {}),
        };
        std::future::ready(Ok(tonic::Response::new(response)))
    }
}

/// What a call through the proxy was answered with: the status code, and the echo when OK.
#[derive(Clone, Debug)]
pub struct Reply {
    pub code: Code,
    pub echo: Option<EchoResponse>,
}

impl Reply {
    /// The backend that answered, when one did.
    pub fn served_by(&self) -> Option<&str> {
        let context = self.echo.as_ref()?.assertions.as_ref()?.context.as_ref()?;
        Some(context.pod.as_str())
    }

    /// The values of request header `name` the backend received, in order.
    pub fn header(&self, name: &str) -> Vec<&str> {
        let headers =
            self.echo.as_ref().and_then(|echo| echo.assertions.as_ref()).map(|a| a.headers.as_slice());
        headers.unwrap_or_default().iter().filter(|h| h.key == name).map(|h| h.value.as_str()).collect()
    }
}

/// Calls `method` of [`SERVICE`] through the proxy's `port` on loopback, over h2c with prior
/// knowledge, with `:authority` `authority` and `metadata` (names lowercase). A transport
/// failure (no connection) is `Err`; a gRPC status, whatever its code, is a [`Reply`].
pub async fn call(
    port: u16,
    authority: &str,
    method: &str,
    metadata: &[(&str, &str)],
) -> Result<Reply, String> {
    let origin: Uri =
        format!("http://{authority}").parse().map_err(|e| format!("authority {authority:?}: {e}"))?;
    let endpoint = Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .map_err(|e| e.to_string())?
        .origin(origin)
        .connect_timeout(PATIENCE)
        .timeout(PATIENCE);
    let channel = endpoint.connect().await.map_err(|e| format!("connecting to port {port}: {e}"))?;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.map_err(|e| format!("the channel is not ready: {e}"))?;
    let mut request = tonic::Request::new(EchoRequest {});
    for (name, value) in metadata {
        let key: MetadataKey<_> = name.parse().map_err(|e| format!("metadata name {name:?}: {e}"))?;
        let value: AsciiMetadataValue =
            value.parse().map_err(|e| format!("metadata value {value:?}: {e}"))?;
        request.metadata_mut().append(key, value);
    }
    let path = PathAndQuery::try_from(format!("/{SERVICE}/{method}")).map_err(|e| e.to_string())?;
    let codec = ProstCodec::<EchoRequest, EchoResponse>::default();
    match grpc.unary(request, path, codec).await {
        Ok(response) => Ok(Reply { code: Code::Ok, echo: Some(response.into_inner()) }),
        Err(status) => Ok(Reply { code: status.code(), echo: None }),
    }
}
