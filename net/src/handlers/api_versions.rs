//! ApiVersions (key 18): the APIs and versions this broker serves, and the
//! `transaction.version` feature (v3+).

use bytes::Bytes;

use crate::protocol::messages::api_versions::{
    ApiVersion, ApiVersionsRequest, ApiVersionsResponse, FinalizedFeatureKey, SupportedFeatureKey,
};
use crate::protocol::{encode_response, ErrorCode, SUPPORTED_APIS};
use crate::transactions::state::TransactionVersion;

/// API keys the broker has handlers for; the codec may know more.
pub const SERVED_API_KEYS: &[i16] = &[
    0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
    30, 31, 32, 33, 35, 37, 42, 44, 46, 47, 60, 61, 65, 66, 68, 69,
];

/// Whether a request of `api_key` is handled (its version was already gated by the codec).
pub fn is_served(api_key: i16) -> bool {
    SERVED_API_KEYS.contains(&api_key)
}

/// The advertised ranges: the codec's table, restricted to the handled APIs.
pub fn served_versions() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .filter(|range| is_served(range.api_key))
        .map(|range| ApiVersion {
            api_key: range.api_key,
            min_version: range.min_version,
            max_version: range.max_version,
        })
        .collect()
}

/// The `transaction.version` feature: the levels this broker speaks (0–2) and the one it
/// runs at (2: Transactions V2, KIP-890, for the clients that speak it; older clients keep
/// V1 through the older request versions).
pub const TRANSACTION_VERSION_FEATURE: &str = "transaction.version";

/// The epoch of the finalized features: they never change while a broker runs (clients
/// take a response's features when its epoch is above the last one they saw, from -1).
const FINALIZED_FEATURES_EPOCH: i64 = 1;

/// Answers ApiVersions.
pub fn handle(_request: ApiVersionsRequest) -> ApiVersionsResponse {
    let level = TransactionVersion::V2.feature_level();
    ApiVersionsResponse {
        error_code: ErrorCode::None.code(),
        api_keys: served_versions(),
        supported_features: vec![SupportedFeatureKey {
            name: TRANSACTION_VERSION_FEATURE.to_string(),
            min_version: 0,
            max_version: level,
        }],
        finalized_features_epoch: FINALIZED_FEATURES_EPOCH,
        finalized_features: vec![FinalizedFeatureKey {
            name: TRANSACTION_VERSION_FEATURE.to_string(),
            max_version_level: level,
            min_version_level: level,
        }],
        ..Default::default()
    }
}

/// The answer to an ApiVersions request at a version newer than served: v0 body with
/// UNSUPPORTED_VERSION and the served ranges, so the client retries with one it finds there.
pub fn fallback(correlation_id: i32) -> Vec<Bytes> {
    let body = ApiVersionsResponse {
        error_code: ErrorCode::UnsupportedVersion.code(),
        api_keys: served_versions(),
        ..Default::default()
    };
    encode_response(correlation_id, 0, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_api_has_a_codec_range() {
        let advertised = served_versions();
        assert_eq!(advertised.len(), SERVED_API_KEYS.len());
        assert!(advertised.iter().all(|v| v.min_version <= v.max_version));
    }
}
