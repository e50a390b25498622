//! Tests of record_timestamps.rs.

#![allow(clippy::unwrap_used)]

use std::io::Write;

use proptest::prelude::*;

use super::*;
use crate::batch::{
    compute_crc, encode_batch_for_tests, COMPRESSION_CODEC_MASK, CONTROL_MASK, CRC_POS,
    LOG_OVERHEAD, TIMESTAMP_TYPE_MASK,
};

const CAP: usize = 64 << 20;
/// snappy-java's stream magic and header length (magic, version, compatible version).
const SNAPPY_JAVA_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const SNAPPY_JAVA_HEADER_LEN: usize = 16;
const BASE_TIMESTAMP: i64 = 1_700_000_000_000;

/// How a test compresses a records section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codec {
    None,
    Gzip,
    /// snappy-java stream framing, as the Java client writes it.
    SnappyJava,
    /// One raw snappy block, as librdkafka writes it.
    SnappyRaw,
    Lz4,
    Zstd,
}

const ALL_CODECS: [Codec; 6] = [
    Codec::None,
    Codec::Gzip,
    Codec::SnappyJava,
    Codec::SnappyRaw,
    Codec::Lz4,
    Codec::Zstd,
];

const COMPRESSED_CODECS: [Codec; 5] = [
    Codec::Gzip,
    Codec::SnappyJava,
    Codec::SnappyRaw,
    Codec::Lz4,
    Codec::Zstd,
];

impl Codec {
    fn id(self) -> u8 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::SnappyJava | Codec::SnappyRaw => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }

    fn compress(self, data: &[u8]) -> Vec<u8> {
        match self {
            Codec::None => data.to_vec(),
            Codec::Gzip => {
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(data).unwrap();
                encoder.finish().unwrap()
            }
            Codec::SnappyJava => snappy_java(&[data]),
            Codec::SnappyRaw => snap::raw::Encoder::new().compress_vec(data).unwrap(),
            Codec::Lz4 => {
                let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
                encoder.write_all(data).unwrap();
                encoder.finish().unwrap()
            }
            Codec::Zstd => zstd::bulk::compress(data, 1).unwrap(),
        }
    }
}

/// snappy-java stream framing over `streams`, one stream header per element (more than
/// one is what concatenating streams produces), 32 KiB blocks as snappy-java writes.
fn snappy_java(streams: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for data in streams {
        out.extend_from_slice(&SNAPPY_JAVA_MAGIC);
        out.extend_from_slice(&1i32.to_be_bytes()); // version
        out.extend_from_slice(&1i32.to_be_bytes()); // compatible version
        for block in data.chunks(32 * 1024) {
            let compressed = snap::raw::Encoder::new().compress_vec(block).unwrap();
            out.extend_from_slice(&u32::try_from(compressed.len()).unwrap().to_be_bytes());
            out.extend_from_slice(&compressed);
        }
    }
    out
}

fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8 & 0x7f) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => {
            put_varlong(out, i64::try_from(bytes.len()).unwrap());
            out.extend_from_slice(bytes);
        }
        None => put_varlong(out, -1),
    }
}

/// One record to encode, with the deltas the batch builder would not choose itself.
#[derive(Debug, Clone)]
struct Spec {
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Spec {
    fn new(timestamp_delta: i64, offset_delta: i32) -> Self {
        Self {
            timestamp_delta,
            offset_delta,
            key: Some(format!("key-{offset_delta}").into_bytes()),
            value: Some(vec![b'v'; 20]),
            headers: Vec::new(),
        }
    }
}

fn encode_records(specs: &[Spec]) -> Vec<u8> {
    let mut section = Vec::new();
    for spec in specs {
        let mut body = vec![0u8]; // attributes
        put_varlong(&mut body, spec.timestamp_delta);
        put_varlong(&mut body, i64::from(spec.offset_delta));
        put_bytes(&mut body, spec.key.as_deref());
        put_bytes(&mut body, spec.value.as_deref());
        put_varlong(&mut body, i64::try_from(spec.headers.len()).unwrap());
        for (key, value) in &spec.headers {
            put_bytes(&mut body, Some(key));
            put_bytes(&mut body, value.as_deref());
        }
        put_varlong(&mut section, i64::try_from(body.len()).unwrap());
        section.extend_from_slice(&body);
    }
    section
}

/// Rebuilds `batch` around a new records section: sets the codec bits, `batchLength` and
/// the CRC; `edit` adjusts the header first.
fn with_section(
    batch: &[u8],
    codec_id: u8,
    section: &[u8],
    edit: impl FnOnce(&mut BatchHeader),
) -> Vec<u8> {
    let mut header = BatchHeader::parse(batch).unwrap();
    header.attributes = (header.attributes & !COMPRESSION_CODEC_MASK) | i16::from(codec_id);
    header.batch_length = i32::try_from(BATCH_HEADER_LEN - LOG_OVERHEAD + section.len()).unwrap();
    edit(&mut header);
    let mut out = header.encode().to_vec();
    out.extend_from_slice(section);
    let crc = compute_crc(&out);
    out[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Compresses the records section of an uncompressed batch with `codec`.
fn compress_batch(batch: &[u8], codec: Codec) -> Vec<u8> {
    let header = BatchHeader::parse(batch).unwrap();
    let section = &batch[BATCH_HEADER_LEN..header.total_len()];
    with_section(batch, codec.id(), &codec.compress(section), |_| {})
}

/// A batch holding `specs` at `base_offset`, compressed with `codec`.
fn build_batch(base_offset: i64, specs: &[Spec], codec: Codec) -> Vec<u8> {
    let layout = encode_batch_for_tests(&[(None, Some(b"x"))], BASE_TIMESTAMP, -1, -1, -1);
    let count = i32::try_from(specs.len()).unwrap();
    let max_timestamp = specs
        .iter()
        .map(|spec| BASE_TIMESTAMP.wrapping_add(spec.timestamp_delta))
        .max()
        .unwrap_or(BASE_TIMESTAMP);
    let last_offset_delta = specs
        .iter()
        .map(|spec| spec.offset_delta)
        .max()
        .unwrap_or(-1);
    let uncompressed = with_section(&layout, 0, &encode_records(specs), |header| {
        header.base_offset = base_offset;
        header.records_count = count;
        header.last_offset_delta = last_offset_delta;
        header.max_timestamp = max_timestamp;
    });
    compress_batch(&uncompressed, codec)
}

/// Sets `LogAppendTime` with `append_time` as `maxTimestamp`, as the broker stamps it.
fn stamp_log_append_time(batch: &[u8], append_time: i64) -> Vec<u8> {
    let header = BatchHeader::parse(batch).unwrap();
    let section = batch[BATCH_HEADER_LEN..header.total_len()].to_vec();
    with_section(batch, header.compression_id(), &section, |header| {
        header.attributes |= TIMESTAMP_TYPE_MASK;
        header.max_timestamp = append_time;
    })
}

fn expected_times(base_offset: i64, specs: &[Spec]) -> Vec<RecordTime> {
    specs
        .iter()
        .map(|spec| RecordTime {
            offset: base_offset + i64::from(spec.offset_delta),
            timestamp: BASE_TIMESTAMP.wrapping_add(spec.timestamp_delta),
        })
        .collect()
}

fn varied_specs() -> Vec<Spec> {
    let mut specs = vec![
        Spec::new(0, 0),
        Spec::new(250, 1),
        Spec::new(-40, 2),
        Spec::new(1_000, 4), // a gap, as compaction leaves
        Spec::new(999, 5),
    ];
    specs[1].key = None;
    specs[2].value = None;
    specs[3].headers = vec![
        (b"trace".to_vec(), Some(b"abc".to_vec())),
        (b"empty".to_vec(), None),
    ];
    specs[4].value = Some(vec![7u8; 3000]);
    specs
}

#[test]
fn encoder_batches_read_back_under_every_codec() {
    let batch = encode_batch_for_tests(
        &[
            (Some(b"k1"), Some(b"value-one")),
            (None, Some(b"v2")),
            (Some(b"k3"), None),
        ],
        BASE_TIMESTAMP,
        42,
        3,
        7,
    );
    for codec in ALL_CODECS {
        let compressed = compress_batch(&batch, codec);
        let times = record_times(&compressed, CAP).unwrap();
        let expected: Vec<RecordTime> = (0..3)
            .map(|offset| RecordTime {
                offset,
                timestamp: BASE_TIMESTAMP,
            })
            .collect();
        assert_eq!(times, expected, "{codec:?}");
    }
}

#[test]
fn every_codec_gives_each_records_offset_and_timestamp() {
    let specs = varied_specs();
    for codec in ALL_CODECS {
        let batch = build_batch(500, &specs, codec);
        if codec != Codec::None {
            let section_len = batch.len() - BATCH_HEADER_LEN;
            assert!(
                section_len < encode_records(&specs).len(),
                "{codec:?} compressed"
            );
        }
        assert_eq!(
            record_times(&batch, CAP).unwrap(),
            expected_times(500, &specs),
            "{codec:?}"
        );
    }
}

#[test]
fn max_timestamp_names_the_first_of_tied_records() {
    let specs: Vec<Spec> = [5, 9, 3, 9, 9]
        .iter()
        .zip(0..)
        .map(|(&delta, offset_delta)| Spec::new(delta, offset_delta))
        .collect();
    for codec in ALL_CODECS {
        let batch = build_batch(100, &specs, codec);
        assert_eq!(
            max_timestamp_record(&batch, CAP).unwrap(),
            Some(RecordTime {
                offset: 101,
                timestamp: BASE_TIMESTAMP + 9
            }),
            "{codec:?}"
        );
    }
}

#[test]
fn first_at_or_after_follows_batch_order_not_timestamp_order() {
    let specs: Vec<Spec> = [10, 30, 20, 40]
        .iter()
        .zip(0..)
        .map(|(&delta, offset_delta)| Spec::new(delta, offset_delta))
        .collect();
    let at = |offset: i64, delta: i64| {
        Some(RecordTime {
            offset,
            timestamp: BASE_TIMESTAMP + delta,
        })
    };
    for codec in ALL_CODECS {
        let batch = build_batch(0, &specs, codec);
        let first = |delta: i64| first_record_at_or_after(&batch, BASE_TIMESTAMP + delta, CAP);
        assert_eq!(first(i64::MIN / 2).unwrap(), at(0, 10), "{codec:?}");
        assert_eq!(first(10).unwrap(), at(0, 10), "{codec:?} exact");
        // 20 is at offset 2, but offset 1 (30) comes first and qualifies.
        assert_eq!(first(15).unwrap(), at(1, 30), "{codec:?}");
        assert_eq!(first(31).unwrap(), at(3, 40), "{codec:?}");
        assert_eq!(first(40).unwrap(), at(3, 40), "{codec:?}");
        assert_eq!(first(41).unwrap(), None, "{codec:?} none");
    }
}

#[test]
fn log_append_time_gives_every_record_the_batch_max_timestamp() {
    let specs = varied_specs();
    let append_time = BASE_TIMESTAMP + 77_777;
    for codec in ALL_CODECS {
        let batch = stamp_log_append_time(&build_batch(10, &specs, codec), append_time);
        let times = record_times(&batch, CAP).unwrap();
        let expected: Vec<RecordTime> = expected_times(10, &specs)
            .into_iter()
            .map(|time| RecordTime {
                timestamp: append_time,
                ..time
            })
            .collect();
        assert_eq!(times, expected, "{codec:?}");
        let first = Some(expected[0]);
        assert_eq!(max_timestamp_record(&batch, CAP).unwrap(), first);
        assert_eq!(first_record_at_or_after(&batch, 0, CAP).unwrap(), first);
        assert_eq!(
            first_record_at_or_after(&batch, append_time, CAP).unwrap(),
            first
        );
        assert_eq!(
            first_record_at_or_after(&batch, append_time + 1, CAP).unwrap(),
            None
        );
    }
}

#[test]
fn control_batches_are_read_like_any_other() {
    // A commit marker: key (version 0, type 1), value (version 0, coordinator epoch 5).
    let mut marker = Spec::new(3, 0);
    marker.key = Some(vec![0, 0, 0, 1]);
    marker.value = Some(vec![0, 0, 0, 0, 0, 5]);
    for codec in ALL_CODECS {
        let batch = build_batch(900, std::slice::from_ref(&marker), codec);
        let header = BatchHeader::parse(&batch).unwrap();
        let section = batch[BATCH_HEADER_LEN..].to_vec();
        let control = with_section(&batch, header.compression_id(), &section, |header| {
            header.attributes |= CONTROL_MASK;
        });
        assert!(BatchHeader::parse(&control).unwrap().is_control());
        assert_eq!(
            record_times(&control, CAP).unwrap(),
            vec![RecordTime {
                offset: 900,
                timestamp: BASE_TIMESTAMP + 3
            }],
            "{codec:?}"
        );
    }
}

#[test]
fn a_batch_without_records_has_no_answer() {
    for codec in ALL_CODECS {
        let batch = build_batch(0, &[], codec);
        assert_eq!(record_times(&batch, CAP).unwrap(), Vec::new(), "{codec:?}");
        assert_eq!(max_timestamp_record(&batch, CAP).unwrap(), None);
        assert_eq!(first_record_at_or_after(&batch, 0, CAP).unwrap(), None);
    }
}

#[test]
fn output_exactly_at_the_cap_decodes_and_one_byte_less_does_not() {
    let specs = varied_specs();
    let decompressed_len = encode_records(&specs).len();
    for codec in COMPRESSED_CODECS {
        let batch = build_batch(0, &specs, codec);
        assert!(record_times(&batch, decompressed_len).is_ok(), "{codec:?}");
        assert_eq!(
            record_times(&batch, decompressed_len - 1),
            Err(RecordTimesError::OutputTooLarge {
                cap: decompressed_len - 1
            }),
            "{codec:?}"
        );
    }
}

/// A batch whose records section is `section` under codec `codec_id`, claiming one record.
fn batch_with_raw_section(codec_id: u8, section: &[u8]) -> Vec<u8> {
    let layout = encode_batch_for_tests(&[(None, Some(b"x"))], BASE_TIMESTAMP, -1, -1, -1);
    with_section(&layout, codec_id, section, |_| {})
}

fn assert_capped(codec_id: u8, section: &[u8], cap: usize) {
    assert_eq!(
        record_times(&batch_with_raw_section(codec_id, section), cap),
        Err(RecordTimesError::OutputTooLarge { cap }),
        "codec {codec_id}, {} compressed bytes",
        section.len()
    );
}

#[test]
fn decompression_bombs_stop_at_the_cap() {
    const BOMB_CAP: usize = 1 << 20;
    let zeros = vec![0u8; 16 << 20];
    for codec in [Codec::Gzip, Codec::SnappyJava, Codec::Lz4, Codec::Zstd] {
        let bomb = codec.compress(&zeros);
        assert!(bomb.len() < zeros.len() / 16, "{codec:?} compresses zeros");
        assert_capped(codec.id(), &bomb, BOMB_CAP);
    }
}

#[test]
fn a_raw_snappy_block_declaring_too_much_is_refused_before_decoding() {
    // Declares 1 GiB, then a one-byte literal: refused on the declaration alone.
    let mut block = Vec::new();
    let mut declared: u64 = 1 << 30;
    while declared >= 0x80 {
        block.push((declared as u8 & 0x7f) | 0x80);
        declared >>= 7;
    }
    block.push(declared as u8);
    block.extend_from_slice(&[0x00, b'x']);
    assert_capped(2, &block, 1 << 20);
}

#[test]
fn snappy_java_blocks_adding_up_past_the_cap_are_refused() {
    // Every block is under the cap; their sum is not.
    let block = snap::raw::Encoder::new()
        .compress_vec(&vec![0u8; 64 << 10])
        .unwrap();
    let mut stream = snappy_java(&[]);
    stream.extend_from_slice(&SNAPPY_JAVA_MAGIC);
    stream.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    for _ in 0..20 {
        stream.extend_from_slice(&u32::try_from(block.len()).unwrap().to_be_bytes());
        stream.extend_from_slice(&block);
    }
    assert_capped(2, &stream, 1 << 20);
}

/// A zstd frame of `blocks` RLE blocks of 128 KiB zeros: four bytes a block.
fn zstd_rle_bomb(blocks: usize) -> Vec<u8> {
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd]; // magic
    frame.push(0x00); // descriptor: no content size, no checksum, not single-segment
    frame.push(7 << 3); // window descriptor: 2^(10 + 7) = 128 KiB
    for index in 0..blocks {
        let last = u32::from(index + 1 == blocks);
        let block_header = ((128u32 << 10) << 3) | (1 << 1) | last; // RLE, 128 KiB
        frame.extend_from_slice(&block_header.to_le_bytes()[..3]);
        frame.push(0); // the repeated byte
    }
    frame
}

#[test]
fn a_small_zstd_rle_frame_stops_at_the_cap() {
    let bomb = zstd_rle_bomb(15);
    assert_eq!(bomb.len(), 66);
    assert_capped(4, &bomb, 1 << 20);
    // The same frame under a cap it fits: it decodes, and then its zeros are not records.
    assert!(matches!(
        record_times(&batch_with_raw_section(4, &bomb), 4 << 20),
        Err(RecordTimesError::MalformedRecords(_))
    ));
}

#[test]
fn a_zstd_frame_declaring_a_huge_window_reserves_nothing() {
    // zstd decodes in one pass into the capped output, so the window a frame declares costs
    // nothing: 128 MiB under a 16 MiB cap decodes (its 128 KiB of zeros are not records).
    let mut frame = zstd_rle_bomb(1);
    frame[5] = 17 << 3; // window 2^27 = 128 MiB
    assert!(matches!(
        record_times(&batch_with_raw_section(4, &frame), 16 << 20),
        Err(RecordTimesError::MalformedRecords(_))
    ));
    // A window past what the format allows (2^40; libzstd stops at 2^31) is corrupt data.
    frame[5] = 30 << 3;
    assert!(matches!(
        record_times(&batch_with_raw_section(4, &frame), 1 << 20),
        Err(RecordTimesError::CorruptCompressed { codec: "zstd", .. })
    ));
}

#[test]
fn concatenated_streams_and_skippable_frames_read_as_one_section() {
    let specs = varied_specs();
    let section = encode_records(&specs);
    let (front, back) = section.split_at(section.len() / 2);
    let expected = expected_times(0, &specs);
    let read = |codec: Codec, compressed: Vec<u8>| {
        let layout = build_batch(0, &specs, Codec::None);
        record_times(&with_section(&layout, codec.id(), &compressed, |_| {}), CAP)
    };

    let mut gzip = Codec::Gzip.compress(front);
    gzip.extend(Codec::Gzip.compress(back));
    assert_eq!(read(Codec::Gzip, gzip).unwrap(), expected, "gzip members");

    let snappy = snappy_java(&[front, back]);
    assert_eq!(
        read(Codec::SnappyJava, snappy).unwrap(),
        expected,
        "snappy streams"
    );

    let mut lz4 = Codec::Lz4.compress(front);
    lz4.extend(Codec::Lz4.compress(back));
    assert_eq!(read(Codec::Lz4, lz4).unwrap(), expected, "lz4 frames");

    let mut zstd = vec![0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 1, 2, 3]; // skippable frame
    zstd.extend(Codec::Zstd.compress(front));
    zstd.extend(Codec::Zstd.compress(back));
    assert_eq!(read(Codec::Zstd, zstd).unwrap(), expected, "zstd frames");
}

#[test]
fn a_snappy_java_header_alone_is_an_empty_section() {
    let batch = build_batch(0, &[], Codec::None);
    let empty = with_section(&batch, 2, &snappy_java(&[b""]), |_| {});
    assert_eq!(record_times(&empty, CAP).unwrap(), Vec::new());
}

#[test]
fn a_zstd_checksum_mismatch_is_corrupt() {
    let specs = varied_specs();
    let mut batch = build_batch(0, &specs, Codec::Zstd);
    let last = batch.len() - 1; // the checksum's last byte
    batch[last] ^= 0x01;
    assert!(matches!(
        record_times(&batch, CAP),
        Err(RecordTimesError::CorruptCompressed { codec: "zstd", .. })
    ));
}

#[test]
fn a_snappy_java_block_longer_than_the_records_is_corrupt() {
    let mut stream = snappy_java(&[b"abc"]);
    let length_at = SNAPPY_JAVA_HEADER_LEN;
    stream[length_at..length_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(
        record_times(&batch_with_raw_section(2, &stream), CAP),
        Err(RecordTimesError::CorruptCompressed {
            codec: "snappy",
            ..
        })
    ));
}

#[test]
fn codecs_kafka_does_not_define_are_unsupported() {
    for codec_id in 5..=7 {
        let batch = batch_with_raw_section(codec_id, b"whatever");
        assert_eq!(
            record_times(&batch, CAP),
            Err(RecordTimesError::UnsupportedCodec(codec_id))
        );
    }
}

#[test]
fn a_batch_cut_short_is_invalid_and_bytes_after_it_are_ignored() {
    let batch = build_batch(0, &varied_specs(), Codec::Lz4);
    assert!(matches!(
        record_times(&batch[..batch.len() - 1], CAP),
        Err(RecordTimesError::InvalidBatch(BatchError::Truncated { .. }))
    ));
    assert!(matches!(
        record_times(&batch[..10], CAP),
        Err(RecordTimesError::InvalidBatch(_))
    ));
    let mut followed = batch.clone();
    followed.extend_from_slice(&[0xff; 40]);
    assert_eq!(
        record_times(&followed, CAP).unwrap(),
        record_times(&batch, CAP).unwrap()
    );
}

fn with_count(batch: &[u8], records_count: i32) -> Vec<u8> {
    let header = BatchHeader::parse(batch).unwrap();
    let section = batch[BATCH_HEADER_LEN..header.total_len()].to_vec();
    with_section(batch, header.compression_id(), &section, |header| {
        header.records_count = records_count;
    })
}

#[test]
fn records_that_disagree_with_the_count_are_malformed() {
    let specs = varied_specs();
    for codec in ALL_CODECS {
        let batch = build_batch(0, &specs, codec);
        let count = i32::try_from(specs.len()).unwrap();
        for wrong in [count + 1, count - 1, -1, i32::MAX, i32::MIN] {
            assert!(
                matches!(
                    record_times(&with_count(&batch, wrong), CAP),
                    Err(RecordTimesError::MalformedRecords(_))
                ),
                "{codec:?} count {wrong}"
            );
        }
    }
}

/// Builds an uncompressed one-record batch around a hand-written record body.
fn single_record_batch(body: &[u8]) -> Vec<u8> {
    let mut section = Vec::new();
    put_varlong(&mut section, i64::try_from(body.len()).unwrap());
    section.extend_from_slice(body);
    batch_with_raw_section(0, &section)
}

#[test]
fn malformed_record_fields_are_errors() {
    let mut negative_headers = vec![0u8, 0, 0];
    put_varlong(&mut negative_headers, -1); // key
    put_varlong(&mut negative_headers, -1); // value
    put_varlong(&mut negative_headers, -1); // header count
    let mut negative_header_key = vec![0u8, 0, 0, 1, 1, 2];
    put_varlong(&mut negative_header_key, -3);
    let long_varint = [
        0u8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1,
    ];
    let key_past_record = [0u8, 0, 0, 40, 1];
    let too_long = [0u8, 0, 0, 1, 1, 0, 9]; // a stray byte after the header count
    for (name, body) in [
        ("negative header count", &negative_headers[..]),
        ("negative header key", &negative_header_key[..]),
        ("varlong too long", &long_varint[..]),
        ("key past record", &key_past_record[..]),
        ("record longer than its fields", &too_long[..]),
    ] {
        let mut padded = body.to_vec();
        // Keep at least MIN_RECORD_LEN bytes so the count check is not what fails.
        while padded.len() < MIN_RECORD_LEN {
            padded.push(0);
        }
        let batch = single_record_batch(if body.len() >= MIN_RECORD_LEN {
            body
        } else {
            &padded
        });
        assert!(
            matches!(
                record_times(&batch, CAP),
                Err(RecordTimesError::MalformedRecords(_))
            ),
            "{name}: {:?}",
            record_times(&batch, CAP)
        );
    }

    let mut negative_length = Vec::new();
    put_varlong(&mut negative_length, -2);
    negative_length.extend_from_slice(&[0; 8]);
    assert!(matches!(
        record_times(&batch_with_raw_section(0, &negative_length), CAP),
        Err(RecordTimesError::MalformedRecords("negative record length"))
    ));

    let mut trailing = encode_records(&[Spec::new(0, 0)]);
    trailing.push(0);
    assert_eq!(
        record_times(&batch_with_raw_section(0, &trailing), CAP),
        Err(RecordTimesError::MalformedRecords(
            "bytes after the last record"
        ))
    );
}

#[test]
fn any_negative_key_or_value_length_reads_as_null_as_kafka_does() {
    let mut body = vec![0u8];
    put_varlong(&mut body, 12); // timestampDelta
    put_varlong(&mut body, 0); // offsetDelta
    put_varlong(&mut body, -5); // key
    put_varlong(&mut body, -2); // value
    put_varlong(&mut body, 1); // one header
    put_bytes(&mut body, Some(b"h"));
    put_varlong(&mut body, -9); // header value
    assert_eq!(
        record_times(&single_record_batch(&body), CAP).unwrap(),
        vec![RecordTime {
            offset: 0,
            timestamp: BASE_TIMESTAMP + 12
        }]
    );
}

#[test]
fn every_truncation_of_compressed_records_fails_or_reads_the_same() {
    let specs = varied_specs();
    for codec in COMPRESSED_CODECS {
        let batch = build_batch(0, &specs, codec);
        let full = record_times(&batch, CAP).unwrap();
        let section = &batch[BATCH_HEADER_LEN..];
        for cut in 0..section.len() {
            let truncated = with_section(&batch, codec.id(), &section[..cut], |_| {});
            // An lz4 frame cut at a block boundary before its end mark still yields
            // every record; any other cut must fail.
            if let Ok(times) = record_times(&truncated, CAP) {
                assert_eq!(times, full, "{codec:?} cut at {cut}");
            }
        }
    }
}

fn arb_spec() -> impl Strategy<Value = Spec> {
    let bytes = || proptest::option::of(proptest::collection::vec(any::<u8>(), 0..24));
    (
        prop_oneof![-1_000_000i64..1_000_000, any::<i64>()],
        1i32..5,
        bytes(),
        bytes(),
        proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..8), bytes()),
            0..3,
        ),
    )
        .prop_map(|(timestamp_delta, gap, key, value, headers)| Spec {
            timestamp_delta,
            offset_delta: gap, // turned into a running offset by `arb_specs`
            key,
            value,
            headers,
        })
}

/// 0 to 40 records with increasing offset deltas (gaps included).
fn arb_specs() -> impl Strategy<Value = Vec<Spec>> {
    proptest::collection::vec(arb_spec(), 0..40).prop_map(|mut specs| {
        let mut offset_delta = -1;
        for spec in &mut specs {
            offset_delta += spec.offset_delta;
            spec.offset_delta = offset_delta;
        }
        specs
    })
}

fn arb_codec() -> impl Strategy<Value = Codec> {
    proptest::sample::select(ALL_CODECS.to_vec())
}

proptest! {
    #[test]
    fn any_records_read_back_with_model_answers(
        specs in arb_specs(),
        codec in arb_codec(),
        base_offset in 0i64..1 << 40,
        target_delta in -2_000_000i64..2_000_000,
    ) {
        let batch = build_batch(base_offset, &specs, codec);
        let expected = expected_times(base_offset, &specs);
        prop_assert_eq!(&record_times(&batch, CAP).unwrap(), &expected);

        let mut model_max: Option<RecordTime> = None;
        for time in &expected {
            if model_max.is_none_or(|max| time.timestamp > max.timestamp) {
                model_max = Some(*time);
            }
        }
        prop_assert_eq!(max_timestamp_record(&batch, CAP).unwrap(), model_max);

        let target = BASE_TIMESTAMP + target_delta;
        let model_first = expected.iter().copied().find(|time| time.timestamp >= target);
        prop_assert_eq!(first_record_at_or_after(&batch, target, CAP).unwrap(), model_first);
    }

    #[test]
    fn random_sections_never_panic(
        codec_id in 0u8..8,
        records_count in prop_oneof![0i32..4, any::<i32>()],
        log_append_time in any::<bool>(),
        section in proptest::collection::vec(any::<u8>(), 0..512),
        magic_prefix in any::<bool>(),
    ) {
        let mut section = section;
        if magic_prefix {
            // Reach past each decoder's magic check into its header and block parsing.
            let magic: &[u8] = match codec_id {
                1 => &[0x1f, 0x8b, 0x08],
                2 => &SNAPPY_JAVA_MAGIC,
                3 => &[0x04, 0x22, 0x4d, 0x18],
                4 => &[0x28, 0xb5, 0x2f, 0xfd],
                _ => &[],
            };
            section.splice(0..0, magic.iter().copied());
        }
        let layout = encode_batch_for_tests(&[(None, Some(b"x"))], BASE_TIMESTAMP, -1, -1, -1);
        let batch = with_section(&layout, codec_id, &section, |header| {
            header.records_count = records_count;
            if log_append_time {
                header.attributes |= TIMESTAMP_TYPE_MASK;
            }
        });
        let _ = record_times(&batch, 1 << 20);
        let _ = max_timestamp_record(&batch, 1 << 20);
        let _ = first_record_at_or_after(&batch, BASE_TIMESTAMP, 1 << 20);
    }

    #[test]
    fn bit_flips_in_compressed_records_never_panic(
        specs in arb_specs(),
        codec in proptest::sample::select(COMPRESSED_CODECS.to_vec()),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4),
    ) {
        let mut batch = build_batch(0, &specs, codec);
        let section_len = batch.len() - BATCH_HEADER_LEN;
        for (index, bit) in flips {
            batch[BATCH_HEADER_LEN + index.index(section_len)] ^= 1 << bit;
        }
        let crc = compute_crc(&batch);
        batch[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
        let _ = record_times(&batch, 1 << 20);
    }

    #[test]
    fn truncated_compressed_records_fail_or_read_the_same(
        specs in arb_specs(),
        codec in proptest::sample::select(COMPRESSED_CODECS.to_vec()),
        cut in any::<prop::sample::Index>(),
    ) {
        let batch = build_batch(0, &specs, codec);
        let full = record_times(&batch, CAP).unwrap();
        let section = &batch[BATCH_HEADER_LEN..];
        let cut = cut.index(section.len());
        let truncated = with_section(&batch, codec.id(), &section[..cut], |_| {});
        if let Ok(times) = record_times(&truncated, CAP) {
            prop_assert_eq!(times, full);
        }
    }
}
