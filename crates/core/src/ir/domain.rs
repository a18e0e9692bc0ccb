//! Hostnames as virtual hosts see them. A proxy sends each request to exactly one virtual
//! host (the most specific domain matching its `Host`), so a virtual host must hold every
//! route whose hostnames cover its domain: a route for `*.example.com` also serves
//! `shop.example.com`, and a route without hostnames serves every host. Among them, routes
//! with a more specific matching hostname come first, as Gateway API orders them.

use std::fmt;

/// A virtual host's domain, or a route's hostname.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Domain {
    /// `shop.example.com`
    Exact(String),
    /// `*.example.com`, holding `example.com`: any name ending in `.example.com`.
    Wildcard(String),
    /// Every host (a route without hostnames).
    Any,
}

impl Domain {
    /// A route's hostname (already validated: lowercase, at most one leading `*.`).
    pub fn of_hostname(hostname: &str) -> Self {
        match hostname.strip_prefix("*.") {
            Some(suffix) => Self::Wildcard(suffix.to_owned()),
            None => Self::Exact(hostname.to_owned()),
        }
    }

    /// The domains of a route: its hostnames, or every host without any.
    pub fn of_route(hostnames: &[String]) -> Vec<Self> {
        if hostnames.is_empty() {
            return vec![Self::Any];
        }
        let mut domains: Vec<Self> = hostnames.iter().map(|h| Self::of_hostname(h)).collect();
        domains.sort();
        domains.dedup();
        domains
    }

    /// Whether every host of `domain` matches this hostname.
    pub fn covers(&self, domain: &Domain) -> bool {
        let under =
            |name: &str, suffix: &str| name.strip_suffix(suffix).is_some_and(|rest| rest.ends_with('.'));
        match (self, domain) {
            (Self::Any, _) => true,
            (Self::Exact(mine), Self::Exact(theirs)) => mine == theirs,
            (Self::Wildcard(suffix), Self::Exact(name)) => under(name, suffix),
            (Self::Wildcard(suffix), Self::Wildcard(theirs)) => theirs == suffix || under(theirs, suffix),
            _ => false,
        }
    }

    /// Every hostname that covers this domain ([`Domain::covers`]), most specific first: the
    /// domain itself, the wildcards of its parents from the nearest (`shop.example.com` →
    /// `*.example.com`, `*.com`), and every host.
    pub fn covering(&self) -> Vec<Domain> {
        let name = match self {
            Self::Exact(name) | Self::Wildcard(name) => name.as_str(),
            Self::Any => return vec![Self::Any],
        };
        let mut covering = vec![self.clone()];
        let mut rest = name;
        while let Some((_, parent)) = rest.split_once('.') {
            covering.push(Self::Wildcard(parent.to_owned()));
            rest = parent;
        }
        covering.push(Self::Any);
        covering
    }

    /// Gateway API's precedence of a matching hostname: characters of a non-wildcard hostname
    /// first, then characters of the hostname; the larger the more specific.
    pub fn specificity(&self) -> (usize, usize) {
        match self {
            Self::Exact(name) => (name.len(), name.len()),
            Self::Wildcard(suffix) => (0, suffix.len() + 2),
            Self::Any => (0, 0),
        }
    }
}

impl serde::Serialize for Domain {
    /// As Envoy's `domains` write it.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for Domain {
    /// As Envoy's `domains` write it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exact(name) => f.write_str(name),
            Self::Wildcard(suffix) => write!(f, "*.{suffix}"),
            Self::Any => f.write_str("*"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(text: &str) -> Domain {
        if text == "*" { Domain::Any } else { Domain::of_hostname(text) }
    }

    #[test]
    fn the_hostnames_covering_a_domain_are_those_covers_accepts_most_specific_first() {
        let all: Vec<Domain> = [
            "*",
            "com",
            "example.com",
            "shop.example.com",
            "a.shop.example.com",
            "*.com",
            "*.example.com",
            "*.shop.example.com",
            "other.com",
            "*.other.com",
            "example.org",
        ]
        .into_iter()
        .map(domain)
        .collect();
        for target in &all {
            let mut expected: Vec<Domain> = all.iter().filter(|h| h.covers(target)).cloned().collect();
            expected.sort_by_key(|h| std::cmp::Reverse(h.specificity()));
            let covering: Vec<Domain> =
                target.covering().into_iter().filter(|hostname| all.contains(hostname)).collect();
            assert_eq!(covering, expected, "the hostnames covering {target}");
            assert!(target.covering().iter().all(|h| h.covers(target)), "{target} is covered by each");
        }
    }

    #[test]
    fn wildcards_cover_subdomains_not_the_domain() {
        let wildcard = domain("*.example.com");
        assert!(wildcard.covers(&domain("shop.example.com")));
        assert!(wildcard.covers(&domain("a.shop.example.com")));
        assert!(wildcard.covers(&domain("*.shop.example.com")));
        assert!(wildcard.covers(&domain("*.example.com")));
        assert!(!wildcard.covers(&domain("example.com")));
        assert!(!wildcard.covers(&domain("shopexample.com")));
        assert!(!wildcard.covers(&domain("*")));
        assert!(domain("*").covers(&domain("shop.example.com")));
        assert!(!domain("shop.example.com").covers(&domain("*.example.com")));
    }

    #[test]
    fn exact_hostnames_are_the_most_specific() {
        let mut domains =
            [domain("*"), domain("*.example.com"), domain("a.example.com"), domain("*.b.example.com")];
        domains.sort_by_key(|d| std::cmp::Reverse(d.specificity()));
        let order: Vec<String> = domains.iter().map(ToString::to_string).collect();
        assert_eq!(order, ["a.example.com", "*.b.example.com", "*.example.com", "*"]);
        assert_eq!(Domain::of_route(&[]), [Domain::Any]);
    }
}
