//! Re-encoding a producer's batches in a topic's codec (`compression.type` other than
//! `producer`): the one case where the stored bytes are not the producer's.
//!
//! As Apache Kafka does, a batch already in the topic's codec is kept as it is, and any other
//! batch is re-encoded: its records are decompressed and compressed again with the topic's
//! codec and level. The header keeps every field but three: the codec bits of `attributes`
//! (the timestamp-type, transactional and control bits are kept), `batchLength`, and the CRC,
//! computed again over the new bytes. The records themselves are kept byte for byte: Kafka
//! rebuilds them with offset deltas from 0 and timestamp deltas from the first record, which
//! is what validation already requires of them (`offsetDelta` = position) and what every
//! client writes (`baseTimestamp` = the first record's timestamp), so the encoding is the
//! same. The input is validated in full first, so a corrupt batch is refused rather than
//! given a fresh CRC.

use super::{
    validate_batches, BatchError, ATTRIBUTES_POS, BATCH_HEADER_LEN, BATCH_LENGTH_POS,
    COMPRESSION_CODEC_MASK, CRC_POS, LOG_OVERHEAD,
};
use crate::compression::{self, CompressionTarget};

/// Validates `buf` (one or more batches as a producer sends them) and re-encodes every batch
/// whose codec is not `target`'s. `None` when every batch is in the target codec already,
/// so the caller stores the producer's bytes as they are.
///
/// The re-encoded batches are not checked against `max_batch_bytes` here: appending them
/// does that (a batch that grows past it is refused there, as Kafka refuses it).
pub fn recompress_batches(
    buf: &[u8],
    target: CompressionTarget,
    max_batch_bytes: usize,
) -> Result<Option<Vec<u8>>, BatchError> {
    let summaries = validate_batches(buf, max_batch_bytes)?;
    if summaries
        .iter()
        .all(|summary| summary.header.codec() == Some(target.codec))
    {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(buf.len());
    for summary in &summaries {
        let batch = &buf[summary.range.clone()];
        let Some(codec) = summary.header.codec() else {
            return Err(BatchError::InvalidCompression(
                summary.header.compression_id(),
            ));
        };
        if codec == target.codec {
            out.extend_from_slice(batch);
            continue;
        }
        let start = out.len();
        out.extend_from_slice(&batch[..BATCH_HEADER_LEN]);
        compression::with_scratch(|records| {
            let limit = compression::decompressed_limit(max_batch_bytes);
            compression::decompress(codec, &batch[BATCH_HEADER_LEN..], records, limit)?;
            compression::compress(target.codec, target.level, records, &mut out)
        })?;
        let rewritten = &mut out[start..];
        let batch_length =
            i32::try_from(rewritten.len() - LOG_OVERHEAD).map_err(|_| BatchError::TooLarge {
                size: rewritten.len(),
                max: max_batch_bytes,
            })?;
        rewritten[BATCH_LENGTH_POS..][..4].copy_from_slice(&batch_length.to_be_bytes());
        let attributes =
            (summary.header.attributes & !COMPRESSION_CODEC_MASK) | i16::from(target.codec.id());
        rewritten[ATTRIBUTES_POS..][..2].copy_from_slice(&attributes.to_be_bytes());
        let crc = super::compute_crc(rewritten);
        rewritten[CRC_POS..][..4].copy_from_slice(&crc.to_be_bytes());
    }
    Ok(Some(out))
}
