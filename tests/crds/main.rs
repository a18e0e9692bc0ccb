//! The committed manifests and what the API server makes of them: the generated CRDs (as
//! committed, as kube-apiserver's validation would take them, and agreeing with the core's
//! rules, one error per fault), and `deploy/`. One test binary.

mod crd_apiserver_rules;
mod crds;
mod deploy;
mod one_error;
mod schema_agreement;
