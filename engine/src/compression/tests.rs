#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::*;

const CODECS: [Codec; 5] = [
    Codec::None,
    Codec::Gzip,
    Codec::Snappy,
    Codec::Lz4,
    Codec::Zstd,
];

fn round_trip(codec: Codec, level: Option<i32>, data: &[u8]) -> Vec<u8> {
    let mut compressed = Vec::new();
    compress(codec, level, data, &mut compressed).unwrap();
    let mut out = Vec::new();
    decompress(codec, &compressed, &mut out, data.len()).unwrap();
    out
}

#[test]
fn every_codec_round_trips_at_its_levels() {
    let data: Vec<u8> = (0..200_000u32)
        .map(|i| (i % 251) as u8 ^ (i / 977) as u8)
        .collect();
    for codec in CODECS {
        assert_eq!(round_trip(codec, None, &data), data, "{codec:?}");
    }
    for level in [1, 9] {
        assert_eq!(round_trip(Codec::Gzip, Some(level), &data), data);
    }
    for level in [-5, 1, 19] {
        assert_eq!(round_trip(Codec::Zstd, Some(level), &data), data);
    }
    assert_eq!(round_trip(Codec::Lz4, Some(17), &data), data);
}

#[test]
fn snappy_is_written_in_snappy_java_framing_with_32_kib_blocks() {
    let data = vec![7u8; 100_000];
    let mut compressed = Vec::new();
    compress(Codec::Snappy, None, &data, &mut compressed).unwrap();
    assert_eq!(&compressed[..8], &SNAPPY_JAVA_MAGIC);
    assert_eq!(&compressed[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);
    // Four blocks (3 × 32 KiB and the rest), each `[u32 length][block]`.
    let mut rest = &compressed[16..];
    let mut blocks = 0;
    while !rest.is_empty() {
        let length = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        rest = &rest[4 + length..];
        blocks += 1;
    }
    assert_eq!(blocks, 4);
}

#[test]
fn raw_snappy_and_concatenated_frames_are_read() {
    let data = b"librdkafka writes one raw snappy block".repeat(20);
    let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
    let mut out = Vec::new();
    decompress(Codec::Snappy, &raw, &mut out, data.len()).unwrap();
    assert_eq!(out, data);
    for codec in [Codec::Gzip, Codec::Lz4, Codec::Zstd] {
        let mut twice = Vec::new();
        compress(codec, None, &data, &mut twice).unwrap();
        compress(codec, None, &data, &mut twice).unwrap();
        decompress(codec, &twice, &mut out, 2 * data.len()).unwrap();
        assert_eq!(out, [&data[..], &data[..]].concat(), "{codec:?}");
    }
}

#[test]
fn output_is_capped_at_exactly_the_cap() {
    let data = vec![0u8; 300_000];
    for codec in CODECS {
        let mut compressed = Vec::new();
        compress(codec, None, &data, &mut compressed).unwrap();
        let mut out = Vec::new();
        decompress(codec, &compressed, &mut out, data.len()).unwrap();
        assert_eq!(out.len(), data.len(), "{codec:?}");
        assert_eq!(
            decompress(codec, &compressed, &mut out, data.len() - 1),
            Err(CompressionError::TooLarge {
                cap: data.len() - 1
            }),
            "{codec:?}"
        );
        // zstd decodes into room for one byte past the cap, to tell "more" from "exactly".
        assert!(
            out.capacity() <= data.len() + 1,
            "{codec:?}: {}",
            out.capacity()
        );
    }
}

/// A zstd frame of one raw block holding `payload`, declaring `declared` as its content size
/// (an 8-byte field), with no checksum.
fn zstd_frame_declaring(declared: u64, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd]; // magic
    frame.push(0b1110_0000); // descriptor: 8-byte content size, single segment, no checksum
    frame.extend_from_slice(&declared.to_le_bytes());
    let block_header = ((payload.len() as u32) << 3) | 1; // raw block, the last one
    frame.extend_from_slice(&block_header.to_le_bytes()[..3]);
    frame.extend_from_slice(payload);
    frame
}

#[test]
fn a_zstd_frame_is_decoded_into_the_room_it_declares() {
    let mut out = Vec::new();
    decompress(
        Codec::Zstd,
        &zstd_frame_declaring(5, b"hello"),
        &mut out,
        1 << 20,
    )
    .unwrap();
    assert_eq!(out, b"hello");
    assert_eq!(out.capacity(), 5, "exactly the declared room, no guess");

    // A declaration past the cap is refused before anything is reserved for it.
    let mut out = Vec::new();
    let claim = zstd_frame_declaring(1 << 40, b"hello");
    assert_eq!(
        decompress(Codec::Zstd, &claim, &mut out, 1 << 20),
        Err(CompressionError::TooLarge { cap: 1 << 20 })
    );
    assert_eq!(out.capacity(), 0);

    // A declaration that does not match the content is corrupt, either way.
    for declared in [4, 6] {
        let lie = zstd_frame_declaring(declared, b"hello");
        assert!(
            matches!(
                decompress(Codec::Zstd, &lie, &mut Vec::new(), 1 << 20),
                Err(CompressionError::Corrupt { codec: "zstd", .. })
            ),
            "declared {declared}"
        );
    }
}

#[test]
fn garbage_is_an_error_in_every_codec() {
    let garbage = b"\x1f\x8b\x28\xb5\x2f\xfd\x04\x22\x4d\x18 no codec wrote this".to_vec();
    for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
        let mut out = Vec::new();
        assert!(
            decompress(codec, &garbage, &mut out, 1 << 20).is_err(),
            "{codec:?}"
        );
    }
}

#[test]
fn scratch_is_reused_and_large_buffers_are_released() {
    let first = with_scratch(|scratch| {
        scratch.extend_from_slice(&[1; 1000]);
        scratch.as_ptr()
    });
    let second = with_scratch(|scratch| {
        assert!(scratch.is_empty());
        scratch.as_ptr()
    });
    assert_eq!(first, second);
    with_scratch(|scratch| scratch.resize(SCRATCH_KEEP_BYTES + 1, 0));
    with_scratch(|scratch| assert_eq!(scratch.capacity(), 0));
}

proptest! {
    #[test]
    fn arbitrary_data_round_trips(data in proptest::collection::vec(any::<u8>(), 0..5000), pick in 0usize..5) {
        let codec = CODECS[pick];
        prop_assert_eq!(round_trip(codec, None, &data), data);
    }

    #[test]
    fn arbitrary_input_never_panics_or_passes_the_cap(data in proptest::collection::vec(any::<u8>(), 0..300), pick in 0usize..5) {
        let mut out = Vec::new();
        if decompress(CODECS[pick], &data, &mut out, 4096).is_ok() {
            prop_assert!(out.len() <= 4096);
        }
    }
}
