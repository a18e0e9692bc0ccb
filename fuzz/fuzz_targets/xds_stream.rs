//! Fuzzes an xDS stream's state machine: the input is a protocol choice and a sequence of
//! requests (protobuf, decoded as tonic decodes them), ACKs, NACKs and snapshot changes, run as
//! a stream task runs them (`envoy_operator::xds::server::fuzzing`, which documents the format).
//!
//! ```sh
//! cargo +nightly fuzz run xds_stream -- -timeout=1 -rss_limit_mb=512
//! ```
//!
//! Nothing may panic, and after every step the stream must stay within its limits (types, type
//! URL and name lengths, subscribed bytes) with every name it holds charged to its budget.
//! Without nightly, `cargo test --lib xds::server::tests::fuzzing` runs proptests over the same
//! entry point.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let _ended = envoy_operator::xds::server::fuzzing::run_stream(input);
});
