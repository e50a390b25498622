//! Leader epochs of a partition and the `leader-epoch-checkpoint` file.
//!
//! The cache maps each leader epoch to the first offset written in it; it answers
//! OffsetForLeaderEpoch ("where does epoch E end?") and lets a takeover stamp a new epoch.
//!
//! File layout (big-endian): magic `KLE1` (4) | version u16 (1) | entry count u32 |
//! entries of (epoch i32, start offset u64) | CRC-32 (IEEE) of everything before it.
//! Written with the recovery point (temporary file, fsync, rename, directory fsync). It
//! covers the log up to the recovery point; recovery rebuilds later entries from the
//! `partitionLeaderEpoch` field of each scanned batch. A corrupt file is discarded and the
//! cache rebuilt from the batches recovery scans.

use crate::error::{EngineError, Result};

const MAGIC: &[u8; 4] = b"KLE1";
const VERSION: u16 = 1;
const ENTRY_LEN: usize = 12;

/// One epoch and the first offset written in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: i32,
    /// First offset written with this epoch.
    pub start_offset: u64,
}

/// Epoch → start offset, ascending in both.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Records that `epoch` starts at `start_offset`; ignored unless newer than the last.
    pub fn assign(&mut self, epoch: i32, start_offset: u64) {
        if epoch < 0 {
            return;
        }
        match self.entries.last() {
            Some(last) if last.epoch >= epoch => {}
            _ => self.entries.push(EpochEntry {
                epoch,
                start_offset,
            }),
        }
    }

    /// The newest epoch, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// All entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// Drops entries that start at or after `offset` (the log was truncated there).
    pub fn truncate_from(&mut self, offset: u64) {
        self.entries.retain(|e| e.start_offset < offset);
    }

    /// Kafka's OffsetForLeaderEpoch answer: the largest epoch ≤ `epoch` and the offset where
    /// it ends (the next epoch's start, or `log_end_offset` for the newest). `None` when no
    /// epoch ≤ `epoch` is known.
    pub fn end_offset_for(&self, epoch: i32, log_end_offset: u64) -> Option<(i32, u64)> {
        let index = self.entries.iter().rposition(|e| e.epoch <= epoch)?;
        let end = self
            .entries
            .get(index + 1)
            .map_or(log_end_offset, |next| next.start_offset);
        Some((self.entries[index].epoch, end))
    }

    /// The checkpoint file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(10 + self.entries.len() * ENTRY_LEN + 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_be_bytes());
        out.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        for entry in &self.entries {
            out.extend_from_slice(&entry.epoch.to_be_bytes());
            out.extend_from_slice(&entry.start_offset.to_be_bytes());
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Parses the checkpoint file, checking every length against the bytes present.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let corrupt = |detail: &str| EngineError::Corrupt {
            what: "leader-epoch-checkpoint".into(),
            detail: detail.into(),
        };
        if bytes.len() < 14 || &bytes[..4] != MAGIC {
            return Err(corrupt("bad header"));
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(body).to_be_bytes() != crc {
            return Err(corrupt("checksum mismatch"));
        }
        if u16::from_be_bytes([body[4], body[5]]) != VERSION {
            return Err(corrupt("unknown version"));
        }
        let count = u32::from_be_bytes([body[6], body[7], body[8], body[9]]) as usize;
        let entries_bytes = &body[10..];
        if entries_bytes.len() != count.saturating_mul(ENTRY_LEN) {
            return Err(corrupt("entry count does not match length"));
        }
        let mut cache = LeaderEpochCache::default();
        for chunk in entries_bytes.chunks_exact(ENTRY_LEN) {
            let epoch = i32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            let mut offset = [0u8; 8];
            offset.copy_from_slice(&chunk[4..]);
            let start_offset = u64::from_be_bytes(offset);
            if let Some(last) = cache.entries.last() {
                if last.epoch >= epoch || last.start_offset > start_offset {
                    return Err(corrupt("entries not ascending"));
                }
            }
            cache.entries.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
        Ok(cache)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn end_offsets() {
        let mut cache = LeaderEpochCache::default();
        cache.assign(0, 0);
        cache.assign(0, 10);
        cache.assign(3, 50);
        cache.assign(5, 80);
        assert_eq!(cache.end_offset_for(0, 100), Some((0, 50)));
        assert_eq!(cache.end_offset_for(4, 100), Some((3, 80)));
        assert_eq!(cache.end_offset_for(9, 100), Some((5, 100)));
        cache.truncate_from(80);
        assert_eq!(cache.latest_epoch(), Some(3));
        assert_eq!(LeaderEpochCache::default().end_offset_for(1, 0), None);
    }

    fn cache_strategy() -> impl Strategy<Value = LeaderEpochCache> {
        proptest::collection::vec((0i32..4, 0u64..1000), 0..20).prop_map(|steps| {
            let mut cache = LeaderEpochCache::default();
            let (mut epoch, mut offset) = (0i32, 0u64);
            for (epoch_step, offset_step) in steps {
                epoch += epoch_step;
                offset += offset_step;
                cache.assign(epoch, offset);
            }
            cache
        })
    }

    proptest! {
        #[test]
        fn round_trip(cache in cache_strategy()) {
            prop_assert_eq!(LeaderEpochCache::decode(&cache.encode()).ok(), Some(cache));
        }

        #[test]
        fn corruption_never_panics(cache in cache_strategy(), bit in 0usize..4096, cut in 0usize..300) {
            let mut bytes = cache.encode();
            let bit = bit % (bytes.len() * 8);
            bytes[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(LeaderEpochCache::decode(&bytes).is_err());
            let bytes = cache.encode();
            let cut = cut.min(bytes.len() - 1);
            prop_assert!(LeaderEpochCache::decode(&bytes[..cut]).is_err());
        }
    }
}
