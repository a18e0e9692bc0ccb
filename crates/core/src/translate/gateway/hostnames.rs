//! Hostname intersection (Gateway API, `HTTPRouteSpec.hostnames`): the hostnames a route serves
//! on a listener are those of its hostnames the listener's hostname covers, and the listener's
//! own where a route's wildcard covers it. A listener without a hostname takes the route's; a
//! route without hostnames takes the listener's.

use crate::ir::Domain;

/// The hostnames `route` serves on a listener of hostname `listener`, sorted, each once: empty
/// for every host; `None` when they do not intersect (the route does not attach there).
pub fn intersect(listener: Option<&str>, route: &[String]) -> Option<Vec<String>> {
    let Some(listener) = listener else { return Some(route.to_vec()) };
    if route.is_empty() {
        return Some(vec![listener.to_owned()]);
    }
    let listener_domain = Domain::of_hostname(listener);
    let mut served: Vec<String> = route
        .iter()
        .filter_map(|hostname| {
            let domain = Domain::of_hostname(hostname);
            if listener_domain.covers(&domain) {
                Some(hostname.clone())
            } else if domain.covers(&listener_domain) {
                Some(listener.to_owned())
            } else {
                None
            }
        })
        .collect();
    served.sort();
    served.dedup();
    (!served.is_empty()).then_some(served)
}

/// The domain a listener's hostname covers (every host without one).
pub fn listener_domain(hostname: Option<&str>) -> Domain {
    hostname.map_or(Domain::Any, Domain::of_hostname)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn either_side_without_hostnames_takes_the_other() {
        assert_eq!(intersect(None, &[]), Some(vec![]));
        assert_eq!(intersect(None, &hosts(&["a.com"])), Some(hosts(&["a.com"])));
        assert_eq!(intersect(Some("*.a.com"), &[]), Some(hosts(&["*.a.com"])));
    }

    /// The cases of HTTPRouteHostnameIntersection's manifests.
    #[test]
    fn exact_and_wildcard_hostnames_intersect_as_gateway_api_says() {
        let specific = hosts(&["non.matching.com", "*.nonmatchingwildcard.io", "very.specific.com"]);
        assert_eq!(intersect(Some("very.specific.com"), &specific), Some(hosts(&["very.specific.com"])));
        assert_eq!(intersect(Some("*.wildcard.io"), &specific), None);
        let under_wildcard = hosts(&[
            "non.matching.com",
            "wildcard.io",
            "foo.wildcard.io",
            "bar.wildcard.io",
            "foo.bar.wildcard.io",
        ]);
        assert_eq!(
            intersect(Some("*.wildcard.io"), &under_wildcard),
            Some(hosts(&["bar.wildcard.io", "foo.bar.wildcard.io", "foo.wildcard.io"]))
        );
        let wildcard_route = hosts(&["non.matching.com", "*.specific.com"]);
        assert_eq!(
            intersect(Some("very.specific.com"), &wildcard_route),
            Some(hosts(&["very.specific.com"]))
        );
        assert_eq!(
            intersect(Some("*.anotherwildcard.io"), &hosts(&["*.anotherwildcard.io"])),
            Some(hosts(&["*.anotherwildcard.io"]))
        );
        assert_eq!(intersect(Some("*.io"), &hosts(&["*.wildcard.io"])), Some(hosts(&["*.wildcard.io"])));
        assert_eq!(
            intersect(Some("*.a.wildcard.io"), &hosts(&["*.wildcard.io"])),
            Some(hosts(&["*.a.wildcard.io"]))
        );
        assert_eq!(
            intersect(Some("very.specific.com"), &hosts(&["specific.but.wrong.com", "wildcard.io"])),
            None
        );
    }
}
