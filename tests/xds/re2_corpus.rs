//! The regular expression judge (`envoy_operator_core::rules::re2`) against a real Envoy's RE2:
//! each pattern of a corpus goes into a route's `safe_regex` of a bootstrap with the runtime
//! keys the operator's proxies run with, through `envoy --mode validate`. The corpus records
//! what Envoy answers, so a new Envoy that answers otherwise fails here first; the judge must
//! refuse every pattern Envoy refuses, and accept every pattern Envoy accepts but those marked
//! as refused on purpose (with the reason).

use std::path::Path;
use std::process::Command;

use envoy_operator_core::bootstrap::RE2_RUNTIME;
use envoy_operator_core::rules::re2;
use envoy_operator_testkit::envoy as real_envoy;
use serde_json::json;

/// What the corpus expects of a pattern.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    /// Envoy compiles it, and so does the judge.
    Accepted,
    /// Envoy refuses it with this RE2 error (the text before the `:`); so does the judge.
    Refused(&'static str),
    /// Envoy compiles it; the judge refuses it on purpose, for this reason.
    RefusedHere(&'static str),
}

use Expect::*;

const RUST_MEANS_OTHERWISE: &str = "RE2 reads it as characters, Rust's syntax as an operator";
const NOT_IN_RUSTS_SYNTAX: &str = "RE2 syntax that Rust's parser, which the judge uses, lacks";
const TOO_LARGE_FOR_OLDER_ENVOYS: &str = "its UTF-8 program exceeds the 8 MiB RE2 compiles with by default, as the fleets' default Envoy (1.34) does";

fn corpus() -> Vec<(String, Expect)> {
    let mut corpus: Vec<(String, Expect)> = [
        // Ordinary routes.
        ("/api/v[0-9]+", Accepted),
        ("^/items/[0-9]+$", Accepted),
        ("(?i)/shop/.*", Accepted),
        (r"/a\.b\+c", Accepted),
        (r"(?P<id>\d+)-(?<rest>\w+)", Accepted),
        ("[[:alpha:]][^a-z][[:word:]]", Accepted),
        (r"\pL\p{Greek}\p{Old_Italic}\PN\pC\p{Any}", Accepted),
        ("(?s).(?U)a*(?m)^a$", Accepted),
        ("a|", Accepted),
        (r"\x{FF}\x41é[^é]", Accepted),
        (r"\z\A\b\B", Accepted),
        // Repetition counts: at most 1,000, also multiplied through nested repetitions.
        ("/x{1000}", Accepted),
        ("/x{1001}", Refused("invalid repetition size")),
        ("x{2,1001}", Refused("invalid repetition size")),
        ("x{1001,}", Refused("invalid repetition size")),
        ("(a{10}){100}", Accepted),
        ("(a{100}){11}", Refused("invalid repetition size")),
        ("((a{10}b){10}){11}", Refused("invalid repetition size")),
        ("(a{2,}){500}", Accepted),
        ("(a{2,}){501}", Refused("invalid repetition size")),
        ("(a{1000})*", Accepted),
        // Stacked repetition operators.
        ("a**", Refused("bad repetition operator")),
        ("a{2}{3}", Refused("bad repetition operator")),
        ("(?:a*)*", Accepted),
        // Program size: within RE2's memory, these compile in Envoy.
        ("[a-z]{1000}", Accepted),
        (r"\w{1000}[\d\S]{1000}", Accepted),
        (".{1000}", Accepted),
        (r"\pL{1000}", RefusedHere(TOO_LARGE_FOR_OLDER_ENVOYS)),
        (r"(\pL|\pN){1000}", RefusedHere(TOO_LARGE_FOR_OLDER_ENVOYS)),
        // Rust's syntax, not RE2's.
        (r"\u0041", Refused("invalid escape sequence")),
        ("(?x)a b", Refused("invalid perl operator")),
        ("(?u)a", Refused("invalid perl operator")),
        (r"\p{Script=Greek}", Refused("invalid character class range")),
        (r"\p{greek}", Refused("invalid character class range")),
        (r"\p{Alphabetic}", Refused("invalid character class range")),
        (r"\p{LC}", Refused("invalid character class range")),
        ("(?P<a.b>x)", Refused("invalid named capture group")),
        (r"\x{100}", Refused("invalid escape sequence")),
        (r"\Z", Refused("invalid escape sequence")),
        (r"\e", Refused("invalid escape sequence")),
        // Syntax errors both see.
        ("/api/(v", Refused("missing )")),
        ("[z-a]", Refused("invalid character class range")),
        // Accepted by RE2 with another meaning than Rust's, or not in Rust's syntax.
        (r"\<word\>", RefusedHere(RUST_MEANS_OTHERWISE)),
        (r"\b{start}x", RefusedHere(RUST_MEANS_OTHERWISE)),
        ("[a-z&&[^aeiou]]", RefusedHere(RUST_MEANS_OTHERWISE)),
        ("[[a-z]]", RefusedHere(RUST_MEANS_OTHERWISE)),
        (r"\p{^Lu}", RefusedHere(NOT_IN_RUSTS_SYNTAX)),
        (r"\Qa.b\E", RefusedHere(NOT_IN_RUSTS_SYNTAX)),
        (r"\C", RefusedHere(NOT_IN_RUSTS_SYNTAX)),
        (r"\0", RefusedHere(NOT_IN_RUSTS_SYNTAX)),
    ]
    .into_iter()
    .map(|(pattern, expect)| (pattern.to_owned(), expect))
    .collect();
    // A large alternation: RE2's program grows with it, far within its memory.
    let paths: Vec<String> = (0..2000).map(|i| format!("/path{i}")).collect();
    corpus.push((paths.join("|"), Accepted));
    corpus
}

/// Envoy's verdict: `Ok` or the error it gave for the configuration.
fn envoy_verdict(envoy: &Path, dir: &Path, index: usize, pattern: &str) -> Result<(), String> {
    let runtime: serde_json::Map<String, serde_json::Value> =
        RE2_RUNTIME.iter().map(|(key, value)| ((*key).to_owned(), json!(value))).collect();
    let bootstrap = json!({
        "static_resources": {"listeners": [{
            "name": "l",
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": 10000}},
            "filter_chains": [{"filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "stat_prefix": "corpus",
                    "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
                    "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [{
                        "match": {"safe_regex": {"regex": pattern}},
                        "direct_response": {"status": 200}}]}]}
                }
            }]}]
        }]},
        "layered_runtime": {"layers": [{"name": "envoy-operator", "static_layer": runtime}]}
    });
    let path = dir.join(format!("corpus-{index}.json"));
    std::fs::write(&path, bootstrap.to_string()).expect("writing a bootstrap");
    let output = Command::new(envoy)
        .args(["--mode", "validate", "--log-level", "critical", "-c"])
        .arg(&path)
        .output()
        .expect("running envoy --mode validate");
    if output.status.success() {
        return Ok(());
    }
    let text =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    // `... error initializing configuration '<file>': <RE2's error>`
    let error = text
        .lines()
        .find_map(|line| line.split_once("error initializing configuration").map(|(_, rest)| rest))
        .and_then(|rest| rest.split_once("': ").map(|(_, error)| error.trim().to_owned()))
        .unwrap_or(text);
    Err(error)
}

#[test]
fn the_judge_refuses_what_envoys_re2_refuses_and_accepts_the_rest_but_what_it_names() {
    if !real_envoy::available() {
        return;
    }
    let envoy = real_envoy::binary().expect("envoy");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let corpus = corpus();
    // Two at a time: each validation is a process of about half a second.
    let verdicts: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let halves: Vec<_> = [0, 1]
            .into_iter()
            .map(|half| {
                let (envoy, dir, corpus) = (&envoy, dir.path(), &corpus);
                scope.spawn(move || {
                    corpus
                        .iter()
                        .enumerate()
                        .filter(|(index, _)| index % 2 == half)
                        .map(|(index, (pattern, _))| (index, envoy_verdict(envoy, dir, index, pattern)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<_> =
            halves.into_iter().flat_map(|half| half.join().expect("a validation thread")).collect();
        all.sort_by_key(|(index, _)| *index);
        all.into_iter().map(|(_, verdict)| verdict).collect()
    });

    let mut disagreements = Vec::new();
    for ((pattern, expect), envoy) in corpus.iter().zip(&verdicts) {
        let ours = re2::judge(pattern);
        let shown: String = pattern.chars().take(40).collect();
        let fine = match (expect, envoy, &ours) {
            (Accepted, Ok(()), Ok(())) => true,
            (RefusedHere(_), Ok(()), Err(_)) => true,
            (Refused(kind), Err(error), Err(refusal)) => {
                error.starts_with(kind) && refusal.0.starts_with(kind)
            }
            _ => false,
        };
        if !fine {
            disagreements.push(format!("{shown:?}: corpus {expect:?}, Envoy {envoy:?}, judge {ours:?}"));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {}:\n{}",
        disagreements.len(),
        corpus.len(),
        disagreements.join("\n")
    );
}
