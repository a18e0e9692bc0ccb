//! Fuzzes the AdmissionReview parser and both handlers from raw request bytes:
//! `cargo +nightly fuzz run review -- -max_total_time=60`.
//! Every input must yield either a parse error (HTTP 400) or a review that echoes the uid.

#![no_main]

use envoy_operator::webhook::handler::{self, AdmitFn};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    for admit in [handler::mutate as AdmitFn, handler::validate] {
        if let Ok(reviewed) = handler::review(admit, body) {
            assert_eq!(reviewed.response.uid, reviewed.request.uid);
            assert!(serde_json_is_object(&reviewed.body));
        }
    }
});

fn serde_json_is_object(body: &[u8]) -> bool {
    body.first() == Some(&b'{') && body.last() == Some(&b'}')
}
