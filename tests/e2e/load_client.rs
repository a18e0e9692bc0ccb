//! The load client of the proxy stories: a shell script run by a `curl` pod, one line of output
//! per request, and the count of those lines. The script runs here too, against a server on
//! loopback that fails a known share of its requests, so how it counts is checked, not assumed.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The `curl` of the client pods (busybox `sh`; `--rate` needs curl 7.84+).
pub const CURL_IMAGE: &str = "curlimages/curl:8.11.1";

/// Requests a second on the kept-alive connection.
const RATE: usize = 20;

/// A script that calls `url` for `seconds`: every 50 ms on a new connection, and [`RATE`] a
/// second on one connection kept alive. It prints a line per request: `ok` (200), `FAIL <how>
/// <code> dns=<s> connect=<s> first-byte=<s> total=<s>` (another status, or `000`: no answer;
/// with curl's timings, which tell a name lookup or a connection that hung from a slow
/// answer), or `UNREADABLE <how> <text>` when curl printed something that is not a status
/// code (the script itself miscounting).
///
/// One curl with many URLs keeps its connection alive, and each URL needs its own `-o`: an
/// output option applies to one URL only, and every later body would be printed among the
/// status codes.
pub fn script(url: &str, seconds: u32) -> String {
    let transfers = seconds as usize * RATE;
    format!(
        r#"verdict() {{
  case "$2" in
    200) echo ok ;;
    [0-9][0-9][0-9]) echo "FAIL $1 $2 $3" ;;
    *) echo "UNREADABLE $1 $2 $3" ;;
  esac
}}
timings='%{{http_code}} dns=%{{time_namelookup}} connect=%{{time_connect}} first-byte=%{{time_starttransfer}} total=%{{time_total}}\n'
end=$(( $(date +%s) + {seconds} ))
while [ "$(date +%s)" -lt "$end" ]; do
  curl -s -o /dev/null -w "$timings" --max-time 3 '{url}' | while read -r code times; do verdict new-connection "$code" "$times"; done
  sleep 0.05
done &
urls=""
i=0
while [ "$i" -lt {transfers} ]; do
  urls="$urls {url} -o /dev/null"
  i=$(( i + 1 ))
done
curl -s --max-time 3 -w "$timings" --rate {RATE}/s $urls | while read -r code times; do verdict kept-alive "$code" "$times"; done
wait"#
    )
}

/// What the client's log says.
#[derive(Debug, Default)]
pub struct Outcome {
    pub requests: usize,
    /// `FAIL …` lines.
    pub failures: Vec<String>,
    /// Lines that are no request's outcome: the script miscounts.
    pub unreadable: Vec<String>,
}

impl Outcome {
    pub fn of(log: &str) -> Outcome {
        let mut outcome = Outcome::default();
        for line in log.lines().filter(|line| !line.trim().is_empty()) {
            match line {
                "ok" => outcome.requests += 1,
                failure if failure.starts_with("FAIL ") => {
                    outcome.requests += 1;
                    outcome.failures.push(failure.to_owned());
                }
                other => outcome.unreadable.push(other.to_owned()),
            }
        }
        outcome
    }

    /// Fails unless every line of the log is a request's outcome.
    pub fn assert_readable(&self) {
        let shown = &self.unreadable[..self.unreadable.len().min(10)];
        assert!(
            self.unreadable.is_empty(),
            "the load client printed {} lines that are no request's outcome (its script miscounts): {shown:?}",
            self.unreadable.len()
        );
    }
}

/// An HTTP server on loopback answering `200` with a body, except every `fail_every`-th request,
/// answered `503`; it counts both.
struct FlakyServer {
    address: SocketAddr,
    ok: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl FlakyServer {
    async fn start(fail_every: usize) -> FlakyServer {
        use hyper::server::conn::http1;
        use hyper::service::service_fn;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = listener.local_addr().expect("an address");
        let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let seen = Arc::new(AtomicUsize::new(0));
        let (ok_count, failed_count) = (ok.clone(), failed.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (seen, ok, failed) = (seen.clone(), ok_count.clone(), failed_count.clone());
                let service = service_fn(move |_request| {
                    let nth = seen.fetch_add(1, Ordering::SeqCst) + 1;
                    let (status, counter) =
                        if nth.is_multiple_of(fail_every) { (503, &failed) } else { (200, &ok) };
                    counter.fetch_add(1, Ordering::SeqCst);
                    let body = http_body_util::Full::new(bytes::Bytes::from_static(
                        b"<html>\n<body>a body of several lines</body>\n</html>\n",
                    ));
                    let response = hyper::Response::builder().status(status).body(body);
                    async move { Ok::<_, Infallible>(response.expect("a response")) }
                });
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = http1::Builder::new().serve_connection(io, service).await;
                });
            }
        });
        FlakyServer { address, ok, failed, task }
    }
}

impl Drop for FlakyServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs the script with `sh` here; `None` (with a note) without `curl` on this machine.
async fn run_here(url: &str, seconds: u32) -> Option<String> {
    let curl = std::process::Command::new("curl").arg("--version").output();
    if !curl.is_ok_and(|output| output.status.success()) {
        eprintln!("SKIPPED: no curl on this machine to run the load client's script with");
        return None;
    }
    let script = script(url, seconds);
    let output =
        tokio::task::spawn_blocking(move || std::process::Command::new("sh").args(["-c", &script]).output())
            .await
            .expect("the script's thread")
            .expect("running the script with sh");
    assert!(output.status.success(), "the script failed: {}", String::from_utf8_lossy(&output.stderr));
    Some(String::from_utf8(output.stdout).expect("UTF-8 output"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_load_clients_script_counts_every_request_and_every_failure() {
    let server = FlakyServer::start(7).await;
    let Some(log) = run_here(&format!("http://{}/", server.address), 2).await else { return };
    let outcome = Outcome::of(&log);
    outcome.assert_readable();
    let (ok, failed) = (server.ok.load(Ordering::SeqCst), server.failed.load(Ordering::SeqCst));
    // The kept-alive curl makes exactly its number of transfers, the loop beside it some more.
    assert!(failed > 0 && ok + failed > 2 * RATE, "{ok} ok, {failed} failed");
    assert_eq!(outcome.requests, ok + failed, "a line per request the server answered:\n{log}");
    assert_eq!(outcome.failures.len(), failed, "a FAIL per 503:\n{log}");
    assert!(outcome.failures.iter().all(|line| line.contains(" 503 dns=")), "{:?}", outcome.failures);
    for how in ["new-connection", "kept-alive"] {
        assert!(log.lines().any(|line| line.contains(how)), "{how} requests failed too:\n{log}");
    }

    // Nobody listening: every request is a failure, none is lost.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port");
    let log = run_here(&format!("http://{closed}/"), 1).await.expect("curl is here");
    let outcome = Outcome::of(&log);
    outcome.assert_readable();
    assert!(outcome.requests > RATE, "{log}");
    assert_eq!(outcome.failures.len(), outcome.requests, "every request failed:\n{log}");
    assert!(outcome.failures.iter().all(|line| line.contains(" 000 dns=")), "{:?}", outcome.failures);
}

#[test]
fn a_log_with_a_body_among_the_codes_is_unreadable() {
    // What the client printed when only its first URL had `-o /dev/null`.
    let outcome = Outcome::of("ok\nok\n<!DOCTYPE html>\n<html>\nok\nFAIL kept-alive 502\n");
    assert_eq!(outcome.requests, 4);
    assert_eq!(outcome.failures, ["FAIL kept-alive 502"]);
    assert_eq!(outcome.unreadable, ["<!DOCTYPE html>", "<html>"]);
}
