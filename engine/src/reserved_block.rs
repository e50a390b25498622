//! The "reserved block end" file: the durable end of a block of numbers handed out ahead of
//! use, so that no number is ever given out twice, even across `kill -9`. The broker keeps
//! two: the producer ids it may hand out, and the offsets a `__consumer_offsets` partition
//! may give its records.
//!
//! # Layout (big-endian, 12 bytes)
//!
//! | bytes | field |
//! |---|---|
//! | 8 | end of the reserved block (`i64`): numbers below it may be handed out |
//! | 4 | CRC-32 (IEEE) of the 8 bytes before it |
//!
//! # Write order and recovery
//!
//! The writer replaces the file with [`crate::Storage::write_small_durable`] (temporary
//! file, fsync, rename, directory fsync) *before* it hands out any number of the new block,
//! so a crash leaves the old or the new end, never a torn one. After a restart the writer
//! resumes at the stored end: numbers between the last one used and that end are never used
//! (a gap). A file of the wrong length or with a bad CRC decodes as `None`; the caller then
//! refuses to hand out numbers rather than risk reusing one.

/// Encoded size of the file.
pub const RESERVED_BLOCK_LEN: usize = 12;

/// The file's bytes for a reserved block ending at `end`.
pub fn encode(end: i64) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(RESERVED_BLOCK_LEN);
    bytes.extend_from_slice(&end.to_be_bytes());
    bytes.extend_from_slice(&crc32fast::hash(&end.to_be_bytes()).to_be_bytes());
    bytes
}

/// The stored end, or `None` when the bytes are not a whole, intact file.
pub fn decode(bytes: &[u8]) -> Option<i64> {
    let (value, crc) = (bytes.get(..8)?, bytes.get(8..12)?);
    if bytes.len() != RESERVED_BLOCK_LEN || crc32fast::hash(value).to_be_bytes() != crc {
        return None;
    }
    let mut word = [0u8; 8];
    word.copy_from_slice(value);
    Some(i64::from_be_bytes(word))
}

#[cfg(test)]
mod tests {
    use super::{decode, encode};

    /// The bytes on disk for an end of 65,536 (one `__consumer_offsets` block), as the
    /// broker wrote them before this module existed.
    const GOLDEN_65536: [u8; 12] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, // end
        0x64, 0xe0, 0xb5, 0x5e, // CRC-32 of the end
    ];

    #[test]
    fn golden_bytes() {
        assert_eq!(encode(65_536), GOLDEN_65536);
        assert_eq!(decode(&GOLDEN_65536), Some(65_536));
        assert_eq!(encode(0)[..8], [0u8; 8]);
        assert_eq!(encode(0)[8..], crc32fast::hash(&[0u8; 8]).to_be_bytes());
    }

    #[test]
    fn round_trips() {
        for end in [0, 1, 1 << 16, i64::MAX, -1, i64::MIN] {
            assert_eq!(decode(&encode(end)), Some(end));
        }
    }

    #[test]
    fn torn_or_corrupt_files_decode_as_none() {
        let good = encode(1 << 20);
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&good[..11]), None);
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(decode(&longer), None);
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            assert_eq!(decode(&bad), None, "flipped byte {at}");
        }
    }
}
