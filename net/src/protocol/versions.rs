//! The served API versions: one table, generated from the message declarations, that the
//! ApiVersions response advertises and that [`decode_request`](super::decode_request) gates on.

/// One API and the versions served for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRange {
    /// Kafka API key.
    pub api_key: i16,
    /// Lowest version served.
    pub min_version: i16,
    /// Highest version served.
    pub max_version: i16,
    /// First flexible request version.
    pub first_flexible: i16,
}

impl ApiRange {
    /// Whether `version` is served.
    pub fn supports(&self, version: i16) -> bool {
        (self.min_version..=self.max_version).contains(&version)
    }
}

pub use super::frame::SUPPORTED_APIS;

/// The served range of `api_key`, if it is served at all.
pub fn lookup(api_key: i16) -> Option<&'static ApiRange> {
    SUPPORTED_APIS.iter().find(|range| range.api_key == api_key)
}

/// Whether a request of `api_key` at `version` is served; the broker checks this (or lets
/// [`decode_request`](super::decode_request) check it) before decoding the body.
pub fn is_supported(api_key: i16, version: i16) -> bool {
    lookup(api_key).is_some_and(|range| range.supports(version))
}

/// Request header version for a served API at `version`: 2 when flexible, else 1.
pub fn request_header_version(range: &ApiRange, version: i16) -> i16 {
    if version >= range.first_flexible {
        2
    } else {
        1
    }
}

/// Response header version: 1 when flexible, else 0; ApiVersions responses always use 0.
pub fn response_header_version(range: &ApiRange, version: i16) -> i16 {
    if range.api_key != super::messages::api_versions::API_VERSIONS_KEY
        && version >= range.first_flexible
    {
        1
    } else {
        0
    }
}
