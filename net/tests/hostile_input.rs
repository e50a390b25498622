//! Malformed and hostile frames give errors — never panics, never large allocations — and the
//! error says whether the broker can still answer (ids known) or must close the connection.
//! The first frames here abort or panic the `kafka-protocol` crate.

use bytes::{Bytes, BytesMut};
use kaas_net::protocol::error::{DecodeError, FrameError};
use kaas_net::protocol::messages::{api_versions, fetch, produce};
use kaas_net::protocol::{self as codec, ApiMessage, ErrorCode, RequestHeader};

fn hex(text: &str) -> Bytes {
    let digits: Vec<u8> = text
        .as_bytes()
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex"))
        .collect();
    Bytes::from(digits)
}

fn body_error(frame: Bytes) -> DecodeError {
    match codec::decode_request(frame) {
        Err(FrameError::Body { source, .. }) => source,
        other => panic!("expected a body error, got {other:?}"),
    }
}

#[test]
fn metadata_v0_with_2g_topics_is_rejected() {
    let err = body_error(hex("000300000000000100007fffffff"));
    assert!(
        matches!(
            err,
            DecodeError::BadLength {
                length: 0x7fff_ffff,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn produce_v11_with_4g_topics_is_rejected() {
    let err = body_error(hex("0000000b00000001ffff0000ffff00007530ffffffff0f"));
    assert!(matches!(err, DecodeError::BadLength { .. }), "{err:?}");
}

#[test]
fn fetch_v16_with_huge_partition_count_is_rejected() {
    let frame = hex("0001001000000001ffff00000001f40000000103200000000000000000000000ffffffff0f");
    let result = codec::decode_request(frame);
    let err = result.expect_err("must fail");
    assert_eq!(err.ids().map(|ids| ids.correlation_id), Some(1));
}

#[test]
fn consumer_group_heartbeat_v0_with_huge_string_is_rejected() {
    let frame = hex("0044000000000001ffff0002670100000000000000007530ffffffff0f");
    let err = codec::decode_request(frame).expect_err("must fail");
    assert_eq!(err.ids().map(|ids| ids.api_key), Some(68));
}

#[test]
fn empty_and_two_byte_frames_mean_close() {
    assert_eq!(
        codec::decode_request(Bytes::new()),
        Err(FrameError::TooShort(0))
    );
    let err = codec::decode_request(hex("0012")).expect_err("must fail");
    assert_eq!(err, FrameError::TooShort(2));
    assert_eq!(err.ids(), None);
}

#[test]
fn unknown_api_and_unsupported_version_are_caught_before_the_body() {
    // Api key 1000, and Produce v2 (below the Kafka 4.0 floor), with garbage bodies.
    let err = codec::decode_request(hex("03e8000000000009ffffdeadbeef")).expect_err("fails");
    assert!(matches!(err, FrameError::UnknownApi(ids) if ids.correlation_id == 9));
    let err = codec::decode_request(hex("0000000200000009ffffdeadbeef")).expect_err("fails");
    assert!(matches!(err, FrameError::UnsupportedVersion(ids) if ids.api_version == 2));
    assert!(!codec::versions::is_supported(0, 2));
    assert!(codec::versions::is_supported(0, 13));
    assert!(!codec::versions::is_supported(0, 14));
}

#[test]
fn api_versions_fallback_is_v0_with_unsupported_version() {
    // A client asking for ApiVersions v127.
    let err = codec::decode_request(hex("0012007f0000002a0000")).expect_err("fails");
    let FrameError::UnsupportedVersion(ids) = err else {
        panic!("{err:?}")
    };
    let chunks = codec::api_versions_fallback_response(ids.correlation_id);
    let frame: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
    let mut frame = Bytes::from(frame);
    assert_eq!(
        frame.len(),
        4 + u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize
    );
    let _ = frame.split_to(4);
    assert_eq!(&frame[..4], &42i32.to_be_bytes());
    let _ = frame.split_to(4);
    // The v0 body, as kafka-protocol reads it.
    use kafka_protocol::protocol::Decodable;
    let theirs = kafka_protocol::messages::ApiVersionsResponse::decode(&mut frame.clone(), 0)
        .expect("v0 body");
    assert_eq!(theirs.error_code, ErrorCode::UnsupportedVersion.code());
    assert_eq!(theirs.api_keys.len(), codec::SUPPORTED_APIS.len());
    let ours = api_versions::ApiVersionsResponse::decode(&mut frame, 0).expect("ours");
    assert_eq!(ours.api_keys, api_versions::served_api_versions());
}

#[test]
fn trailing_bytes_after_a_request_body_are_ignored_as_kafka_does() {
    let header = RequestHeader {
        api_key: 18,
        api_version: 3,
        correlation_id: 5,
        client_id: Some("c".into()),
    };
    let body = api_versions::ApiVersionsRequest::default();
    let mut frame = BytesMut::new();
    for chunk in codec::encode_request(&header, &body) {
        frame.extend_from_slice(&chunk);
    }
    frame.extend_from_slice(&[0, 1, 0]);
    let frame = frame.freeze().slice(4..);
    match codec::decode_request(frame) {
        Ok((_, codec::Request::ApiVersions(decoded))) => assert_eq!(decoded, body),
        other => panic!("expected the body, got {other:?}"),
    }
    let mut strict = Bytes::from_static(&[1, 1, 0, 9]);
    assert_eq!(
        api_versions::ApiVersionsRequest::decode_body(&mut strict, 3),
        Err(DecodeError::TrailingBytes(1))
    );
}

#[test]
fn invalid_utf8_is_an_error() {
    // Metadata v1, one topic named "\xff".
    let err = body_error(hex("000300010000000100000000000100 01ff"
        .replace(' ', "")
        .as_str()));
    assert_eq!(err, DecodeError::BadUtf8);
}

#[test]
fn unknown_tagged_fields_are_skipped_and_known_ones_size_checked() {
    // ApiVersions v3 request: two compact strings, then tagged fields.
    let mut body = hex("026102620263");
    // Insert a tag count of 2 with unknown tags 7 and 100.
    body = {
        let mut b = BytesMut::from(&body[..4]);
        b.extend_from_slice(&[2, 7, 3, 1, 2, 3, 100, 0]);
        b.freeze()
    };
    let decoded = api_versions::ApiVersionsRequest::decode(&mut body.clone(), 3).expect("ok");
    assert_eq!(decoded.client_software_name, "a");
    assert_eq!(decoded.client_software_version, "b");

    // Fetch v12 request whose tag 0 (cluster id) claims 5 bytes but holds a 2-byte string.
    let request = fetch::FetchRequest::default();
    let mut enc = codec::Encoder::new();
    request.encode(&mut enc, 12);
    let plain = enc.into_bytes();
    let mut tampered = BytesMut::from(&plain[..plain.len() - 1]);
    tampered.extend_from_slice(&[1, 0, 5, 2, b'x', 0, 0, 0]);
    let err = fetch::FetchRequest::decode(&mut tampered.freeze(), 12).expect_err("size");
    assert!(
        matches!(err, DecodeError::TaggedFieldSize { tag: 0, .. }),
        "{err:?}"
    );
}

#[test]
fn null_where_not_nullable_is_an_error() {
    // Metadata v0 does not allow a null topic array.
    let err = body_error(hex("00030000000000010000ffffffff"));
    assert_eq!(err, DecodeError::UnexpectedNull);
    // Negative lengths other than -1.
    let err = body_error(hex("00030000000000010000fffffffe"));
    assert!(matches!(err, DecodeError::BadLength { length: -2, .. }));
}

#[test]
fn produce_records_are_zero_copy_and_fetch_records_are_not_copied_out() {
    let records = Bytes::from(vec![0xabu8; 64 * 1024]);
    let request = produce::ProduceRequest {
        acks: -1,
        timeout_ms: 1000,
        topic_data: vec![produce::TopicProduceData {
            name: "t".into(),
            partition_data: vec![produce::PartitionProduceData {
                index: 0,
                records: Some(records.clone()),
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let header = RequestHeader {
        api_key: 0,
        api_version: 11,
        correlation_id: 1,
        client_id: None,
    };
    let chunks = codec::encode_request(&header, &request);
    let mut joined = BytesMut::new();
    for chunk in &chunks {
        joined.extend_from_slice(chunk);
    }
    let frame = joined.freeze().slice(4..);
    let frame_range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
    let (_, decoded) = codec::decode_request(frame.clone()).expect("decodes");
    let codec::Request::Produce(decoded) = decoded else {
        panic!("not a produce request")
    };
    let got = decoded.topic_data[0].partition_data[0]
        .records
        .clone()
        .expect("records");
    assert_eq!(got, records);
    assert!(
        frame_range.contains(&(got.as_ptr() as usize)),
        "records were copied"
    );

    let response = fetch::FetchResponse {
        responses: vec![fetch::FetchableTopicResponse {
            topic_id: codec::Uuid([1; 16]),
            partitions: vec![fetch::PartitionData {
                records: Some(records.clone()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let chunks = codec::encode_response(9, 16, &response);
    assert!(chunks.len() >= 2);
    assert!(chunks
        .iter()
        .any(|c| c.as_ptr() == records.as_ptr() && c.len() == records.len()));
    let total: usize = chunks.iter().map(Bytes::len).sum();
    let size = i32::from_be_bytes([chunks[0][0], chunks[0][1], chunks[0][2], chunks[0][3]]);
    assert_eq!(size as usize, total - 4);
    assert_eq!(fetch::FetchResponse::API_KEY, 1);
}
