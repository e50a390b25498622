//! Hostile or malformed input gets a Kafka error code or a closed connection, never a crash,
//! and stored data is untouched.

mod support;

use bytes::Bytes;
use kaas_engine::batch::recompress::recompress_batches;
use kaas_engine::batch::{compute_crc, encode_batch_for_tests, BatchHeader, CRC_POS};
use kaas_engine::compression::{Codec, CompressionTarget};
use kaas_net::protocol::messages::api_versions::ApiVersionsRequest;
use kaas_net::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use kaas_net::protocol::{ErrorCode, Response};
use support::{produce_request, Kaas, WireClient};

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}

fn assert_still_serving(kaas: &Kaas) {
    let mut client = kaas.client();
    match client.call(3, &ApiVersionsRequest::default()) {
        Response::ApiVersions(r) => assert_eq!(r.error_code, 0),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn hostile_frames_close_the_connection_and_the_broker_survives() {
    let kaas = Kaas::start(None, &["--max-request-bytes", "1048576"]);
    let hostile: Vec<Vec<u8>> = vec![
        framed(&hex("000300000000000100007fffffff")),
        framed(&hex("0000000b00000001ffff0000ffff00007530ffffffff0f")),
        framed(&hex(
            "0001001000000001ffff00000001f40000000103200000000000000000000000ffffffff0f",
        )),
        framed(&hex(
            "0044000000000001ffff0002670100000000000000007530ffffffff0f",
        )),
        framed(&[]),
        framed(&hex("0012")),
        framed(&hex("03e7000000000001ffff")), // unknown API key 999
        (-5i32).to_be_bytes().to_vec(),       // negative size
        (2 * 1048576i32).to_be_bytes().to_vec(), // over socket.request.max.bytes
    ];
    for frame in hostile {
        let mut client = kaas.client();
        client.send_raw(&frame).expect("send");
        assert!(
            client.is_closed_by_peer(),
            "frame {frame:02x?} should close the connection"
        );
    }
    assert_still_serving(&kaas);
}

#[test]
fn api_versions_newer_than_served_is_answered_in_v0() {
    let kaas = Kaas::start(None, &[]);
    let mut client = kaas.client();
    // ApiVersions v99, correlation id 7, client id "x".
    client
        .send_raw(&framed(&hex("0012006300000007000178")))
        .expect("send");
    let frame = client.read_frame().expect("an answer");
    let (correlation_id, response) =
        kaas_net::protocol::decode_response(18, 0, frame).expect("v0 response");
    assert_eq!(correlation_id, 7);
    let Response::ApiVersions(response) = response else {
        panic!("not ApiVersions")
    };
    assert_eq!(response.error_code, ErrorCode::UnsupportedVersion.code());
    assert!(
        response.api_keys.iter().any(|k| k.api_key == 0),
        "Produce advertised"
    );
}

fn fetch_all(client: &mut WireClient, topic: &str, partition: i32) -> Vec<Bytes> {
    let request = FetchRequest {
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 50 << 20,
        topics: vec![FetchTopic {
            topic: topic.into(),
            partitions: vec![FetchPartition {
                partition,
                fetch_offset: 0,
                partition_max_bytes: 50 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match client.call(12, &request) {
        Response::Fetch(r) => {
            let data = &r.responses[0].partitions[0];
            assert_eq!(data.error_code, 0);
            let records = data.records.clone().unwrap_or_default();
            kaas_engine::batch::scan_batches(&records, 0)
                .map(|b| records.slice(b.position as usize..b.position as usize + b.total_len))
                .collect()
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_corrupt_batch_fails_only_its_partition_and_stored_data_is_untouched() {
    let kaas = Kaas::start(None, &[]);
    let mut client = kaas.client();
    client.create_topic("guarded", 2, &[("max.message.bytes", "2000")]);
    let good = encode_batch_for_tests(&[(Some(b"k"), Some(b"first"))], 1_000, -1, 0, -1);
    assert_eq!(
        client.produce("guarded", vec![(0, good.clone())]),
        vec![(0, 0, 0)]
    );

    let mut flipped = encode_batch_for_tests(&[(Some(b"k"), Some(b"evil"))], 1_000, -1, 0, -1);
    let last = flipped.len() - 1;
    flipped[last] ^= 0x40;
    let second = encode_batch_for_tests(&[(None, Some(b"second"))], 2_000, -1, 0, -1);
    let results = client.produce("guarded", vec![(0, flipped), (1, second)]);
    assert_eq!(results[0].1, ErrorCode::CorruptMessage.code());
    assert_eq!(results[1], (1, 0, 0));

    // A header claiming 2^31-1 records with no record bytes.
    let mut liar = encode_batch_for_tests(&[(None, Some(b"x"))], 1_000, -1, 0, -1);
    liar[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    liar[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
    let results = client.produce("guarded", vec![(0, with_fresh_crc(liar))]);
    assert_eq!(results[0].1, ErrorCode::InvalidRecord.code());

    let big_value = vec![7u8; 5000];
    let oversized = encode_batch_for_tests(&[(None, Some(&big_value))], 1_000, -1, 0, -1);
    let results = client.produce("guarded", vec![(0, oversized)]);
    assert_eq!(results[0].1, ErrorCode::MessageTooLarge.code());

    let stored = fetch_all(&mut client, "guarded", 0);
    assert_eq!(stored.len(), 1, "only the first good batch is stored");
    let header = BatchHeader::parse(&stored[0]).expect("header");
    assert_eq!(header.base_offset, 0);
    assert_eq!(&stored[0][61..], &good[61..], "records stored verbatim");
    assert_still_serving(&kaas);
}

/// `batch` with its CRC computed again, so only the intended check can fail.
fn with_fresh_crc(mut batch: Vec<u8>) -> Vec<u8> {
    let crc = compute_crc(&batch);
    batch[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
    batch
}

fn in_codec(batch: &[u8], codec: Codec) -> Vec<u8> {
    let target = CompressionTarget { codec, level: None };
    recompress_batches(batch, target, usize::MAX)
        .expect("valid batch")
        .expect("re-encoded")
}

#[test]
fn compressed_batches_are_validated_and_refused_with_kafkas_codes() {
    let kaas = Kaas::start(None, &[]);
    let mut client = kaas.client();
    client.create_topic("squeezed", 1, &[]);
    let plain = encode_batch_for_tests(
        &[(Some(b"k"), Some(b"one")), (None, Some(b"two"))],
        1_000,
        -1,
        0,
        -1,
    );
    let good = in_codec(&plain, Codec::Lz4);
    assert_eq!(
        client.produce("squeezed", vec![(0, good.clone())]),
        vec![(0, 0, 0)]
    );

    // A CRC-valid lz4 batch whose records section is not lz4: Kafka 4.4 answers
    // UNKNOWN_SERVER_ERROR (its decoder's exception), and stores nothing.
    let mut undecodable = good.clone();
    let section_end = undecodable.len();
    for byte in &mut undecodable[61 + 8..section_end] {
        *byte ^= 0x5a;
    }
    let undecodable = with_fresh_crc(undecodable);
    let results = client.produce("squeezed", vec![(0, undecodable)]);
    assert_eq!(results[0].1, ErrorCode::UnknownServerError.code());

    // A zstd frame declaring a 2^40-byte window (past what libzstd decodes): Kafka 4.4
    // answers UNKNOWN_SERVER_ERROR, as for any records that do not decompress.
    let mut huge_window = good[..61].to_vec();
    huge_window[21..23].copy_from_slice(&4i16.to_be_bytes()); // zstd
    huge_window.extend_from_slice(&[0x28, 0xb5, 0x2f, 0xfd, 0x00, 30 << 3]);
    huge_window.extend_from_slice(&[0x03, 0x00, 0x10, 0x00]); // one RLE block of zeros, last
    let length = (huge_window.len() - 12) as i32;
    huge_window[8..12].copy_from_slice(&length.to_be_bytes());
    let results = client.produce("squeezed", vec![(0, with_fresh_crc(huge_window))]);
    assert_eq!(results[0].1, ErrorCode::UnknownServerError.code());

    // Three records claimed, two inside: INVALID_RECORD.
    let mut miscounted = in_codec(&plain, Codec::Zstd);
    miscounted[57..61].copy_from_slice(&3i32.to_be_bytes());
    miscounted[23..27].copy_from_slice(&2i32.to_be_bytes());
    let results = client.produce("squeezed", vec![(0, with_fresh_crc(miscounted))]);
    assert_eq!(results[0].1, ErrorCode::InvalidRecord.code());

    // The first record's offsetDelta is 1: INVALID_RECORD naming record 0.
    let mut shifted = plain.clone();
    shifted[64] = 1 << 1;
    let request = produce_request("squeezed", vec![(0, with_fresh_crc(shifted))]);
    match client.call(9, &request) {
        Response::Produce(r) => {
            let partition = &r.responses[0].partition_responses[0];
            assert_eq!(partition.error_code, ErrorCode::InvalidRecord.code());
            assert_eq!(partition.record_errors.len(), 1);
            assert_eq!(partition.record_errors[0].batch_index, 0);
            assert!(partition.error_message.is_some());
        }
        other => panic!("unexpected {other:?}"),
    }

    // Two batches for one partition: INVALID_RECORD, as Kafka answers Produce v3 and later.
    let two = [plain.clone(), plain.clone()].concat();
    let results = client.produce("squeezed", vec![(0, two)]);
    assert_eq!(results[0].1, ErrorCode::InvalidRecord.code());

    // Nothing of the refused batches was stored: a consumer reads the first batch only,
    // byte for byte as produced (still lz4).
    let stored = fetch_all(&mut client, "squeezed", 0);
    assert_eq!(stored.len(), 1);
    assert_eq!(&stored[0][21..], &good[21..]);
    assert_still_serving(&kaas);
}
