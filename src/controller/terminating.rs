//! A namespace being deleted is the end of its objects, not an error. While it terminates, the
//! API server refuses to create anything in it (403 Forbidden, with the status cause
//! `NamespaceTerminating`), and its objects' children go one by one, each change reconciling
//! the parent again. A reconcile refused so ends quietly: no error, so no backoff and no
//! WARN; logged at INFO once per namespace (at DEBUG after that), and the object waits for a
//! change, which is its deletion.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::Error;

/// The status cause the API server gives a create in a terminating namespace.
pub const NAMESPACE_TERMINATING_CAUSE: &str = "NamespaceTerminating";

/// How long a namespace told as terminating stays told: longer than a deletion takes, and
/// short enough that a namespace of that name created and deleted again is told again.
const TOLD_FOR: Duration = Duration::from_secs(600);

/// Namespaces remembered at most; past that, those told longest ago are forgotten.
const REMEMBERED: usize = 1024;

/// Whether `error` is the API server refusing a write because its namespace is being deleted.
pub fn is_namespace_terminating(error: &Error) -> bool {
    matches!(error, Error::Api { source, .. } if refused_as_terminating(source))
}

/// Whether the API server refused a request because its namespace is being deleted.
pub fn refused_as_terminating(error: &kube::Error) -> bool {
    let kube::Error::Api(status) = error else { return false };
    status.code == 403
        && status.details.as_ref().is_some_and(|details| {
            details.causes.iter().any(|cause| cause.reason == NAMESPACE_TERMINATING_CAUSE)
        })
}

/// The terminating namespaces told in the log, and when.
#[derive(Debug, Default)]
pub struct TerminatingNamespaces {
    told: Mutex<HashMap<String, Instant>>,
}

impl TerminatingNamespaces {
    /// Whether `namespace` is news at `now` (not told within [`TOLD_FOR`]), recording it as
    /// told when it is.
    pub fn first_time(&self, namespace: &str, now: Instant) -> bool {
        let mut told = self.told.lock().unwrap_or_else(PoisonError::into_inner);
        if told.get(namespace).is_some_and(|at| now.saturating_duration_since(*at) < TOLD_FOR) {
            return false;
        }
        if told.len() >= REMEMBERED {
            told.retain(|_, at| now.saturating_duration_since(*at) < TOLD_FOR);
            if told.len() >= REMEMBERED {
                told.clear();
            }
        }
        told.insert(namespace.to_owned(), now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: u16, cause: &str) -> Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "deployments.apps \"web\" is forbidden: unable to create new content in namespace shop because it is being terminated",
            "reason": "Forbidden",
            "details": {"name": "web", "group": "apps", "kind": "deployments",
                        "causes": [{"reason": cause, "message": "namespace shop is being terminated",
                                    "field": "metadata.namespace"}]},
            "code": code}))
        .expect("a Status");
        let source = kube::Error::Api(Box::new(status));
        Error::Api { verb: "apply", kind: "Deployment", name: "web".into(), source }
    }

    #[test]
    fn only_the_api_servers_refusal_for_a_terminating_namespace_counts() {
        assert!(is_namespace_terminating(&refused(403, "NamespaceTerminating")));
        assert!(!is_namespace_terminating(&refused(403, "FieldValueForbidden")), "another 403");
        assert!(!is_namespace_terminating(&refused(409, "NamespaceTerminating")));
        let bare = kube::Error::Api(Box::new(kube::core::Status { code: 403, ..Default::default() }));
        let rbac = Error::Api { verb: "apply", kind: "Deployment", name: "web".into(), source: bare };
        assert!(!is_namespace_terminating(&rbac), "a 403 of RBAC is an error");
        assert!(!is_namespace_terminating(&Error::CacheUnavailable("Deployment".into())));
    }

    #[test]
    fn each_terminating_namespace_is_news_once_within_a_while() {
        let told = TerminatingNamespaces::default();
        let start = Instant::now();
        assert!(told.first_time("shop", start));
        assert!(!told.first_time("shop", start + Duration::from_secs(1)));
        assert!(told.first_time("blog", start + Duration::from_secs(2)));
        assert!(!told.first_time("shop", start + TOLD_FOR - Duration::from_secs(1)));
        assert!(told.first_time("shop", start + TOLD_FOR), "a namespace of that name, deleted again");
        for n in 0..(REMEMBERED * 2) {
            told.first_time(&format!("ns-{n}"), start);
        }
        assert!(told.told.lock().unwrap().len() <= REMEMBERED, "bounded");
    }
}
