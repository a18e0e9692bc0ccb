//! The one address the API server calls an in-process run's webhooks at, as it calls a deployed
//! operator's through its Service: each connection goes to a replica that accepts it. Every
//! replica serves the webhooks, leader or not, so the webhooks outlive any one replica (a
//! stopped or killed one refuses connections and is passed over).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// How long a replica may take to accept a connection before the next one is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A TCP forwarder on a runtime of its own (so it forwards whatever the test's runtime does),
/// stopped when dropped.
pub struct WebhookFront {
    pub address: SocketAddr,
    replicas: Arc<Mutex<Vec<SocketAddr>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for WebhookFront {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookFront")
            .field("address", &self.address)
            .field("replicas", &self.replicas())
            .finish()
    }
}

impl WebhookFront {
    /// Listens on `address` (a free port of the webhook host).
    pub fn start(address: SocketAddr) -> WebhookFront {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("e2e-webhook-front")
            .enable_all()
            .build()
            .expect("a runtime for the webhook front");
        // Bound here, so a failure says so at once; handed to the front's own runtime (the
        // caller may be inside another, where blocking on this one is not allowed).
        let listener = std::net::TcpListener::bind(address)
            .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
            .unwrap_or_else(|error| panic!("binding the webhook front on {address}: {error}"));
        let replicas = Arc::new(Mutex::new(Vec::new()));
        let forwarded = replicas.clone();
        runtime.spawn(async move {
            match TcpListener::from_std(listener) {
                Ok(listener) => forward(listener, forwarded).await,
                Err(error) => eprintln!("the webhook front cannot listen on {address}: {error}"),
            }
        });
        WebhookFront { address, replicas, runtime: Some(runtime) }
    }

    /// A replica's webhook address, from now on a candidate for every connection.
    pub fn add(&self, replica: SocketAddr) {
        let mut replicas = self.replicas.lock().unwrap_or_else(|p| p.into_inner());
        if !replicas.contains(&replica) {
            replicas.push(replica);
        }
    }

    pub fn replicas(&self) -> Vec<SocketAddr> {
        self.replicas.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for WebhookFront {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is not allowed inside the test's runtime.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Passes each connection to the replicas in turn, starting one further each time (as a
/// Service spreads them), to the first that accepts; with none, the connection is closed.
async fn forward(listener: TcpListener, replicas: Arc<Mutex<Vec<SocketAddr>>>) {
    let turn = Arc::new(AtomicUsize::new(0));
    loop {
        let mut inbound = match listener.accept().await {
            Ok((inbound, _)) => inbound,
            Err(error) => {
                eprintln!("the webhook front could not accept a connection: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let candidates = replicas.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let first = turn.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            for offset in 0..candidates.len() {
                let replica = candidates[(first + offset) % candidates.len()];
                if let Ok(Ok(mut outbound)) =
                    tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(replica)).await
                {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    return;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A server answering each connection with its name, then closing it.
    async fn named_server(name: &'static str) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let address = listener.local_addr().expect("an address");
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(name.as_bytes()).await;
            }
        });
        (address, task)
    }

    async fn answer(front: SocketAddr) -> String {
        let mut stream = TcpStream::connect(front).await.expect("the front accepts");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("an answer");
        answer
    }

    #[tokio::test]
    async fn connections_reach_the_replicas_that_accept_them_in_turn() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port");
        let front = WebhookFront::start(port);
        let (first, first_server) = named_server("first").await;
        let (second, second_server) = named_server("second").await;
        front.add(first);
        front.add(second);
        front.add(first);
        assert_eq!(front.replicas(), [first, second], "each replica once");
        let mut answers = vec![answer(front.address).await, answer(front.address).await];
        answers.sort();
        assert_eq!(answers, ["first", "second"], "spread over both");

        // The first replica stops: every connection reaches the second.
        first_server.abort();
        let _ = first_server.await;
        for _ in 0..4 {
            assert_eq!(answer(front.address).await, "second");
        }
        second_server.abort();
    }
}
