//! The compression codecs of RecordBatch v2, bounded for hostile input: decompressing a
//! producer's records section to validate it, and compressing records when a topic's
//! `compression.type` names a codec other than the producer's.
//!
//! # Wire formats
//!
//! The codec is `attributes` bits 0-2; what the records section (everything after the 61-byte
//! header) holds for each:
//!
//! | id | codec  | records section                                                          |
//! |----|--------|--------------------------------------------------------------------------|
//! | 0  | none   | the records                                                              |
//! | 1  | gzip   | a gzip stream; concatenated members read as one, as `GZIPInputStream`    |
//! | 2  | snappy | snappy-java's stream framing (the Java client), or one raw snappy block  |
//! | 3  | lz4    | LZ4 frames in the standard frame format, in turn                         |
//! | 4  | zstd   | zstd frames, in turn (skippable frames skipped)                          |
//!
//! snappy-java's framing is the 8-byte magic `82 53 4E 41 50 50 59 00`, a 4-byte version and a
//! 4-byte compatible version, then blocks of `[u32 big-endian length][raw snappy block]` (a
//! second stream header between blocks, from concatenated streams, is skipped). librdkafka
//! writes one raw block without framing; both are read, told apart by the magic (a raw block
//! cannot start with it). What this module writes is what Apache Kafka's broker writes when it
//! recompresses: snappy-java framing with 32 KiB blocks, LZ4 frames of independent 64 KiB blocks
//! without checksums, a gzip member, one zstd frame.
//!
//! # Bounds
//!
//! - Decompressed output never passes the caller's cap: the output grows with the bytes
//!   actually decoded and one byte too many is [`CompressionError::TooLarge`]. A raw snappy
//!   block declares its length up front, which is checked against the cap before anything is
//!   allocated. zstd decodes in one pass (so no window buffer, whatever window a frame
//!   declares) into room of exactly the content size a single frame declares (a declaration
//!   past the cap is refused before decoding), or else room that starts at a guess and grows
//!   fourfold, to at most one byte past the cap.
//! - The streaming decoders' own memory is bounded apart from the output: gzip keeps a 32 KiB
//!   window, lz4 buffers sized by the frame's declared block size (4 MiB blocks at most).
//! - The output buffer is the caller's: the produce path passes one per-thread scratch buffer
//!   ([`with_scratch`]), so validation allocates nothing per batch once it has warmed up
//!   (batches past [`SCRATCH_KEEP_BYTES`] decompressed allocate, and give the memory back).
//! - The produce path's cap is [`decompressed_limit`]: [`MAX_DECOMPRESSED_BATCH`], a memory
//!   bound of kaas's, not `max.message.bytes`, which bounds a batch on the wire (as in Kafka;
//!   each record is bounded by `max.decompressed.message.bytes`, `crate::batch::record_rules`).

use std::cell::RefCell;
use std::io::{ErrorKind, Read, Write};

use thiserror::Error;

/// A RecordBatch v2 compression codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Uncompressed records.
    None,
    /// gzip (deflate).
    Gzip,
    /// snappy.
    Snappy,
    /// LZ4 frame format.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Codec {
    /// The codec with id `id` (`attributes` bits 0-2), `None` for the ids Kafka leaves
    /// undefined (5 to 7).
    pub fn from_id(id: u8) -> Option<Codec> {
        match id {
            0 => Some(Codec::None),
            1 => Some(Codec::Gzip),
            2 => Some(Codec::Snappy),
            3 => Some(Codec::Lz4),
            4 => Some(Codec::Zstd),
            _ => None,
        }
    }

    /// The codec's id in `attributes`.
    pub fn id(self) -> u8 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::Snappy => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }

    /// Kafka's name for the codec (`compression.type` values; `none` is `uncompressed` there).
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

/// The codec and level a topic stores its batches in, when `compression.type` is not
/// `producer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompressionTarget {
    /// The codec batches are stored in.
    pub codec: Codec,
    /// The codec's level (`compression.gzip.level`, `compression.zstd.level`,
    /// `compression.lz4.level`); `None` is the codec's default. lz4 has one speed here: the
    /// encoder has no high-compression mode, so its level is not used.
    pub level: Option<i32>,
}

/// Why records could not be decompressed or compressed.
#[derive(Error, Debug, Clone, PartialEq, Eq)]
pub enum CompressionError {
    /// The compressed bytes do not decode.
    #[error("corrupt {codec} data: {reason}")]
    Corrupt {
        /// The codec whose data failed.
        codec: &'static str,
        /// The decoder's complaint.
        reason: String,
    },
    /// Decompressing would pass the cap.
    #[error("records decompress to more than {cap} bytes")]
    TooLarge {
        /// The cap the caller passed.
        cap: usize,
    },
    /// The encoder failed (an invalid level, or the encoder's own allocation).
    #[error("{codec} compression failed: {reason}")]
    Encode {
        /// The codec that failed.
        codec: &'static str,
        /// The encoder's complaint.
        reason: String,
    },
}

/// The most a compressed batch's records may take decompressed, whatever `max.message.bytes`
/// allows compressed: a memory bound of kaas's (Kafka streams a batch record by record and
/// bounds only each record, by `max.decompressed.message.bytes`). A batch of 1 MiB that
/// inflates 64-fold still fits.
pub const MAX_DECOMPRESSED_BATCH: usize = 64 << 20;

/// The cap for decompressing a batch whose compressed size is at most `max_batch_bytes`:
/// [`MAX_DECOMPRESSED_BATCH`], or `max_batch_bytes` when that is larger.
pub fn decompressed_limit(max_batch_bytes: usize) -> usize {
    max_batch_bytes.max(MAX_DECOMPRESSED_BATCH)
}

/// Bytes moved from a streaming decoder per read.
const READ_CHUNK_LEN: usize = 16 * 1024;

/// snappy-java's stream magic: `\x82SNAPPY\0`.
const SNAPPY_JAVA_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];

/// snappy-java's stream header: the magic, a version and a compatible version (i32 each).
const SNAPPY_JAVA_HEADER_LEN: usize = 16;

/// snappy-java's block size, which Kafka's broker writes with.
const SNAPPY_JAVA_BLOCK_LEN: usize = 32 * 1024;

/// Kafka's default `compression.zstd.level`.
const ZSTD_DEFAULT_LEVEL: i32 = 3;

/// Scratch capacity kept between uses; a larger buffer (from an unusually large batch) is
/// released so an idle shard does not hold it.
const SCRATCH_KEEP_BYTES: usize = 2 << 20;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `work` with this thread's scratch buffer (emptied first). A nested call gets a
/// fresh buffer rather than failing.
pub fn with_scratch<R>(work: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            scratch.clear();
            let result = work(&mut scratch);
            if scratch.capacity() > SCRATCH_KEEP_BYTES {
                *scratch = Vec::new();
            }
            result
        }
        Err(_) => work(&mut Vec::new()),
    })
}

/// Decompresses `compressed` (a records section in `codec`) into `out`, replacing what it
/// held, producing at most `cap` bytes.
pub fn decompress(
    codec: Codec,
    compressed: &[u8],
    out: &mut Vec<u8>,
    cap: usize,
) -> Result<(), CompressionError> {
    out.clear();
    match codec {
        Codec::None => {
            reserve_within_cap(out, compressed.len(), cap)?;
            out.extend_from_slice(compressed);
            Ok(())
        }
        Codec::Gzip => {
            let mut decoder = flate2::bufread::MultiGzDecoder::new(compressed);
            read_capped(&mut decoder, out, cap, "gzip")
        }
        Codec::Snappy => unsnappy(compressed, out, cap),
        Codec::Lz4 => unlz4(compressed, out, cap),
        Codec::Zstd => unzstd(compressed, out, cap),
    }
}

/// Compresses `records` with `codec` at `level` (the codec's default when `None`), appending
/// the records section to `out`.
pub fn compress(
    codec: Codec,
    level: Option<i32>,
    records: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    let failed = |reason: std::io::Error| CompressionError::Encode {
        codec: codec.name(),
        reason: reason.to_string(),
    };
    match codec {
        Codec::None => {
            out.extend_from_slice(records);
            Ok(())
        }
        Codec::Gzip => {
            // Kafka's range is 1..=9, with -1 for zlib's default (6).
            let level = match level {
                Some(level @ 1..=9) => flate2::Compression::new(level as u32),
                _ => flate2::Compression::default(),
            };
            let mut encoder = flate2::write::GzEncoder::new(out, level);
            encoder.write_all(records).map_err(failed)?;
            encoder.finish().map_err(failed)?;
            Ok(())
        }
        Codec::Snappy => {
            out.extend_from_slice(&SNAPPY_JAVA_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes()); // version
            out.extend_from_slice(&1i32.to_be_bytes()); // compatible version
            let mut encoder = snap::raw::Encoder::new();
            for block in records.chunks(SNAPPY_JAVA_BLOCK_LEN) {
                let length_at = out.len();
                out.extend_from_slice(&[0; 4]);
                let start = out.len();
                out.resize(start + snap::raw::max_compress_len(block.len()), 0);
                let written = encoder
                    .compress(block, &mut out[start..])
                    .map_err(|error| CompressionError::Encode {
                        codec: "snappy",
                        reason: error.to_string(),
                    })?;
                out.truncate(start + written);
                let length = u32::try_from(written).unwrap_or(u32::MAX);
                out[length_at..start].copy_from_slice(&length.to_be_bytes());
            }
            Ok(())
        }
        Codec::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
            encoder.write_all(records).map_err(failed)?;
            encoder
                .finish()
                .map_err(|error| failed(std::io::Error::other(error)))?;
            Ok(())
        }
        Codec::Zstd => {
            let level = level.unwrap_or(ZSTD_DEFAULT_LEVEL);
            let compressed = zstd::bulk::compress(records, level).map_err(failed)?;
            out.extend_from_slice(&compressed);
            Ok(())
        }
    }
}

fn corrupt(codec: &'static str, reason: impl std::fmt::Display) -> CompressionError {
    CompressionError::Corrupt {
        codec,
        reason: reason.to_string(),
    }
}

/// Makes room in `out` for `additional` more bytes without letting it pass `cap`.
///
/// Capacity doubles as data arrives (so appends stay amortised) but is clamped at the cap,
/// and nothing is reserved for bytes that would pass it.
fn reserve_within_cap(
    out: &mut Vec<u8>,
    additional: usize,
    cap: usize,
) -> Result<(), CompressionError> {
    let needed = out
        .len()
        .checked_add(additional)
        .filter(|&needed| needed <= cap)
        .ok_or(CompressionError::TooLarge { cap })?;
    if needed > out.capacity() {
        let target = out.capacity().saturating_mul(2).max(needed).min(cap);
        out.reserve_exact(target - out.len());
    }
    Ok(())
}

/// Reads `decoder` to its end, appending to `out`, and fails as soon as `out` would pass
/// `cap` bytes.
fn read_capped(
    decoder: &mut impl Read,
    out: &mut Vec<u8>,
    cap: usize,
    codec: &'static str,
) -> Result<(), CompressionError> {
    let mut chunk = [0u8; READ_CHUNK_LEN];
    loop {
        let read = match decoder.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(read) => read,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => return Err(corrupt(codec, error)),
        };
        let bytes = chunk
            .get(..read)
            .ok_or_else(|| corrupt(codec, "decoder reported more bytes than it was given"))?;
        reserve_within_cap(out, bytes.len(), cap)?;
        out.extend_from_slice(bytes);
    }
}

fn unlz4(compressed: &[u8], out: &mut Vec<u8>, cap: usize) -> Result<(), CompressionError> {
    let mut decoder = lz4_flex::frame::FrameDecoder::new(compressed);
    // The decoder reports end of data at the end of each frame; frames that follow are read
    // on, as librdkafka does (producers write one frame per batch).
    loop {
        let before = decoder.get_ref().len();
        read_capped(&mut decoder, out, cap, "lz4")?;
        let after = decoder.get_ref().len();
        if after == 0 {
            return Ok(());
        }
        if after == before {
            return Err(corrupt("lz4", "undecodable bytes after the last frame"));
        }
    }
}

fn unsnappy(compressed: &[u8], out: &mut Vec<u8>, cap: usize) -> Result<(), CompressionError> {
    if !compressed.starts_with(&SNAPPY_JAVA_MAGIC) {
        return append_snappy_block(compressed, out, cap);
    }
    let mut rest = compressed;
    while !rest.is_empty() {
        if rest.starts_with(&SNAPPY_JAVA_MAGIC) {
            // Stream header, at the start or where two streams were concatenated; its
            // versions do not change the block format.
            rest = rest
                .get(SNAPPY_JAVA_HEADER_LEN..)
                .ok_or_else(|| corrupt("snappy", "truncated snappy-java stream header"))?;
            continue;
        }
        let (length, after_length) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| corrupt("snappy", "truncated snappy-java block length"))?;
        let length = usize::try_from(u32::from_be_bytes(*length))
            .map_err(|_| corrupt("snappy", "snappy-java block length overflows"))?;
        if length > after_length.len() {
            return Err(corrupt(
                "snappy",
                "snappy-java block extends past the records",
            ));
        }
        let (block, after_block) = after_length.split_at(length);
        append_snappy_block(block, out, cap)?;
        rest = after_block;
    }
    Ok(())
}

/// Decodes one raw snappy block onto the end of `out`, checking the length the block
/// declares against the cap before allocating for it.
fn append_snappy_block(
    block: &[u8],
    out: &mut Vec<u8>,
    cap: usize,
) -> Result<(), CompressionError> {
    let declared = snap::raw::decompress_len(block).map_err(|error| corrupt("snappy", error))?;
    reserve_within_cap(out, declared, cap)?;
    let start = out.len();
    out.resize(start + declared, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|error| corrupt("snappy", error))?;
    if written != declared {
        return Err(corrupt(
            "snappy",
            "block decoded to a length other than it declared",
        ));
    }
    Ok(())
}

/// First output room for a zstd batch, as a multiple of its compressed size.
const ZSTD_FIRST_ROOM_RATIO: usize = 8;

fn unzstd(compressed: &[u8], out: &mut Vec<u8>, cap: usize) -> Result<(), CompressionError> {
    // One pass into a buffer of fixed room: zstd then needs no window buffer, whatever window
    // a frame declares, and concatenated and skippable frames are handled by the library.
    // Room never passes `cap + 1` bytes, which tells "exactly the cap" from "more than the
    // cap"; a large cap is never reserved just because it is allowed.
    let limit = cap.saturating_add(1);
    let mut room = match zstd_declared_size(compressed) {
        // One frame that says how large it is (librdkafka's are): exactly that room, so no
        // retry. A frame whose content differs from its declaration fails to decode.
        Some(declared) if declared > cap => return Err(CompressionError::TooLarge { cap }),
        Some(declared) => declared,
        // Otherwise (the Java client's streamed frames, several frames) room starts at a
        // guess, or what the scratch buffer already has, and grows fourfold when the output
        // does not fit.
        None => out.capacity().max(
            compressed
                .len()
                .saturating_mul(ZSTD_FIRST_ROOM_RATIO)
                .max(READ_CHUNK_LEN),
        ),
    }
    .min(limit);
    loop {
        out.clear();
        if out.capacity() < room {
            out.reserve_exact(room);
        }
        match zstd_decode(compressed, out) {
            Ok(written) if written > cap => return Err(CompressionError::TooLarge { cap }),
            Ok(_) => return Ok(()),
            Err(ZstdFailure::OutputTooSmall) if room < limit => {
                room = room.saturating_mul(4).min(limit);
            }
            Err(ZstdFailure::OutputTooSmall) => return Err(CompressionError::TooLarge { cap }),
            Err(ZstdFailure::Corrupt(reason)) => return Err(corrupt("zstd", reason)),
        }
    }
}

/// The content size a records section declares, when it is exactly one zstd frame with the
/// size in its header; `None` otherwise (the caller then guesses).
fn zstd_declared_size(compressed: &[u8]) -> Option<usize> {
    use zstd::zstd_safe;
    let declared = zstd_safe::get_frame_content_size(compressed).ok()??;
    let frame_len = zstd_safe::find_frame_compressed_size(compressed).ok()?;
    if frame_len != compressed.len() {
        return None;
    }
    Some(usize::try_from(declared).unwrap_or(usize::MAX))
}

enum ZstdFailure {
    OutputTooSmall,
    Corrupt(String),
}

thread_local! {
    static ZSTD_DECODER: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// zstd's name for the error a one-pass decode gives when the output does not fit.
const ZSTD_OUTPUT_TOO_SMALL: &str = "Destination buffer is too small";

/// Decodes into `out`'s spare capacity with this thread's reused decoder context.
fn zstd_decode(compressed: &[u8], out: &mut Vec<u8>) -> Result<usize, ZstdFailure> {
    ZSTD_DECODER.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok();
        let mut decoder = match slot.as_deref_mut().and_then(Option::take) {
            Some(decoder) => decoder,
            None => zstd::bulk::Decompressor::new()
                .map_err(|error| ZstdFailure::Corrupt(error.to_string()))?,
        };
        let result = decoder.decompress_to_buffer(compressed, out);
        if let Some(slot) = slot.as_deref_mut() {
            *slot = Some(decoder);
        }
        result.map_err(|error| {
            let reason = error.to_string();
            if reason == ZSTD_OUTPUT_TOO_SMALL {
                ZstdFailure::OutputTooSmall
            } else {
                ZstdFailure::Corrupt(reason)
            }
        })
    })
}

#[cfg(test)]
mod tests;
