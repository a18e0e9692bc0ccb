//! The committed manifests and what the API server makes of them: the generated CRDs (as
//! committed, as kube-apiserver's validation would take them, and agreeing with the core's
//! rules), and `deploy/`. One test binary.

mod crd_apiserver_rules;
mod crds;
mod deploy;
mod schema_agreement;
