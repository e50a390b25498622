//! Compressed batches that inflate far past the memory bound on a decompressed batch
//! (`compression::MAX_DECOMPRESSED_BATCH`) are refused without the memory they ask for: peak
//! heap use during validation stays near that bound, whatever the batch claims or holds. A counting global allocator measures it (this test binary only).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use kaas_engine::batch::{
    compute_crc, encode_batch_for_tests, validate_batches, BatchError, ATTRIBUTES_POS,
    BATCH_HEADER_LEN, BATCH_LENGTH_POS, CRC_POS, LOG_OVERHEAD,
};
use kaas_engine::compression::{self, Codec, CompressionError};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        PEAK.fetch_max(live, Ordering::SeqCst);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    // Counted as the system allocator grows a large block: in place or by remapping its pages
    // (glibc's mremap), never holding the old and the new block at once.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size >= layout.size() {
            let live = LIVE.fetch_add(new_size - layout.size(), Ordering::SeqCst) + new_size
                - layout.size();
            PEAK.fetch_max(live, Ordering::SeqCst);
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::SeqCst);
        }
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The largest batch accepted on the wire (`max.message.bytes`) in these tests.
const MAX_BATCH: usize = 8 << 20;
/// What a batch may inflate to.
const CAP: usize = compression::MAX_DECOMPRESSED_BATCH;

/// A one-record batch header in `codec` around `section`, with length and CRC made right.
fn batch_with_section(codec: Codec, section: &[u8]) -> Vec<u8> {
    let mut batch = encode_batch_for_tests(&[(None, Some(b"x"))], 1_000, -1, 0, -1);
    batch.truncate(BATCH_HEADER_LEN);
    batch.extend_from_slice(section);
    let length = (batch.len() - LOG_OVERHEAD) as i32;
    batch[BATCH_LENGTH_POS..][..4].copy_from_slice(&length.to_be_bytes());
    batch[ATTRIBUTES_POS..][..2].copy_from_slice(&i16::from(codec.id()).to_be_bytes());
    let crc = compute_crc(&batch);
    batch[CRC_POS..][..4].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// Peak heap growth while validating `batch`, and the result.
fn validate_measured(batch: &[u8]) -> (usize, Result<(), BatchError>) {
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let result = validate_batches(batch, MAX_BATCH).map(|_| ());
    (PEAK.load(Ordering::SeqCst) - before, result)
}

// One test function: the counters are global, and tests in one binary run in parallel.
#[test]
fn bombs_in_every_codec_are_refused_within_the_cap() {
    // The 67-byte snappy batch whose raw block declares 4 GiB.
    let snappy_bomb = batch_with_section(Codec::Snappy, &[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]);
    assert_eq!(snappy_bomb.len(), 67);
    let (peak, result) = validate_measured(&snappy_bomb);
    assert_eq!(
        result,
        Err(BatchError::Compression(CompressionError::TooLarge {
            cap: CAP
        }))
    );
    assert!(peak < 64 << 10, "the 4 GiB claim cost {peak} bytes of heap");

    // 80 MiB of zeros in each codec: from a few KiB (zstd) to under 4 MiB (snappy) on the wire.
    let zeros = vec![0u8; 80 << 20];
    for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
        let mut section = Vec::new();
        compression::compress(codec, None, &zeros, &mut section).expect("compressible");
        let bomb = batch_with_section(codec, &section);
        let (peak, result) = validate_measured(&bomb);
        assert_eq!(
            result,
            Err(BatchError::Compression(CompressionError::TooLarge {
                cap: CAP
            })),
            "{codec:?}"
        );
        // The cap (plus one byte for zstd), the decoders' working memory and slack.
        assert!(
            peak < CAP + (6 << 20),
            "{codec:?}: {peak} bytes of heap for a batch of {} bytes",
            bomb.len()
        );
    }
}
