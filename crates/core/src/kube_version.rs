//! The Kubernetes versions envoy-operator runs on: the oldest API server it accepts and why,
//! what later versions add, and the version an API server reports (`GET /version`), read.
//!
//! `install` and `run` refuse an API server older than [`MINIMUM`]; README.md, "Supported
//! Kubernetes versions", has the table of what each version adds.

use std::fmt;

/// A Kubernetes release, `major.minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    pub major: u32,
    pub minor: u32,
}

impl KubeVersion {
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The oldest API server envoy-operator accepts: its CRDs' validation rules name the field
/// they report (`x-kubernetes-validations[].fieldPath`), which API servers know from 1.28;
/// older ones refuse the CRDs, so nothing could be installed.
pub const MINIMUM: KubeVersion = KubeVersion::new(1, 28);

/// Why [`MINIMUM`] is the minimum, in the words of a refusal.
pub const MINIMUM_REASON: &str = "its CRDs' validation rules set x-kubernetes-validations fieldPath, which API servers older than 1.28 refuse";

/// Native sidecars (an init container with `restartPolicy: Always`), on by default from 1.29:
/// the sidecars of pods that run to completion (Jobs).
pub const NATIVE_SIDECARS: KubeVersion = KubeVersion::new(1, 29);

/// The `preStop` `sleep` action of `deploy/deployment.yaml`, on by default from 1.30.
pub const PRE_STOP_SLEEP: KubeVersion = KubeVersion::new(1, 30);

/// `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy (`deploy/admission-policy/`),
/// served from 1.30.
pub const ADMISSION_POLICY: KubeVersion = KubeVersion::new(1, 30);

/// The oldest version with every feature.
pub const EVERY_FEATURE: KubeVersion = KubeVersion::new(1, 30);

/// The version an API server reports (`major`, `minor`, `gitVersion` of `GET /version`), read
/// as `major.minor`. Distributions decorate `minor` (`"32+"` on EKS and GKE) and some leave
/// `major` and `minor` empty, so `gitVersion` (`v1.30.2-eks-1552ad0`, `v1.29.3+k3s1`) is read
/// when they say nothing usable. `None` when neither does.
pub fn reported(major: &str, minor: &str, git_version: &str) -> Option<KubeVersion> {
    let number = |text: &str| leading_number(text.trim());
    match (number(major), number(minor)) {
        (Some(major), Some(minor)) => Some(KubeVersion::new(major, minor)),
        _ => {
            let mut parts = git_version.trim().trim_start_matches('v').splitn(3, '.');
            let major = leading_number(parts.next()?)?;
            let minor = leading_number(parts.next()?)?;
            Some(KubeVersion::new(major, minor))
        }
    }
}

/// The digits `text` starts with, as a number: `"32+"` is 32, `"3-eks"` is 3, `""` none.
fn leading_number(text: &str) -> Option<u32> {
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    text[..digits].parse().ok()
}

/// An API server older than [`MINIMUM`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the API server runs Kubernetes {git_version} ({version}); envoy-operator needs {MINIMUM} or newer: {MINIMUM_REASON} (see README.md, \"Supported Kubernetes versions\")"
)]
pub struct Unsupported {
    /// What the server said (`gitVersion`, else `major.minor`).
    pub git_version: String,
    pub version: KubeVersion,
}

/// Whether envoy-operator runs against an API server reporting `major`, `minor` and
/// `git_version`: `Ok(Some(version))` when it does, `Ok(None)` when the server does not say
/// (taken for a current one, as elsewhere: refusing it would lock out an API server that is
/// only unusual), `Err` naming the version, the minimum and why when it is too old.
pub fn check(major: &str, minor: &str, git_version: &str) -> Result<Option<KubeVersion>, Unsupported> {
    match reported(major, minor, git_version) {
        Some(version) if version < MINIMUM => {
            let said =
                if git_version.trim().is_empty() { version.to_string() } else { git_version.to_owned() };
            Err(Unsupported { git_version: said, version })
        }
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_decorations_are_read_through() {
        let v = KubeVersion::new;
        assert_eq!(reported("1", "32", "v1.32.0"), Some(v(1, 32)));
        assert_eq!(reported("1", "32+", "v1.32.1-gke.1357001"), Some(v(1, 32)));
        assert_eq!(reported("1", "30+", "v1.30.2-eks-1552ad0"), Some(v(1, 30)));
        assert_eq!(reported(" 1 ", " 29 ", ""), Some(v(1, 29)));
        // Empty or unreadable major/minor: gitVersion.
        assert_eq!(reported("", "", "v1.29.3+k3s1"), Some(v(1, 29)));
        assert_eq!(reported("", "", "1.31"), Some(v(1, 31)));
        assert_eq!(reported("one", "x", "v1.28.15-eks-7f9249a"), Some(v(1, 28)));
        assert_eq!(reported("", "", ""), None);
        assert_eq!(reported("", "", "v1"), None);
        assert_eq!(reported("", "", "latest"), None);
    }

    #[test]
    fn an_api_server_older_than_the_minimum_is_refused_saying_why() {
        let refused = check("1", "27", "v1.27.16").unwrap_err();
        assert_eq!(refused.version, KubeVersion::new(1, 27));
        assert_eq!(
            refused.to_string(),
            "the API server runs Kubernetes v1.27.16 (1.27); envoy-operator needs 1.28 or newer: its CRDs' \
             validation rules set x-kubernetes-validations fieldPath, which API servers older than 1.28 refuse \
             (see README.md, \"Supported Kubernetes versions\")"
        );
        let eks = check("1", "26+", "v1.26.15-eks-db838b0").unwrap_err();
        assert!(eks.to_string().contains("Kubernetes v1.26.15-eks-db838b0 (1.26)"), "{eks}");
        let bare = check("1", "25", "").unwrap_err();
        assert!(bare.to_string().contains("Kubernetes 1.25 (1.25)"), "{bare}");
    }

    #[test]
    fn the_minimum_and_newer_are_accepted_and_an_unsaid_version_is_not_refused() {
        assert_eq!(check("1", "28", "v1.28.0"), Ok(Some(MINIMUM)));
        assert_eq!(check("1", "32+", "v1.32.2-eks-1"), Ok(Some(KubeVersion::new(1, 32))));
        assert_eq!(check("2", "0", "v2.0.0"), Ok(Some(KubeVersion::new(2, 0))));
        assert_eq!(check("", "", ""), Ok(None));
    }

    #[test]
    fn every_feature_is_the_newest_requirement() {
        let newest = [MINIMUM, NATIVE_SIDECARS, PRE_STOP_SLEEP, ADMISSION_POLICY].into_iter().max();
        assert_eq!(newest, Some(EVERY_FEATURE));
    }

    /// The minimum is what the generated CRDs need: `fieldPath` or `reason` in a CEL rule needs
    /// 1.28 (an older API server refuses the CRD); CEL rules alone, 1.25. Should the CRDs
    /// change, so must the minimum, its reason and README.md's table.
    #[test]
    fn the_minimum_is_what_the_crds_need() {
        fn rules(schema: &serde_json::Value, found: &mut Vec<serde_json::Value>) {
            match schema {
                serde_json::Value::Object(map) => {
                    if let Some(serde_json::Value::Array(list)) = map.get("x-kubernetes-validations") {
                        found.extend(list.iter().cloned());
                    }
                    map.values().for_each(|value| rules(value, found));
                }
                serde_json::Value::Array(list) => list.iter().for_each(|value| rules(value, found)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        for crd in crate::crd::all() {
            rules(&serde_json::to_value(&crd).expect("a CRD serializes"), &mut found);
        }
        let names_fields =
            found.iter().any(|rule| rule.get("fieldPath").is_some() || rule.get("reason").is_some());
        let needed = match (names_fields, found.is_empty()) {
            (true, _) => KubeVersion::new(1, 28),
            (false, false) => KubeVersion::new(1, 25),
            (false, true) => KubeVersion::new(1, 16),
        };
        assert_eq!(MINIMUM, needed, "the CRDs need {needed}: update MINIMUM, MINIMUM_REASON and README.md");
        assert!(MINIMUM_REASON.contains("fieldPath") == names_fields, "MINIMUM_REASON says why");
    }
}
