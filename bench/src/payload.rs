//! Record values and keys.
//!
//! A value is `record_size` bytes: the first 8 hold the intended send time (little-endian
//! nanoseconds since the run's origin, read back by end-to-end consumers), the rest is taken
//! from a 1 MiB pool at a moving offset. Pool bytes are drawn uniformly from 16 distinct
//! values (4 bits of entropy per byte), so values compress about 2:1 — neither a best case
//! (zeros) nor a worst case (random bytes) for `--compression`.

use rand::{Rng, SeedableRng};

/// Bytes at the start of a value that carry the send timestamp.
pub const TIMESTAMP_BYTES: usize = 8;

const POOL_BYTES: usize = 1 << 20;

/// Builds values and keys for one producer thread.
pub struct PayloadSource {
    pool: Vec<u8>,
    value: Vec<u8>,
    offset: usize,
    keys: u64,
    key: [u8; 8],
    rng: rand::rngs::SmallRng,
}

impl PayloadSource {
    /// A source of `record_size`-byte values and, if `keys > 0`, keys drawn uniformly from
    /// `keys` distinct 8-byte keys.
    pub fn new(record_size: usize, keys: u64, seed: u64) -> Self {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        const SYMBOLS: &[u8; 16] = b"abcdefghijklmnop";
        let pool_len = POOL_BYTES + record_size;
        let pool = (0..pool_len)
            .map(|_| SYMBOLS[rng.random_range(0..SYMBOLS.len())])
            .collect();
        PayloadSource {
            pool,
            value: vec![0; record_size],
            offset: 0,
            keys,
            key: [0; 8],
            rng,
        }
    }

    /// The next value, stamped with `timestamp_nanos`.
    pub fn next_value(&mut self, timestamp_nanos: u64) -> &[u8] {
        let len = self.value.len();
        self.value
            .copy_from_slice(&self.pool[self.offset..self.offset + len]);
        // Step by a prime so consecutive values differ.
        self.offset = (self.offset + 4099) % POOL_BYTES;
        let stamp = timestamp_nanos.to_le_bytes();
        let stamped = len.min(TIMESTAMP_BYTES);
        self.value[..stamped].copy_from_slice(&stamp[..stamped]);
        &self.value
    }

    /// The next key, or `None` when records are keyless.
    pub fn next_key(&mut self) -> Option<[u8; 8]> {
        if self.keys == 0 {
            return None;
        }
        let key = self.rng.random_range(0..self.keys);
        self.key = key.to_be_bytes();
        Some(self.key)
    }
}

/// The send timestamp stamped into a value, if it is long enough to hold one.
pub fn read_timestamp(value: &[u8]) -> Option<u64> {
    let bytes: [u8; TIMESTAMP_BYTES] = value.get(..TIMESTAMP_BYTES)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_carry_their_timestamp_and_size() {
        let mut source = PayloadSource::new(100, 0, 1);
        let value = source.next_value(123_456_789).to_vec();
        assert_eq!(value.len(), 100);
        assert_eq!(read_timestamp(&value), Some(123_456_789));
        let next = source.next_value(5).to_vec();
        assert_ne!(value[8..], next[8..]);
        assert_eq!(source.next_key(), None);
    }

    #[test]
    fn keys_stay_in_range() {
        let mut source = PayloadSource::new(16, 3, 7);
        for _ in 0..100 {
            let key = source.next_key().map(u64::from_be_bytes);
            assert!(matches!(key, Some(0..=2)));
        }
    }

    #[test]
    fn short_values_have_no_timestamp() {
        assert_eq!(read_timestamp(&[1, 2, 3]), None);
    }
}
