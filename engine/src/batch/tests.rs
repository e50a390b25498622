#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::*;
use crate::compression::{self, Codec, CompressionError, CompressionTarget};

const MAX: usize = 1 << 20;

fn sample() -> Vec<u8> {
    encode_batch_for_tests(
        &[
            (Some(b"k1"), Some(b"value-one")),
            (None, Some(b"v2")),
            (Some(b"k3"), None),
        ],
        1_700_000_000_000,
        42,
        3,
        7,
    )
}

/// Overwrites `bytes` at `at` and repairs the CRC, so only the intended check can fail.
fn patch(batch: &mut [u8], at: usize, bytes: &[u8]) {
    batch[at..at + bytes.len()].copy_from_slice(bytes);
    let crc = compute_crc(batch);
    batch[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
}

fn set_counts(batch: &mut [u8], records_count: i32, last_offset_delta: i32) {
    patch(batch, RECORDS_COUNT_POS, &records_count.to_be_bytes());
    patch(
        batch,
        LAST_OFFSET_DELTA_POS,
        &last_offset_delta.to_be_bytes(),
    );
}

#[test]
fn test_batch_validates_with_expected_header() {
    let batch = sample();
    let summaries = validate_batches(&batch, MAX).unwrap();
    assert_eq!(summaries.len(), 1);
    let s = &summaries[0];
    assert_eq!(s.range, 0..batch.len());
    assert_eq!(s.record_count, 3);
    assert_eq!(s.header.records_count, 3);
    assert_eq!(s.header.last_offset_delta, 2);
    assert_eq!(s.header.producer_id, 42);
    assert_eq!(s.header.producer_epoch, 3);
    assert_eq!(s.header.base_sequence, 7);
    assert_eq!(s.header.last_sequence(), 9);
    assert_eq!(s.header.total_len(), batch.len());
    assert_eq!(s.header.next_offset(), 3);
    assert_eq!(s.header.timestamp_type(), TimestampType::CreateTime);
    assert!(s.header.has_producer_id());
    assert!(!s.header.is_transactional() && !s.header.is_control());
}

#[test]
fn test_concatenated_batches_report_their_ranges() {
    let mut buf = sample();
    let first = buf.len();
    buf.extend_from_slice(&encode_batch_for_tests(
        &[(None, Some(b"x"))],
        5,
        -1,
        -1,
        -1,
    ));
    let summaries = validate_batches(&buf, MAX).unwrap();
    assert_eq!(summaries.len(), 2);
    assert_eq!(summaries[0].range, 0..first);
    assert_eq!(summaries[1].range, first..buf.len());
    assert!(!summaries[1].header.has_producer_id());
    assert_eq!(summaries[1].header.last_sequence(), NO_SEQUENCE);
}

#[test]
fn test_empty_input_is_rejected() {
    assert_eq!(validate_batches(&[], MAX), Err(BatchError::Empty));
}

#[test]
fn test_truncated_batch_is_rejected() {
    let batch = sample();
    let cut = &batch[..batch.len() - 1];
    assert_eq!(
        validate_batches(cut, MAX),
        Err(BatchError::Truncated {
            needed: batch.len(),
            available: batch.len() - 1
        })
    );
    assert!(matches!(
        validate_batches(&batch[..5], MAX),
        Err(BatchError::Truncated { available: 5, .. })
    ));
    assert!(matches!(
        BatchHeader::parse(&batch[..60]),
        Err(BatchError::Truncated { needed: 61, .. })
    ));
}

#[test]
fn test_bad_batch_length_is_rejected() {
    for length in [-1i32, 0, 48, i32::MIN] {
        let mut batch = sample();
        batch[BATCH_LENGTH_POS..][..4].copy_from_slice(&length.to_be_bytes());
        assert_eq!(
            validate_batches(&batch, MAX),
            Err(BatchError::BadLength(length))
        );
        assert_eq!(
            BatchHeader::parse(&batch),
            Err(BatchError::BadLength(length))
        );
    }
}

#[test]
fn test_old_magic_is_rejected() {
    let mut batch = sample();
    batch[MAGIC_POS] = 1;
    assert_eq!(
        validate_batches(&batch, MAX),
        Err(BatchError::UnsupportedMagic(1))
    );
}

#[test]
fn test_flipped_payload_bit_fails_crc() {
    let mut batch = sample();
    let last = batch.len() - 2;
    batch[last] ^= 0x10;
    assert!(matches!(
        validate_batches(&batch, MAX),
        Err(BatchError::CrcMismatch { .. })
    ));
}

#[test]
fn test_record_count_mismatch_is_rejected() {
    for (count, delta) in [(0, -1), (3, 3), (-5, -6), (i32::MIN, i32::MAX)] {
        let mut batch = sample();
        set_counts(&mut batch, count, delta);
        assert_eq!(
            validate_batches(&batch, MAX),
            Err(BatchError::RecordCountMismatch {
                records_count: count,
                last_offset_delta: delta
            })
        );
    }
}

#[test]
fn test_oversized_batch_is_rejected_before_reading_it() {
    let batch = sample();
    assert_eq!(
        validate_batches(&batch, batch.len() - 1),
        Err(BatchError::TooLarge {
            size: batch.len(),
            max: batch.len() - 1
        })
    );
    // The claimed size decides, even when the bytes are not there.
    assert!(matches!(
        validate_batches(&batch[..20], 80),
        Err(BatchError::TooLarge { .. })
    ));
}

#[test]
fn test_unknown_codec_is_rejected() {
    let mut batch = sample();
    patch(&mut batch, ATTRIBUTES_POS, &5i16.to_be_bytes());
    assert_eq!(
        validate_batches(&batch, MAX),
        Err(BatchError::InvalidCompression(5))
    );
}

/// `sample()` re-encoded in `codec`.
fn compressed(codec: Codec) -> Vec<u8> {
    let target = CompressionTarget { codec, level: None };
    recompress::recompress_batches(&sample(), target, MAX)
        .unwrap()
        .unwrap()
}

/// A batch in `codec` whose records section is `section` (CRC and length repaired).
fn with_section(codec: Codec, section: &[u8]) -> Vec<u8> {
    let mut batch = sample();
    batch.truncate(BATCH_HEADER_LEN);
    batch.extend_from_slice(section);
    let length = (batch.len() - LOG_OVERHEAD) as i32;
    batch[BATCH_LENGTH_POS..][..4].copy_from_slice(&length.to_be_bytes());
    patch(
        &mut batch,
        ATTRIBUTES_POS,
        &i16::from(codec.id()).to_be_bytes(),
    );
    batch
}

const CODECS: [Codec; 4] = [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd];

#[test]
fn test_compressed_batches_validate_in_every_codec() {
    for codec in CODECS {
        let batch = compressed(codec);
        assert_eq!(BatchHeader::parse(&batch).unwrap().codec(), Some(codec));
        let summaries = validate_batches(&batch, MAX).unwrap();
        assert_eq!(summaries[0].record_count, 3, "{codec:?}");
    }
}

#[test]
fn test_compressed_records_that_do_not_decompress_are_refused() {
    for codec in CODECS {
        let batch = with_section(codec, b"these bytes are not compressed data at all");
        let error = validate_batches(&batch, MAX).unwrap_err();
        assert!(
            matches!(
                error,
                BatchError::Compression(CompressionError::Corrupt { .. })
                    | BatchError::Compression(CompressionError::TooLarge { .. })
            ),
            "{codec:?}: {error:?}"
        );
    }
}

#[test]
fn test_compressed_records_are_walked_against_the_header() {
    for codec in CODECS {
        // The header claims four records; three are inside.
        let mut batch = compressed(codec);
        set_counts(&mut batch, 4, 3);
        assert!(
            matches!(
                validate_batches(&batch, MAX),
                Err(BatchError::InvalidRecords(_))
            ),
            "{codec:?}"
        );
        // The header claims two; three are inside.
        let mut batch = compressed(codec);
        set_counts(&mut batch, 2, 1);
        assert_eq!(
            validate_batches(&batch, MAX),
            Err(BatchError::InvalidRecords("bytes after the last record")),
            "{codec:?}"
        );
    }
}

#[test]
fn test_offset_deltas_must_count_from_zero_in_order() {
    // Record 0 is at byte 61: length, attributes, timestampDelta, then offsetDelta.
    let mut plain = sample();
    patch(&mut plain, BATCH_HEADER_LEN + 3, &[2 << 1]);
    let expected = Err(BatchError::OffsetDeltaMismatch { index: 0, found: 2 });
    assert_eq!(validate_batches(&plain, MAX), expected);
    let mut section = Vec::new();
    compression::compress(Codec::Lz4, None, &plain[BATCH_HEADER_LEN..], &mut section).unwrap();
    assert_eq!(
        validate_batches(&with_section(Codec::Lz4, &section), MAX),
        expected
    );
}

#[test]
fn test_client_rules_refuse_control_batches_and_missing_sequences() {
    let mut control = sample();
    patch(&mut control, ATTRIBUTES_POS, &CONTROL_MASK.to_be_bytes());
    assert_eq!(
        validate_batches(&control, MAX),
        Err(BatchError::ControlBatch)
    );
    let no_sequence = encode_batch_for_tests(&[(None, Some(b"v"))], 1, 9, 0, -1);
    assert_eq!(
        validate_batches(&no_sequence, MAX),
        Err(BatchError::MissingSequence {
            producer_id: 9,
            base_sequence: -1
        })
    );
}

#[test]
fn test_snappy_bomb_is_refused_by_its_declared_length() {
    // A raw snappy block whose preamble declares 2^32 - 1 bytes: 67 bytes in all.
    let bomb = with_section(Codec::Snappy, &[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]);
    assert_eq!(bomb.len(), 67);
    assert_eq!(
        validate_batches(&bomb, MAX),
        Err(BatchError::Compression(CompressionError::TooLarge {
            cap: compression::MAX_DECOMPRESSED_BATCH
        }))
    );
}

#[test]
fn test_records_inflate_up_to_the_memory_bound_not_the_batch_size() {
    let value = vec![0u8; 4096];
    let records: Vec<TestRecord<'_>> = (0..64).map(|_| (None, Some(&value[..]))).collect();
    let plain = encode_batch_for_tests(&records, 1, -1, 0, -1);
    // 17 records of 4 MiB: past the 64 MiB bound once decompressed.
    let huge = vec![0u8; 4 << 20];
    let records: Vec<TestRecord<'_>> = (0..17).map(|_| (None, Some(&huge[..]))).collect();
    let plain_huge = encode_batch_for_tests(&records, 1, -1, 0, -1);
    for codec in CODECS {
        let target = CompressionTarget { codec, level: None };
        let batch = recompress::recompress_batches(&plain, target, usize::MAX)
            .unwrap()
            .unwrap();
        // Small on the wire, 256 KiB of records: the batch size bounds the wire size only,
        // as in Kafka (a record is bounded by max.decompressed.message.bytes).
        assert!(batch.len() < 64 << 10, "{codec:?}: {}", batch.len());
        assert!(validate_batches(&batch, 128 << 10).is_ok(), "{codec:?}");
        let bomb = recompress::recompress_batches(&plain_huge, target, usize::MAX)
            .unwrap()
            .unwrap();
        assert!(bomb.len() < 4 << 20, "{codec:?}: {}", bomb.len());
        assert_eq!(
            validate_batches(&bomb, 4 << 20),
            Err(BatchError::Compression(CompressionError::TooLarge {
                cap: compression::MAX_DECOMPRESSED_BATCH
            })),
            "{codec:?}"
        );
    }
}

#[test]
fn test_record_walk_rejects_malformed_records() {
    // More records claimed than present.
    let mut batch = sample();
    set_counts(&mut batch, 4, 3);
    assert!(matches!(
        validate_batches(&batch, MAX),
        Err(BatchError::InvalidRecords(_))
    ));
    // Fewer records claimed than present: bytes left over.
    let mut batch = sample();
    set_counts(&mut batch, 2, 1);
    assert!(matches!(
        validate_batches(&batch, MAX),
        Err(BatchError::InvalidRecords(_))
    ));
    // A record length pointing past the batch.
    let mut batch = sample();
    patch(&mut batch, BATCH_HEADER_LEN, &[0x7e]);
    assert!(matches!(
        validate_batches(&batch, MAX),
        Err(BatchError::InvalidRecords(_))
    ));
    // A key length running past its record.
    let mut batch = sample();
    patch(&mut batch, BATCH_HEADER_LEN + 4, &[0x40]);
    assert!(matches!(
        validate_batches(&batch, MAX),
        Err(BatchError::InvalidRecords(_))
    ));
}

#[test]
fn test_huge_record_count_without_records_fails_fast() {
    let mut batch = encode_batch_for_tests(&[(None, None)], 0, -1, -1, -1);
    batch.truncate(BATCH_HEADER_LEN);
    patch(
        &mut batch,
        BATCH_LENGTH_POS,
        &MIN_BATCH_LENGTH.to_be_bytes(),
    );
    set_counts(&mut batch, i32::MAX, i32::MAX - 1);
    assert!(matches!(
        validate_batches(&batch, MAX),
        Err(BatchError::InvalidRecords(_))
    ));
}

#[test]
fn test_stamp_keeps_crc_valid() {
    let mut batch = sample();
    let crc_before = BatchHeader::parse(&batch).unwrap().crc;
    stamp_for_append(&mut batch, 1000, 9, None).unwrap();
    let header = validate_batches(&batch, MAX).unwrap()[0].header;
    assert_eq!(
        (header.base_offset, header.partition_leader_epoch),
        (1000, 9)
    );
    assert_eq!(header.crc, crc_before);
    assert_eq!(header.last_offset(), 1002);

    stamp_for_append(&mut batch, 2000, 10, Some(123)).unwrap();
    let header = validate_batches(&batch, MAX).unwrap()[0].header;
    assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(header.max_timestamp, 123);
    assert_eq!(header.base_timestamp, 1_700_000_000_000);
    assert_eq!(header.base_offset, 2000);

    assert!(matches!(
        stamp_for_append(&mut batch[..70], 0, 0, None),
        Err(BatchError::Truncated { .. })
    ));
}

#[test]
fn test_sequence_wraps_to_zero() {
    assert_eq!(increment_sequence(i32::MAX, 1), 0);
    assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    assert_eq!(increment_sequence(5, 2), 7);
}

fn segment(batches: usize) -> (Vec<u8>, Vec<usize>) {
    let mut buf = Vec::new();
    let mut starts = Vec::new();
    for i in 0..batches {
        let mut batch = sample();
        stamp_for_append(&mut batch, (i * 3) as i64, 1, None).unwrap();
        starts.push(buf.len());
        buf.extend_from_slice(&batch);
    }
    (buf, starts)
}

#[test]
fn test_scan_clean_end() {
    let (buf, starts) = segment(3);
    let mut scan = scan_batches(&buf, 4096);
    let found: Vec<_> = scan.by_ref().collect();
    assert_eq!(found.len(), 3);
    for (batch, start) in found.iter().zip(&starts) {
        assert_eq!(batch.position, 4096 + *start as u64);
    }
    assert_eq!(found[2].header.base_offset, 6);
    assert_eq!(scan.stop(), Some(&ScanStop::EndOfData));
    assert_eq!(scan.valid_end(), 4096 + buf.len() as u64);
    assert_eq!(scan.next(), None);
}

#[test]
fn test_scan_stops_at_zero_fill() {
    let (mut buf, _) = segment(2);
    let end = buf.len();
    for zeros in [5usize, 4096] {
        let mut padded = buf.clone();
        padded.resize(end + zeros, 0);
        let mut scan = scan_batches(&padded, 0);
        assert_eq!(scan.by_ref().count(), 2);
        assert_eq!(scan.stop(), Some(&ScanStop::Unwritten));
        assert_eq!(scan.valid_end(), end as u64);
    }
    buf.extend_from_slice(&[0, 0, 1]);
    let mut scan = scan_batches(&buf, 0);
    assert_eq!(scan.by_ref().count(), 2);
    assert!(matches!(scan.stop(), Some(ScanStop::TornTail { .. })));
}

#[test]
fn test_scan_stops_at_torn_tail() {
    let (buf, starts) = segment(3);
    let torn = &buf[..buf.len() - 10];
    let mut scan = scan_batches(torn, 0);
    assert_eq!(scan.by_ref().count(), 2);
    assert!(matches!(scan.stop(), Some(ScanStop::TornTail { .. })));
    assert_eq!(scan.valid_end(), starts[2] as u64);
}

#[test]
fn test_scan_stops_at_corruption() {
    let (mut buf, starts) = segment(3);
    buf[starts[1] + 70] ^= 1;
    let mut scan = scan_batches(&buf, 0);
    assert_eq!(scan.by_ref().count(), 1);
    assert!(matches!(
        scan.stop(),
        Some(ScanStop::Corrupt(BatchError::CrcMismatch { .. }))
    ));
    assert_eq!(scan.valid_end(), starts[1] as u64);

    let (mut buf, starts) = segment(2);
    buf[starts[1] + MAGIC_POS] = 0;
    let mut scan = scan_batches(&buf, 0);
    assert_eq!(scan.by_ref().count(), 1);
    assert_eq!(
        scan.stop(),
        Some(&ScanStop::Corrupt(BatchError::UnsupportedMagic(0)))
    );
}

#[test]
fn test_scan_walks_records_only_when_asked() {
    let mut batch = sample();
    set_counts(&mut batch, 2, 1);
    assert_eq!(scan_batches(&batch, 0).count(), 1);
    let mut scan = scan_batches(&batch, 0).with_record_walk(true);
    assert_eq!(scan.by_ref().count(), 0);
    assert!(matches!(
        scan.stop(),
        Some(ScanStop::Corrupt(BatchError::InvalidRecords(_)))
    ));
}

fn arb_header() -> impl Strategy<Value = BatchHeader> {
    (
        (any::<i64>(), MIN_BATCH_LENGTH..=i32::MAX, any::<i32>()),
        (any::<u32>(), any::<i16>(), any::<i32>()),
        (any::<i64>(), any::<i64>(), any::<i64>()),
        (any::<i16>(), any::<i32>(), any::<i32>()),
    )
        .prop_map(|(a, b, c, d)| BatchHeader {
            base_offset: a.0,
            batch_length: a.1,
            partition_leader_epoch: a.2,
            magic: MAGIC_V2,
            crc: b.0,
            attributes: b.1,
            last_offset_delta: b.2,
            base_timestamp: c.0,
            max_timestamp: c.1,
            producer_id: c.2,
            producer_epoch: d.0,
            base_sequence: d.1,
            records_count: d.2,
        })
}

type Records = Vec<(Option<Vec<u8>>, Option<Vec<u8>>)>;

fn arb_records() -> impl Strategy<Value = Records> {
    let field = proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200));
    proptest::collection::vec((field.clone(), field), 1..20)
}

fn encode(records: &Records, ts: i64, pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    let borrowed: Vec<_> = records
        .iter()
        .map(|(k, v)| (k.as_deref(), v.as_deref()))
        .collect();
    encode_batch_for_tests(&borrowed, ts, pid, epoch, seq)
}

proptest! {
    #[test]
    fn prop_header_round_trips(header in arb_header()) {
        prop_assert_eq!(BatchHeader::parse(&header.encode()), Ok(header));
    }

    #[test]
    fn prop_stamped_batches_validate(
        records in arb_records(),
        ts in any::<i64>(),
        pid in any::<i64>(),
        seq in 0..i32::MAX,
        base_offset in any::<i64>(),
        epoch in any::<i32>(),
        append_time in proptest::option::of(any::<i64>()),
    ) {
        let mut batch = encode(&records, ts, pid, 1, seq);
        stamp_for_append(&mut batch, base_offset, epoch, append_time).unwrap();
        let summaries = validate_batches(&batch, MAX).unwrap();
        let header = summaries[0].header;
        prop_assert_eq!(summaries[0].record_count as usize, records.len());
        prop_assert_eq!(header.base_offset, base_offset);
        prop_assert_eq!(header.partition_leader_epoch, epoch);
        prop_assert_eq!(header.max_timestamp, append_time.unwrap_or(ts));
        prop_assert_eq!(header.producer_id, pid);
        prop_assert_eq!(header.base_sequence, seq);
        prop_assert_eq!(BatchHeader::parse(&header.encode()), Ok(header));
    }

    #[test]
    fn prop_any_single_bit_flip_is_caught(records in arb_records(), bit in any::<usize>()) {
        let mut batch = encode(&records, 0, 1, 0, 0);
        let bit = bit % (batch.len() * 8);
        batch[bit / 8] ^= 1 << (bit % 8);
        // baseOffset and partitionLeaderEpoch are outside the CRC by design.
        let unprotected = bit / 8 < MAGIC_POS && !(BATCH_LENGTH_POS..PARTITION_LEADER_EPOCH_POS)
            .contains(&(bit / 8));
        prop_assert_eq!(validate_batches(&batch, MAX).is_ok(), unprotected);
        let mut scan = scan_batches(&batch, 0);
        prop_assert_eq!(scan.by_ref().count(), usize::from(unprotected));
    }

    #[test]
    fn prop_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = validate_batches(&bytes, MAX);
        let mut scan = scan_batches(&bytes, 0).with_record_walk(true);
        let found = scan.by_ref().count();
        prop_assert!(scan.stop().is_some());
        prop_assert!(scan.valid_end() as usize <= bytes.len());
        prop_assert!(found <= bytes.len() / BATCH_HEADER_LEN);
    }
}

#[test]
fn test_recompression_rewrites_codec_length_and_crc_only() {
    let mut plain = sample();
    // LogAppendTime and transactional bits must survive the re-encoding.
    patch(
        &mut plain,
        ATTRIBUTES_POS,
        &(TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK).to_be_bytes(),
    );
    let before = BatchHeader::parse(&plain).unwrap();
    for codec in CODECS {
        let target = CompressionTarget {
            codec,
            level: Some(1),
        };
        let batch = recompress::recompress_batches(&plain, target, MAX)
            .unwrap()
            .unwrap();
        let after = validate_batches(&batch, MAX).unwrap()[0].header;
        assert_eq!(after.codec(), Some(codec));
        assert_eq!(
            after.attributes & !COMPRESSION_CODEC_MASK,
            before.attributes,
            "{codec:?}"
        );
        assert_eq!(after.total_len(), batch.len());
        assert_eq!(after.crc, compute_crc(&batch));
        let unchanged = |h: &BatchHeader| {
            (
                h.base_offset,
                h.partition_leader_epoch,
                h.last_offset_delta,
                h.base_timestamp,
                h.max_timestamp,
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.records_count,
            )
        };
        assert_eq!(unchanged(&after), unchanged(&before), "{codec:?}");
        // Back to uncompressed gives the producer's records byte for byte.
        let none = CompressionTarget {
            codec: Codec::None,
            level: None,
        };
        let back = recompress::recompress_batches(&batch, none, MAX)
            .unwrap()
            .unwrap();
        assert_eq!(&back[BATCH_HEADER_LEN..], &plain[BATCH_HEADER_LEN..]);
        // Already in the target codec: nothing to rewrite.
        assert_eq!(
            recompress::recompress_batches(&batch, target, MAX),
            Ok(None)
        );
    }
}

#[test]
fn test_recompression_refuses_what_validation_refuses() {
    let mut corrupt = sample();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    let target = CompressionTarget {
        codec: Codec::Zstd,
        level: None,
    };
    assert!(matches!(
        recompress::recompress_batches(&corrupt, target, MAX),
        Err(BatchError::CrcMismatch { .. })
    ));
}

mod produced_records_meet_the_topic_rules {
    use super::*;
    use crate::batch::record_rules::{RecordChecks, RecordFault, RecordFaultAt, RecordRules};
    use crate::config::TimestampType as TopicTimestampType;

    /// `sample()`'s records are stamped 1_700_000_000_000; the clock is an hour and a second
    /// later.
    const NOW: i64 = 1_700_000_000_000 + 3_601_000;

    fn checks(keys_required: bool, before_max_ms: i64) -> RecordChecks {
        RecordChecks {
            rules: RecordRules {
                keys_required,
                timestamp_before_max_ms: before_max_ms,
                ..RecordRules::default()
            },
            timestamp_type: TopicTimestampType::CreateTime,
            now_ms: NOW,
        }
    }

    #[test]
    fn every_keyless_record_is_named_in_every_codec() {
        for batch in [sample(), compressed(Codec::Lz4), compressed(Codec::Zstd)] {
            assert_eq!(
                validate_produced_batches(&batch, MAX, &checks(true, i64::MAX)),
                Err(BatchError::RecordsRefused(vec![RecordFaultAt {
                    index: 1,
                    fault: RecordFault::MissingKey,
                }]))
            );
            assert!(validate_produced_batches(&batch, MAX, &checks(false, i64::MAX)).is_ok());
        }
    }

    #[test]
    fn old_records_are_named_with_their_offset_and_the_bounds() {
        let refused =
            validate_produced_batches(&compressed(Codec::Gzip), MAX, &checks(false, 3_600_000));
        let Err(BatchError::RecordsRefused(faults)) = refused else {
            panic!("{refused:?}");
        };
        assert_eq!(faults.len(), 3);
        assert_eq!(
            faults[2],
            RecordFaultAt {
                index: 2,
                fault: RecordFault::TimestampOutOfRange {
                    timestamp: 1_700_000_000_000,
                    offset: 2,
                    earliest: NOW - 3_600_000,
                    latest: NOW.wrapping_add(i64::MAX),
                },
            }
        );
        // The key is reported instead of the timestamp for the keyless record.
        let refused = validate_produced_batches(&sample(), MAX, &checks(true, 3_600_000));
        let Err(BatchError::RecordsRefused(faults)) = refused else {
            panic!("{refused:?}");
        };
        assert_eq!(faults[1].fault, RecordFault::MissingKey);
        assert!(matches!(
            faults[0].fault,
            RecordFault::TimestampOutOfRange { .. }
        ));
    }

    #[test]
    fn a_malformed_record_fails_the_batch_whatever_came_before() {
        // The last byte of the last record's header count becomes 1: a header that is not
        // there. Record 1 is keyless, but the malformed record decides the answer.
        let mut batch = sample();
        let last = batch.len() - 1;
        patch(&mut batch, last, &[2]);
        assert!(matches!(
            validate_produced_batches(&batch, MAX, &checks(true, i64::MAX)),
            Err(BatchError::InvalidRecords(_))
        ));
    }

    /// A compressed batch of `records` records of `value_len` zero bytes each.
    fn zeros(codec: Codec, records: usize, value_len: usize) -> Vec<u8> {
        let value = vec![0u8; value_len];
        let list: Vec<TestRecord> = (0..records)
            .map(|_| (Some(b"k".as_slice()), Some(value.as_slice())))
            .collect();
        let plain = encode_batch_for_tests(&list, 1_700_000_000_000, -1, 0, -1);
        recompress::recompress_batches(&plain, CompressionTarget { codec, level: None }, usize::MAX)
            .expect("compress")
            .unwrap_or(plain)
    }

    #[test]
    fn a_batch_may_decompress_past_max_message_bytes() {
        // 3 MiB of records in a batch a few KiB long, under Kafka's default 1 MiB limit.
        let batch = zeros(Codec::Zstd, 3, 1 << 20);
        assert!(
            batch.len() < 64 << 10,
            "compressed to {} bytes",
            batch.len()
        );
        let checks = checks(false, i64::MAX);
        assert!(validate_produced_batches(&batch, 1_048_588, &checks).is_ok());
    }

    #[test]
    fn each_record_is_bounded_by_max_decompressed_message_bytes() {
        let batch = zeros(Codec::Gzip, 3, 1000);
        let mut checks = checks(false, i64::MAX);
        // Each record: length varint (2 bytes), attributes, timestamp and offset deltas,
        // key length and key, value length (2 bytes) and 1000 bytes, no headers.
        let record = 2 + 1 + 1 + 1 + 1 + 1 + 2 + 1000 + 1;
        checks.rules.max_decompressed_record_bytes = record;
        assert!(validate_produced_batches(&batch, MAX, &checks).is_ok());
        checks.rules.max_decompressed_record_bytes = record - 1;
        assert_eq!(
            validate_produced_batches(&batch, MAX, &checks),
            Err(BatchError::RecordTooLarge {
                index: 0,
                size: record,
                max: record - 1,
            })
        );
        // Uncompressed records are bounded by the batch size only, as in Kafka.
        let plain = zeros(Codec::None, 3, 1000);
        assert!(validate_produced_batches(&plain, MAX, &checks).is_ok());
    }
}
