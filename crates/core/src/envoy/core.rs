//! Messages of `envoy.config.core.v3` and `envoy.type.matcher.v3` that the others use:
//! durations, addresses, config sources, headers and string matchers.

use std::fmt;

use serde::{Serialize, Serializer};

/// `google.protobuf.Duration`. Proto3 JSON writes it as seconds with 0, 3, 6 or 9 fractional
/// digits and an `s` suffix (`"5s"`, `"1.500s"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration {
    pub seconds: i64,
    /// Always in `0..1_000_000_000`.
    pub nanos: i32,
}

impl Duration {
    pub const ZERO: Duration = Duration { seconds: 0, nanos: 0 };

    pub const fn from_secs(seconds: u32) -> Self {
        Self { seconds: seconds as i64, nanos: 0 }
    }

    pub const fn from_millis(millis: u64) -> Self {
        Self { seconds: (millis / 1000) as i64, nanos: ((millis % 1000) * 1_000_000) as i32 }
    }
}

impl From<std::time::Duration> for Duration {
    fn from(duration: std::time::Duration) -> Self {
        Self {
            seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
            // Always below 1_000_000_000.
            nanos: duration.subsec_nanos() as i32,
        }
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (seconds, nanos) = (self.seconds, self.nanos);
        match nanos {
            0 => write!(f, "{seconds}s"),
            n if n % 1_000_000 == 0 => write!(f, "{seconds}.{:03}s", n / 1_000_000),
            n if n % 1_000 == 0 => write!(f, "{seconds}.{:06}s", n / 1_000),
            n => write!(f, "{seconds}.{n:09}s"),
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// An empty message, such as `envoy.config.core.v3.AggregatedConfigSource` (`{}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Empty {}

/// `envoy.config.core.v3.ApiVersion`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ApiVersion {
    V3,
}

/// `envoy.config.core.v3.ConfigSource`, in the v3 API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConfigSource {
    #[serde(flatten)]
    pub specifier: ConfigSourceSpecifier,
    pub resource_api_version: ApiVersion,
    /// How long Envoy waits for the first resources before it goes on without them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_fetch_timeout: Option<Duration>,
}

/// The oneof `config_source_specifier` of [`ConfigSource`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigSourceSpecifier {
    /// Over the aggregated (ADS) stream the bootstrap opens.
    Ads(Empty),
    /// From a file Envoy watches.
    PathConfigSource(PathConfigSource),
}

impl ConfigSource {
    /// The resource comes over the ADS stream the bootstrap opens.
    pub fn ads() -> Self {
        Self {
            specifier: ConfigSourceSpecifier::Ads(Empty {}),
            resource_api_version: ApiVersion::V3,
            initial_fetch_timeout: None,
        }
    }

    /// The resource comes from the file at `path`, reloaded when its directory changes (a
    /// mounted ConfigMap or Secret is updated by swapping the directory's `..data` link).
    pub fn watched_file(path: &str) -> Self {
        let directory = path.rsplit_once('/').map_or(".", |(dir, _)| if dir.is_empty() { "/" } else { dir });
        Self {
            specifier: ConfigSourceSpecifier::PathConfigSource(PathConfigSource {
                path: path.to_owned(),
                watched_directory: WatchedDirectory { path: directory.to_owned() },
            }),
            resource_api_version: ApiVersion::V3,
            initial_fetch_timeout: None,
        }
    }

    /// Whether the resource comes over the ADS stream.
    pub fn is_ads(&self) -> bool {
        matches!(self.specifier, ConfigSourceSpecifier::Ads(_))
    }
}

/// `envoy.config.core.v3.PathConfigSource`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PathConfigSource {
    pub path: String,
    pub watched_directory: WatchedDirectory,
}

/// `envoy.config.core.v3.WatchedDirectory`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WatchedDirectory {
    pub path: String,
}

/// `envoy.config.core.v3.Address`, with the oneof `address` set to `socket_address`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Address {
    pub socket_address: SocketAddress,
}

impl Address {
    pub fn socket(address: impl Into<String>, port_value: u32) -> Self {
        Self { socket_address: SocketAddress { address: address.into(), port_value } }
    }
}

/// `envoy.config.core.v3.SocketAddress` (TCP), with the oneof `port_specifier` set to
/// `port_value`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SocketAddress {
    pub address: String,
    pub port_value: u32,
}

/// `envoy.config.core.v3.DataSource`, with the oneof `specifier` set to `inline_string`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DataSource {
    pub inline_string: String,
}

/// `envoy.config.core.v3.HeaderValueOption`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HeaderValueOption {
    pub header: HeaderValue,
    pub append_action: HeaderAppendAction,
}

/// `envoy.config.core.v3.HeaderValue`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HeaderValue {
    pub key: String,
    pub value: String,
}

/// `envoy.config.core.v3.HeaderValueOption.HeaderAppendAction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HeaderAppendAction {
    /// Another value for the header (Gateway API's `add`).
    AppendIfExistsOrAdd,
    /// The header with this value only (Gateway API's `set`).
    OverwriteIfExistsOrAdd,
}

/// `envoy.type.matcher.v3.RegexMatcher`, with the default engine (Google RE2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegexMatcher {
    pub regex: String,
}

/// `envoy.type.matcher.v3.RegexMatchAndSubstitute`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegexMatchAndSubstitute {
    pub pattern: RegexMatcher,
    pub substitution: String,
}

/// `envoy.type.matcher.v3.StringMatcher`: its oneof `match_pattern`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StringMatcher {
    Exact(String),
    SafeRegex(RegexMatcher),
}
