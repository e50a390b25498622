//! The `recovery-point` file of a partition directory.
//!
//! Layout (big-endian, 42 bytes):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `KRP1` |
//! | 2 | format version (1) |
//! | 8 | recovery offset: every batch below it is durable and indexed |
//! | 8 | byte position of the recovery offset inside the segment that holds it |
//! | 8 | log start offset (moved by retention and delete-records) |
//! | 8 | reserved, zero |
//! | 4 | CRC-32 (IEEE) of the 38 bytes before it |
//!
//! Write order: the segment data up to the recovery offset is fdatasync'd and its index
//! entries written and synced *before* this file is replaced (temporary file, fsync, rename,
//! directory fsync). A crash therefore leaves either the previous or the new checkpoint, and
//! both describe data that is on the disk. Recovery starts scanning at the stored position;
//! a missing or corrupt file (bad magic, version or CRC) makes recovery scan the whole log,
//! which is slower but loses nothing.

use crate::error::{EngineError, Result};

const MAGIC: &[u8; 4] = b"KRP1";
const VERSION: u16 = 1;
/// Encoded size of the file.
pub const RECOVERY_POINT_LEN: usize = 42;

/// Where recovery may start, and the log start offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RecoveryPoint {
    /// Every batch below this offset is durable and indexed.
    pub offset: u64,
    /// Byte position of `offset` in the segment holding it.
    pub position: u64,
    /// First offset readers may see.
    pub log_start_offset: u64,
}

impl RecoveryPoint {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(RECOVERY_POINT_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_be_bytes());
        out.extend_from_slice(&self.offset.to_be_bytes());
        out.extend_from_slice(&self.position.to_be_bytes());
        out.extend_from_slice(&self.log_start_offset.to_be_bytes());
        out.extend_from_slice(&0u64.to_be_bytes());
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Parses the file's bytes, checking length, magic, version and CRC.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let corrupt = |detail: &str| EngineError::Corrupt {
            what: "recovery-point".into(),
            detail: detail.into(),
        };
        if bytes.len() != RECOVERY_POINT_LEN {
            return Err(corrupt("wrong length"));
        }
        if &bytes[..4] != MAGIC {
            return Err(corrupt("bad magic"));
        }
        let (body, crc) = bytes.split_at(RECOVERY_POINT_LEN - 4);
        if crc32fast::hash(body).to_be_bytes() != crc {
            return Err(corrupt("checksum mismatch"));
        }
        if u16::from_be_bytes([body[4], body[5]]) != VERSION {
            return Err(corrupt("unknown version"));
        }
        let u64_at = |at: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&body[at..at + 8]);
            u64::from_be_bytes(word)
        };
        Ok(RecoveryPoint {
            offset: u64_at(6),
            position: u64_at(14),
            log_start_offset: u64_at(22),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(offset: u64, position: u64, log_start_offset: u64) {
            let point = RecoveryPoint { offset, position, log_start_offset };
            prop_assert_eq!(RecoveryPoint::decode(&point.encode()).ok(), Some(point));
        }

        #[test]
        fn any_bit_flip_is_detected(offset: u64, position: u64, bit in 0usize..RECOVERY_POINT_LEN * 8) {
            let mut bytes = RecoveryPoint { offset, position, log_start_offset: 3 }.encode();
            bytes[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(RecoveryPoint::decode(&bytes).is_err());
        }

        #[test]
        fn truncation_is_detected(len in 0usize..RECOVERY_POINT_LEN) {
            let bytes = RecoveryPoint::default().encode();
            prop_assert!(RecoveryPoint::decode(&bytes[..len]).is_err());
        }
    }
}
