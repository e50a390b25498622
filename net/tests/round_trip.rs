//! Our own encode → decode round trip, for every served API and version, as bodies and as
//! whole frames (request header + body through `decode_request`; response frames through
//! `decode_response`).

use bytes::{Bytes, BytesMut};
use kaas_net::protocol::frame::sample_pair;
use kaas_net::protocol::sample::SampleRng;
use kaas_net::protocol::{self as codec, Encoder, RequestHeader, SUPPORTED_APIS};
use proptest::prelude::*;

fn join(chunks: &[Bytes]) -> Bytes {
    let mut out = BytesMut::new();
    for chunk in chunks {
        out.extend_from_slice(chunk);
    }
    out.freeze()
}

fn round_trip_all(seed: u64) {
    for range in SUPPORTED_APIS {
        for version in range.min_version..=range.max_version {
            let mut rng = SampleRng::new(seed ^ ((range.api_key as u64) << 32) ^ version as u64);
            let (request, response) =
                sample_pair(range.api_key, version, &mut rng).expect("served api");

            let mut enc = Encoder::new();
            request.encode_body(&mut enc, version);
            let mut body = enc.into_bytes();
            let decoded = codec::Request::decode_body(range.api_key, version, &mut body)
                .expect("request body decodes");
            assert_eq!(decoded, request, "api {} v{version}", range.api_key);

            let header = RequestHeader {
                api_key: range.api_key,
                api_version: version,
                correlation_id: seed as i32,
                client_id: seed.is_multiple_of(2).then(|| "client".to_string()),
            };
            let frame = join(&request.encode_frame(&header));
            let (got_header, got) = codec::decode_request(frame.slice(4..)).expect("frame");
            assert_eq!(got_header, header);
            assert_eq!(got, request);

            let frame = join(&response.encode_frame(seed as i32, version));
            let (correlation_id, got) =
                codec::decode_response(range.api_key, version, frame.slice(4..)).expect("resp");
            assert_eq!(correlation_id, seed as i32);
            assert_eq!(got, response, "api {} v{version} response", range.api_key);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
                cases: 128,
                failure_persistence: Some(Box::new(
                    proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
                )),
                ..ProptestConfig::default()
            })]
    #[test]
    fn every_message_round_trips(seed in any::<u64>()) {
        round_trip_all(seed);
    }
}

#[test]
fn served_table_is_sorted_and_unique() {
    let keys: Vec<i16> = SUPPORTED_APIS.iter().map(|r| r.api_key).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), keys.len());
    for range in SUPPORTED_APIS {
        assert!(range.min_version <= range.max_version);
    }
}
