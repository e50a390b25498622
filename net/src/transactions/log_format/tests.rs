use bytes::Bytes;
use proptest::prelude::*;

use super::*;

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex digit"))
        .collect()
}

fn partitions(topic: &str, ids: &[i32]) -> TransactionLogPartitions {
    TransactionLogPartitions {
        topic: topic.to_owned(),
        partition_ids: ids.to_vec(),
        unknown_tagged_fields: Vec::new(),
    }
}

fn value(version: i16) -> TransactionLogValue {
    TransactionLogValue {
        version,
        producer_id: 0,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch: 0,
        next_producer_epoch: -1,
        transaction_timeout_ms: 0,
        transaction_status: 0,
        transaction_partitions: Some(Vec::new()),
        transaction_last_update_timestamp_ms: 0,
        transaction_start_timestamp_ms: 0,
        client_transaction_version: 0,
        unknown_tagged_fields: Vec::new(),
    }
}

/// Decodes Kafka's bytes to `expected` and encodes `expected` back to the same bytes.
fn check_golden_value(golden: &str, expected: &TransactionLogValue) {
    let bytes = hex(golden);
    let decoded = decode_value(Bytes::from(bytes.clone())).expect("Kafka's value decodes");
    assert_eq!(&decoded, expected);
    assert_eq!(encode_value(expected).expect("encodes"), bytes);
}

// The golden strings are the output of net/tests/golden/TransactionLogGolden.java run
// against Kafka 4.4.0's jars.

#[test]
fn keys_match_kafka() {
    for (golden, id) in [
        ("000000066d792d74786e", "my-txn"),
        ("00000000", ""),
        ("0000000974782dc3a9f09f9880", "tx-\u{e9}\u{1F600}"),
    ] {
        let key = TransactionLogKey {
            transactional_id: id.to_owned(),
        };
        assert_eq!(encode_key(&key).expect("encodes"), hex(golden));
        assert_eq!(decode_key(Bytes::from(hex(golden))), Ok(key));
    }
}

#[test]
fn v0_and_v1_values_match_kafka() {
    let mut ongoing = TransactionLogValue {
        producer_id: 1000,
        producer_epoch: 5,
        transaction_timeout_ms: 60_000,
        transaction_status: 1,
        transaction_partitions: Some(vec![
            partitions("orders", &[2, 0]),
            partitions("__consumer_offsets", &[17]),
        ]),
        transaction_last_update_timestamp_ms: 1_700_000_000_123,
        transaction_start_timestamp_ms: 1_700_000_000_000,
        ..value(0)
    };
    check_golden_value(
        "000000000000000003e800050000ea60010000000200066f726465727300000002000000020000000000125f5f636f6e73756d65725f6f66667365747300000001000000110000018bcfe5687b0000018bcfe56800",
        &ongoing,
    );
    ongoing.version = 1;
    check_golden_value(
        "000100000000000003e800050000ea600103076f726465727303000000020000000000135f5f636f6e73756d65725f6f6666736574730200000011000000018bcfe5687b0000018bcfe5680000",
        &ongoing,
    );
}

#[test]
fn null_partition_lists_match_kafka() {
    let mut empty = TransactionLogValue {
        producer_id: 42,
        transaction_timeout_ms: 900_000,
        transaction_partitions: None,
        transaction_last_update_timestamp_ms: 1,
        transaction_start_timestamp_ms: -1,
        ..value(0)
    };
    check_golden_value(
        "0000000000000000002a0000000dbba000ffffffff0000000000000001ffffffffffffffff",
        &empty,
    );
    empty.version = 1;
    check_golden_value(
        "0001000000000000002a0000000dbba000000000000000000001ffffffffffffffff00",
        &empty,
    );
}

#[test]
fn every_tagged_field_matches_kafka() {
    let prepare_commit = TransactionLogValue {
        producer_id: 5000,
        previous_producer_id: 4999,
        next_producer_id: 5001,
        producer_epoch: i16::MAX,
        next_producer_epoch: 7,
        transaction_timeout_ms: 30_000,
        transaction_status: 2,
        transaction_partitions: Some(vec![partitions("t", &[0, 1, 2])]),
        transaction_last_update_timestamp_ms: 1_700_000_005_000,
        transaction_start_timestamp_ms: 1_700_000_004_000,
        client_transaction_version: 2,
        ..value(1)
    };
    // Tags in order 0, 1, 2, 3: the client version (tag 2) before the next epoch (tag 3).
    check_golden_value(
        "000100000000000013887fff000075300202027404000000000000000100000002000000018bcfe57b880000018bcfe577a00400080000000000001387010800000000000013890202000203020007",
        &prepare_commit,
    );
    let complete_abort = TransactionLogValue {
        producer_id: 7,
        producer_epoch: 3,
        transaction_timeout_ms: 10_000,
        transaction_status: 5,
        transaction_partitions: Some(Vec::new()),
        transaction_last_update_timestamp_ms: 1_700_000_009_000,
        transaction_start_timestamp_ms: 1_700_000_008_000,
        client_transaction_version: 2,
        ..value(1)
    };
    check_golden_value(
        "0001000000000000000700030000271005010000018bcfe58b280000018bcfe587400102020002",
        &complete_abort,
    );
}

#[test]
fn values_kafkas_coordinator_wrote_decode_and_encode_back() {
    // TransactionLog.valueToBytes of coordinator transitions (the metadata-level tests in
    // metadata.rs build the same values from transitions).
    for golden in [
        "00010000000000001f40000c0000ea600102076f72646572730200000003000000018bcfe6f0940000018bcfe6eea00200080000000000001f3f02020002",
        "00000000000000001f4100000000ea6000ffffffff0000018bcfe87540ffffffffffffffff",
        "00010000000000001f4100000000ea6000000000018bcfe87540ffffffffffffffff00",
        "0001000000000000232900000000ea6004010000018bcfe9ffc80000018bcfe9fbe0020008000000000000232802020002",
    ] {
        let bytes = hex(golden);
        let decoded = decode_value(Bytes::from(bytes.clone())).expect("decodes");
        assert_eq!(encode_value(&decoded).expect("encodes"), bytes, "{golden}");
    }
}

#[test]
fn unknown_versions_and_types_are_named() {
    assert_eq!(
        decode_key(Bytes::from(hex("00010000"))),
        Err(TransactionLogError::UnknownKeyType(1))
    );
    assert_eq!(
        decode_value(Bytes::from(hex("0002"))),
        Err(TransactionLogError::UnknownValueVersion(2))
    );
    assert_eq!(
        encode_value(&value(2)),
        Err(TransactionLogError::UnknownValueVersion(2))
    );
}

#[test]
fn v0_refuses_tagged_fields_as_kafka_does() {
    let tagged = TransactionLogValue {
        client_transaction_version: 2,
        ..value(0)
    };
    assert!(matches!(
        encode_value(&tagged),
        Err(TransactionLogError::NotWritable { .. })
    ));
}

#[test]
fn hostile_lengths_are_refused_before_allocating() {
    // v0, partitions count i32::MAX with nothing behind it.
    let mut bytes = hex("0000000000000000000100000000000001");
    bytes.extend_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(
        decode_value(Bytes::from(bytes)),
        Err(TransactionLogError::Decode(DecodeError::BadLength { .. }))
    ));
    // v1, 2^31 tagged fields announced.
    let mut v1 = encode_value(&value(1)).expect("encodes");
    v1.pop();
    v1.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]);
    assert!(decode_value(Bytes::from(v1)).is_err());
    // A known tag whose size does not fit its type.
    let mut wrong_size = encode_value(&value(1)).expect("encodes");
    wrong_size.pop();
    wrong_size.extend_from_slice(&[1, 2, 3, 0, 0, 0]);
    assert!(matches!(
        decode_value(Bytes::from(wrong_size)),
        Err(TransactionLogError::Decode(DecodeError::TaggedFieldSize {
            tag: 2,
            ..
        }))
    ));
    // Trailing bytes.
    let mut trailing = encode_value(&value(0)).expect("encodes");
    trailing.push(0);
    assert_eq!(
        decode_value(Bytes::from(trailing)),
        Err(TransactionLogError::Decode(DecodeError::TrailingBytes(1)))
    );
}

fn arb_tagged() -> impl Strategy<Value = Vec<RawTaggedField>> {
    prop::collection::vec(
        (4u32..200, prop::collection::vec(any::<u8>(), 0..6))
            .prop_map(|(tag, data)| RawTaggedField { tag, data }),
        0..3,
    )
}

fn arb_value() -> impl Strategy<Value = TransactionLogValue> {
    let partitions = prop::collection::vec(
        (
            "[a-z._-]{0,12}",
            prop::collection::vec(any::<i32>(), 0..5),
            arb_tagged(),
        ),
        0..4,
    );
    (
        (0i16..=1, any::<i64>(), any::<i64>(), any::<i64>()),
        (any::<i16>(), any::<i16>(), any::<i32>(), any::<i8>()),
        prop::option::of(partitions),
        (any::<i64>(), any::<i64>(), any::<i16>(), arb_tagged()),
    )
        .prop_map(
            |(
                (version, producer_id, previous, next),
                (epoch, next_epoch, timeout, status),
                partitions,
                (last_update, start, client_version, unknown),
            )| {
                let flexible = version >= 1;
                TransactionLogValue {
                    version,
                    producer_id,
                    // Tagged fields exist in v1 only.
                    previous_producer_id: if flexible { previous } else { -1 },
                    next_producer_id: if flexible { next } else { -1 },
                    producer_epoch: epoch,
                    next_producer_epoch: if flexible { next_epoch } else { -1 },
                    transaction_timeout_ms: timeout,
                    transaction_status: status,
                    transaction_partitions: partitions.map(|entries| {
                        entries
                            .into_iter()
                            .map(|(topic, partition_ids, tags)| TransactionLogPartitions {
                                topic,
                                partition_ids,
                                unknown_tagged_fields: if flexible { tags } else { Vec::new() },
                            })
                            .collect()
                    }),
                    transaction_last_update_timestamp_ms: last_update,
                    transaction_start_timestamp_ms: start,
                    client_transaction_version: if flexible { client_version } else { 0 },
                    unknown_tagged_fields: if flexible { unknown } else { Vec::new() },
                }
            },
        )
}

proptest! {
    #[test]
    fn values_round_trip(value in arb_value()) {
        let bytes = encode_value(&value).expect("encodes");
        let decoded = decode_value(Bytes::from(bytes.clone())).expect("decodes");
        prop_assert_eq!(&decoded, &value);
        prop_assert_eq!(encode_value(&decoded).expect("encodes"), bytes);
    }

    #[test]
    fn keys_round_trip(id in "\\PC{0,40}") {
        let key = TransactionLogKey { transactional_id: id };
        let bytes = encode_key(&key).expect("encodes");
        prop_assert_eq!(decode_key(Bytes::from(bytes)), Ok(key));
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_key(Bytes::from(bytes.clone()));
        if let Ok(value) = decode_value(Bytes::from(bytes.clone())) {
            // Whatever decodes is canonical enough to come back the same.
            let again = encode_value(&value).expect("a decoded value encodes");
            prop_assert_eq!(decode_value(Bytes::from(again)).expect("decodes"), value);
        }
    }

    #[test]
    fn every_truncation_and_bit_flip_is_handled(value in arb_value(), flip in any::<prop::sample::Index>()) {
        let bytes = encode_value(&value).expect("encodes");
        for cut in 0..bytes.len() {
            prop_assert!(decode_value(Bytes::from(bytes[..cut].to_vec())).is_err());
        }
        let mut flipped = bytes.clone();
        let at = flip.index(flipped.len());
        flipped[at] ^= 0x5a;
        let _ = decode_value(Bytes::from(flipped));
    }
}
